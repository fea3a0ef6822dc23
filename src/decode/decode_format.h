// `rocelab decode`: how one packet is printed, as a text line or a JSON object.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "wire/frame.h"
#include "wire/ib_native.h"

namespace rocelab::decode {

// Where a packet sits: file, 1-based frame number, capture time.
struct FrameRef {
  std::string_view file;
  uint64_t frame = 0;
  std::chrono::nanoseconds ts{0};   // absolute, as captured
  std::chrono::nanoseconds rel{0};  // since the file's first frame
};

// A packet that shows UDP port 4791 but cannot be decoded.
struct Malformed {
  std::error_code error;
  std::optional<wire::IpUdpInfo> ip;  // when the IP and UDP headers parsed
  std::optional<uint8_t> opcode;      // first byte of the UDP payload, when present
  size_t caplen = 0, orig_len = 0;
};

// Who sent a packet to whom: IP and UDP for RoCEv2, LRH (and GRH) for native InfiniBand.
struct Endpoints {
  std::string src, dst;                   // "192.0.2.1", or "LID 4", or a GID
  const wire::IpUdpInfo* ip = nullptr;    // RoCEv2
  const wire::IbFrame* ib = nullptr;      // native InfiniBand
};
Endpoints endpoints(const wire::DecodedFrame& d);
Endpoints endpoints(const wire::IbFrame& f);

// One decoded packet; icrc_computed is compared with p.icrc.
std::string packet_text(const FrameRef& f, const Endpoints& e, const wire::RocePacket& p,
                        uint32_t icrc_computed);
std::string packet_json(const FrameRef& f, const Endpoints& e, const wire::RocePacket& p,
                        uint32_t icrc_computed);
std::string malformed_text(const FrameRef& f, const Malformed& m);
std::string malformed_json(const FrameRef& f, const Malformed& m);

}  // namespace rocelab::decode
