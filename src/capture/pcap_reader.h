// Reading captures through libpcap: pcap (micro- or nanosecond) and pcapng,
// any link type. decode_frame() understands Ethernet (VLAN / QinQ tagged too),
// raw IP, Linux cooked SLL and SLL2 (`tcpdump -i any`); other link types (for
// example ERF, DLT 197, with native InfiniBand) read fine but hold no RoCEv2.
//
// Not thread-safe: one reader per thread.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "wire/error.h"

namespace rocelab::capture {

struct CapturedFrame {
  std::chrono::nanoseconds ts{0};    // since the Unix epoch, as the capture says
  std::span<const std::byte> data;   // caplen bytes; valid until the next next()
  uint32_t orig_len = 0;             // length on the wire (> data.size() when snapped)
};

class PcapReader {
 public:
  // Errors: the errno of fopen (std::generic_category) for a missing or
  // unreadable file, kNotCapture when libpcap does not recognize the format.
  // *detail gets the system's or libpcap's text when given.
  static wire::Result<PcapReader> open(const std::string& path, std::string* detail = nullptr);

  PcapReader(PcapReader&&) noexcept;
  PcapReader& operator=(PcapReader&&) noexcept;
  ~PcapReader();

  // The DLT_ value of the capture (pcapng: of its first interface). Note that
  // libpcap reports LINKTYPE_RAW (101) as DLT_RAW (12 on Linux).
  int link_type() const;
  std::string link_type_name() const;  // e.g. "EN10MB", "LINUX_SLL2", "ERF"

  // The next frame, std::nullopt at the end of the file. Errors: kPcapIo for a
  // damaged or truncated file (*detail gets libpcap's text), kClosed.
  wire::Result<std::optional<CapturedFrame>> next(std::string* detail = nullptr);

 private:
  struct State;
  explicit PcapReader(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace rocelab::capture
