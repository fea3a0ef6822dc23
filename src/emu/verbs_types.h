// The verbs vocabulary of the engine: every enum and flag set a verbs program
// sees. Numeric values equal libibverbs' (rdma-core verbs.h) so the shim
// converts with static_cast; the shim static_asserts that equality. This file
// must not include <infiniband/verbs.h> (src/emu does not depend on it).
#pragma once
#include <cstdint>
#include <string_view>

namespace rocelab::emu {

// ibv_qp_state
enum class QpState : uint8_t { kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kSqd = 4, kSqe = 5, kErr = 6 };
inline constexpr int kNumQpStates = 7;
std::string_view to_string(QpState s);

// ibv_qp_type (only the types the engine implements). XRC (IBTA XRC annex):
// an initiator (IBV_QPT_XRC_SEND) sends to target QPs (IBV_QPT_XRC_RECV),
// which steer each message to the XRC SRQ its XRCETH names.
enum class QpType : uint8_t { kRC = 2, kUC = 3, kUD = 4, kXrcIni = 9, kXrcTgt = 10 };
std::string_view to_string(QpType t);

// ibv_mig_state
enum class MigState : uint8_t { kMigrated = 0, kRearm = 1, kArmed = 2 };

// ibv_mtu
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
constexpr uint32_t mtu_bytes(Mtu m) { return 128u << static_cast<uint8_t>(m); }
// The Mtu for 256, 512, 1024, 2048 or 4096 bytes; false for any other value.
constexpr bool mtu_from_bytes(uint32_t bytes, Mtu* out) {
  for (uint8_t v = 1; v <= 5; ++v) {
    if ((128u << v) == bytes) { *out = static_cast<Mtu>(v); return true; }
  }
  return false;
}

// The active MTU of a RoCE port on a link of link_mtu bytes, as Soft-RoCE
// derives it (rxe_set_mtu): the largest IBTA MTU that fits after 80 bytes of
// headers (Ethernet, IP, UDP, BTH and the rest), at least 256, at most 4096.
// A 1500-byte Ethernet link gives 1024; loopback (65536) gives 4096.
constexpr Mtu mtu_for_link(uint32_t link_mtu) {
  constexpr uint32_t kRxeMaxHdrLength = 80;
  const uint32_t room = link_mtu > kRxeMaxHdrLength ? link_mtu - kRxeMaxHdrLength : 0;
  Mtu m = Mtu::k256;
  for (uint8_t v = 1; v <= 5; ++v)
    if ((128u << v) <= room) m = static_cast<Mtu>(v);
  return m;
}
static_assert(mtu_for_link(1500) == Mtu::k1024 && mtu_for_link(65536) == Mtu::k4096 &&
              mtu_for_link(9000) == Mtu::k4096 && mtu_for_link(1104) == Mtu::k1024 && mtu_for_link(1103) == Mtu::k512 &&
              mtu_for_link(1000) == Mtu::k512 && mtu_for_link(100) == Mtu::k256);

// ibv_port_state / link layer / ibv_atomic_cap / ibv_gid_type
enum class PortState : uint8_t { kNop = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };
enum class LinkLayer : uint8_t { kUnspecified = 0, kInfiniband = 1, kEthernet = 2 };
enum class AtomicCap : uint8_t { kNone = 0, kHca = 1, kGlob = 2 };
enum class GidType : uint8_t { kIb = 0, kRoceV1 = 1, kRoceV2 = 2 };

// ibv_qp_attr_mask bits
namespace qp_attr {
inline constexpr uint32_t kState = 1u << 0, kCurState = 1u << 1, kEnSqdAsyncNotify = 1u << 2,
    kAccessFlags = 1u << 3, kPkeyIndex = 1u << 4, kPort = 1u << 5, kQkey = 1u << 6, kAv = 1u << 7,
    kPathMtu = 1u << 8, kTimeout = 1u << 9, kRetryCnt = 1u << 10, kRnrRetry = 1u << 11,
    kRqPsn = 1u << 12, kMaxQpRdAtomic = 1u << 13, kAltPath = 1u << 14, kMinRnrTimer = 1u << 15,
    kSqPsn = 1u << 16, kMaxDestRdAtomic = 1u << 17, kPathMigState = 1u << 18, kCap = 1u << 19,
    kDestQpn = 1u << 20, kRateLimit = 1u << 25;
inline constexpr int kNumBits = 26;  // bits 0..25 (21..24 are unused by libibverbs)
std::string_view bit_name(uint32_t bit);  // "STATE", "AV", ...; "" for unknown bits
}  // namespace qp_attr

// ibv_access_flags
namespace access {
inline constexpr unsigned kLocalWrite = 1u << 0, kRemoteWrite = 1u << 1, kRemoteRead = 1u << 2,
    kRemoteAtomic = 1u << 3, kMwBind = 1u << 4, kZeroBased = 1u << 5, kOnDemand = 1u << 6,
    kHugetlb = 1u << 7, kRelaxedOrdering = 1u << 20;
// Bits 20..29 are optional (IBV_ACCESS_OPTIONAL_RANGE): a device that does not
// know one ignores it. Any other unknown bit is EINVAL (ib_check_mr_access).
inline constexpr unsigned kOptionalRange = 0x3FF00000u;
inline constexpr unsigned kKnownMr = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic |
                                     kMwBind | kZeroBased | kOnDemand | kHugetlb;
}  // namespace access

// ibv_srq_type (BASIC and XRC; TM is not implemented)
enum class SrqType : uint8_t { kBasic = 0, kXrc = 1 };

// ibv_mw_type
enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };

