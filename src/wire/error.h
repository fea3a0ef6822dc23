// Typed results for the wire layer: no exceptions in src/wire (docs/style.md §7).
#pragma once
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace rocelab::wire {

enum class WireErrc {
  kOk = 0,
  kTruncated = 1,         // buffer shorter than its headers say
  kOversized,             // longer than any RoCEv2 packet can be
  kBadTVer,               // BTH transport header version != 0
  kUnknownOpcode,         // opcode not in the IBTA table we implement
  kBadPadCount,           // pad count larger than the payload carries
  kUnexpectedPayload,     // payload on an opcode that carries none (ACK, READ request, atomic)
  kBadIcrc,               // invariant CRC mismatch
  kBadIpHeader,           // IP version/IHL/length inconsistent
  kBadUdpHeader,          // UDP length inconsistent
  kNotRoce,               // not UDP to port 4791 (not an error for a capture: skipped)
  kUnsupportedLinkType,   // pcap link type we cannot decode
  kBufferTooSmall,        // encoder: output buffer too small
  kPayloadTooLarge,       // encoder: payload exceeds the maximum MTU
  kNotCapture,            // file is not a pcap or pcapng capture libpcap can read
  kPcapIo,                // libpcap read/write failure (details from pcap_geterr)
  kClosed,                // pcap writer/reader used after close()
  kBadMad,                // MAD header: base version is not 1, or the class version is not the class's
  kNotCmMad,              // a MAD of another management class than CM (0x07)
  kUnknownCmAttribute,    // CM MAD whose attribute ID is not one we implement
  kFieldOutOfRange,       // encoder: a value does not fit its field's bit width
  kBadCmaHdr,             // rdma_cm private-data header: version not 0 or IP version not 4/6
};

const std::error_category& wire_category();
inline std::error_code make_error_code(WireErrc e) { return {static_cast<int>(e), wire_category()}; }

// A value or an error code, in the style of std::expected (C++23).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                  // NOLINT: implicit by design
  Result(std::error_code ec) : v_(ec) {}                     // NOLINT
  Result(WireErrc e) : v_(make_error_code(e)) {}             // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  std::error_code error() const { return ok() ? std::error_code{} : std::get<std::error_code>(v_); }

 private:
  std::variant<T, std::error_code> v_;
};

}  // namespace rocelab::wire

template <>
struct std::is_error_code_enum<rocelab::wire::WireErrc> : std::true_type {};
