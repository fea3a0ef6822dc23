#include "wire/error.h"

namespace rocelab::wire {
namespace {

class WireCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rocelab.wire"; }
  std::string message(int ev) const override {
    switch (static_cast<WireErrc>(ev)) {
      case WireErrc::kOk: return "ok";
      case WireErrc::kTruncated: return "truncated packet";
      case WireErrc::kOversized: return "oversized packet";
      case WireErrc::kBadTVer: return "BTH TVer is not 0";
      case WireErrc::kUnknownOpcode: return "unknown BTH opcode";
      case WireErrc::kBadPadCount: return "pad count exceeds payload";
      case WireErrc::kUnexpectedPayload: return "payload on an opcode that carries none";
      case WireErrc::kBadIcrc: return "bad ICRC";
      case WireErrc::kBadIpHeader: return "bad IP header";
      case WireErrc::kBadUdpHeader: return "bad UDP header";
      case WireErrc::kNotRoce: return "not a RoCEv2 packet";
      case WireErrc::kUnsupportedLinkType: return "unsupported link type";
      case WireErrc::kBufferTooSmall: return "output buffer too small";
      case WireErrc::kPayloadTooLarge: return "payload larger than 4096 bytes";
      case WireErrc::kNotCapture: return "not a pcap or pcapng capture";
      case WireErrc::kPcapIo: return "pcap I/O error";
      case WireErrc::kClosed: return "pcap file already closed";
      case WireErrc::kBadMad: return "bad MAD header (base or class version)";
      case WireErrc::kNotCmMad: return "MAD is not of the CM management class";
      case WireErrc::kUnknownCmAttribute: return "unknown CM attribute ID";
      case WireErrc::kFieldOutOfRange: return "value does not fit its field";
      case WireErrc::kBadCmaHdr: return "bad rdma_cm private-data header";
    }
    return "unknown wire error";
  }
};

}  // namespace

const std::error_category& wire_category() {
  static const WireCategory category;
  return category;
}

}  // namespace rocelab::wire
