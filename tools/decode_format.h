// `rocelab decode`: how one packet is printed, as a text line or a JSON object.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "wire/frame.h"

namespace rocelab::tools {

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

std::string packet_text(const FrameRef& f, const wire::DecodedFrame& d);
std::string packet_json(const FrameRef& f, const wire::DecodedFrame& d);
std::string malformed_text(const FrameRef& f, const Malformed& m);
std::string malformed_json(const FrameRef& f, const Malformed& m);

// "0x" followed by at least `digits` lower-case hex digits.
std::string hex(uint64_t v, int digits = 1);
// "ACK credits=31", "NAK 0 (PSN sequence error)", "RNR NAK timer=14 (1280 us)".
std::string aeth_text(const wire::Aeth& a);

}  // namespace rocelab::tools