// ibv_wr_opcode
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0, kRdmaWriteWithImm = 1, kSend = 2, kSendWithImm = 3, kRdmaRead = 4,
  kAtomicCmpAndSwp = 5, kAtomicFetchAndAdd = 6, kLocalInv = 7, kBindMw = 8, kSendWithInv = 9,
};
std::string_view to_string(WrOpcode o);

// ibv_send_flags
namespace send_flags {
inline constexpr unsigned kFence = 1u << 0, kSignaled = 1u << 1, kSolicited = 1u << 2,
    kInline = 1u << 3, kIpCsum = 1u << 4;
}  // namespace send_flags

// ibv_wc_status
enum class WcStatus : uint8_t {
  kSuccess = 0, kLocLenErr = 1, kLocQpOpErr = 2, kLocEecOpErr = 3, kLocProtErr = 4,
  kWrFlushErr = 5, kMwBindErr = 6, kBadRespErr = 7, kLocAccessErr = 8, kRemInvReqErr = 9,
  kRemAccessErr = 10, kRemOpErr = 11, kRetryExcErr = 12, kRnrRetryExcErr = 13,
  kLocRddViolErr = 14, kRemInvRdReqErr = 15, kRemAbortErr = 16, kInvEecnErr = 17,
  kInvEecStateErr = 18, kFatalErr = 19, kRespTimeoutErr = 20, kGeneralErr = 21,
};
std::string_view to_string(WcStatus s);  // "SUCCESS", "WR_FLUSH_ERR", ... (ibv_wc_status_str style)

// ibv_wc_opcode
enum class WcOpcode : uint8_t {
  kSend = 0, kRdmaWrite = 1, kRdmaRead = 2, kCompSwap = 3, kFetchAdd = 4, kBindMw = 5,
  kLocalInv = 6, kRecv = 128, kRecvRdmaWithImm = 129,
};
std::string_view to_string(WcOpcode o);

// ibv_wc_flags
namespace wc_flags {
inline constexpr unsigned kGrh = 1u << 0, kWithImm = 1u << 1, kIpCsumOk = 1u << 2, kWithInv = 1u << 3;
}  // namespace wc_flags

// ibv_event_type
enum class EventType : uint8_t {
  kCqErr = 0, kQpFatal = 1, kQpReqErr = 2, kQpAccessErr = 3, kCommEst = 4, kSqDrained = 5,
  kPathMig = 6, kPathMigErr = 7, kDeviceFatal = 8, kPortActive = 9, kPortErr = 10,
  kLidChange = 11, kPkeyChange = 12, kSmChange = 13, kSrqErr = 14, kSrqLimitReached = 15,
  kQpLastWqeReached = 16, kClientReregister = 17, kGidChange = 18,
};
std::string_view to_string(EventType e);

// ibv_srq_attr_mask
namespace srq_attr {
inline constexpr uint32_t kMaxWr = 1u << 0, kLimit = 1u << 1;
}  // namespace srq_attr

// ibv_device_cap_flags (the ones the engine advertises)
namespace device_cap {
inline constexpr unsigned kBadPkeyCntr = 1u << 1, kBadQkeyCntr = 1u << 2,
    kCurrQpStateMod = 1u << 7, kShutdownPort = 1u << 8, kPortActiveEvent = 1u << 10,
    kSysImageGuid = 1u << 11, kRcRnrNakGen = 1u << 12, kSrqResize = 1u << 13,
    kNNotifyCq = 1u << 14, kMemWindow = 1u << 17, kMemWindowType2A = 1u << 23,
    kMemWindowType2B = 1u << 24, kXrc = 1u << 20;
}  // namespace device_cap

// ibv_port_cap_flags (the ones the engine advertises)
namespace port_cap {
inline constexpr uint32_t kCmSup = 1u << 16, kIpBasedGids = 1u << 26;
}  // namespace port_cap

}  // namespace rocelab::emu
