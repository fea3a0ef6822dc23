// Communication Management MADs (IBTA Vol 1 ch. 12.6; the kernel's
// include/rdma/ibta_vol1_c12.h, drivers/infiniband/core/cm_msgs.h; Wireshark's
// packet-infiniband.c): management class 0x07, class version 2, method Send.
// Each message is the 232 bytes after the common MAD header (mad.h). Where each
// field lies in them is written once, in cm_mad.cc (one layout() per message,
// used to encode and to parse); the IBTA table of each message is named at its
// struct below. Private data fields are fixed-size on the wire:
// the sender zero-fills what it does not use, and no length travels with it.
//
// rdma_cm on RoCEv2: the kernel puts these MADs in a UD SEND Only to QP 1
// (gsi.h), GIDs are ::ffff:a.b.c.d or the IPv6 address, LIDs are 0xFFFF
// (permissive) on RoCE, and REQ's private data starts with cma_hdr (cma_hdr.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "wire/error.h"
#include "wire/mad.h"
#include "wire/psn.h"

namespace rocelab::wire {

inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr size_t kCmDataLen = kMadLen - kMadHeaderLen;  // 232

enum class CmAttr : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001A,
};
// "ConnectRequest", "ConnectReply", ... as IBTA Table 98 (and Wireshark) name them.
std::string_view to_string(CmAttr a);
// "REQ", "REP", ...
std::string_view short_name(CmAttr a);

using Gid = std::array<uint8_t, 16>;

// Transport Service Type in REQ (2 bits): RC 0, UC 1, RD 2.
enum class CmTransport : uint8_t { kRc = 0, kUc = 1, kRd = 2, kReserved = 3 };

// One path of a REQ (primary and alternate). 44 bytes.
struct CmPath {
  uint16_t local_lid = 0xFFFF, remote_lid = 0xFFFF;  // permissive on RoCE
  Gid local_gid{}, remote_gid{};
  uint32_t flow_label = 0;     // 20 bits
  uint8_t packet_rate = 0;     // 6 bits (IBTA rate encoding)
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;              // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us * 2^n
  bool operator==(const CmPath&) const = default;
};

// ConnectRequest (REQ), Table 99.
struct CmReq {
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  Qpn local_qpn;                     // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;           // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;          // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits: 4.096 us * 2^n
  CmTransport transport = CmTransport::kRc;  // 2 bits
  bool end_to_end_flow_control = false;
  Psn starting_psn;                  // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;           // 3 bits
  uint16_t pkey = 0xFFFF;
  uint8_t path_mtu = 0;              // 4 bits (IBV_MTU_*: 1=256 .. 5=4096)
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;       // 3 bits
  uint8_t max_cm_retries = 0;        // 4 bits
  bool srq = false;
  uint8_t extended_transport = 0;    // 3 bits (XRC: 1)
  CmPath primary;
  CmPath alternate;                  // all zero when there is none
  std::array<uint8_t, 92> private_data{};
  bool operator==(const CmReq&) const = default;
};

// Which message an MRA or REJ answers (2 bits).
enum class CmMsgRef : uint8_t { kReq = 0, kRep = 1, kLap = 2, kOther = 3 };

// MessageReceiptAcknowledgement (MRA), Table 101: "I got it, give me longer".
struct CmMra {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  CmMsgRef message_mraed = CmMsgRef::kReq;         // 2 bits
  uint8_t service_timeout = 0;                     // 5 bits
  std::array<uint8_t, 222> private_data{};
  bool operator==(const CmMra&) const = default;
};

// Reject reasons (IBTA Table 103) that rdma_cm and this project use or show.
namespace rej_reason {
inline constexpr uint16_t kNoQp = 1, kNoEec = 2, kNoResources = 3, kTimeout = 4,
                          kUnsupportedReq = 5, kInvalidCommId = 6, kInvalidCommInstance = 7,
                          kInvalidServiceId = 8, kInvalidTransportType = 9, kStaleConn = 10,
                          kRdcNotExist = 11, kInvalidGid = 12, kInvalidLid = 13,
                          kInvalidSl = 14, kInvalidTrafficClass = 15, kInvalidHopLimit = 16,
                          kInvalidPacketRate = 17, kInvalidAltGid = 18, kInvalidAltLid = 19,
                          kInvalidAltSl = 20, kInvalidAltTrafficClass = 21,
                          kInvalidAltHopLimit = 22, kInvalidAltPacketRate = 23,
                          kPortCmRedirect = 24, kPortRedirect = 25, kInvalidMtu = 26,
                          kInsufficientRespResources = 27, kConsumerReject = 28,
                          kInvalidRnrRetry = 29, kDuplicateLocalCommId = 30,
                          kInvalidClassVersion = 31, kInvalidFlowLabel = 32,
                          kInvalidAltFlowLabel = 33, kVendorOptionNotSupported = 35;
}
// "consumer reject", "invalid service ID", ...; "reserved" for unknown values.
std::string_view rej_reason_name(uint16_t reason);

// ConnectReject (REJ), Table 102.
struct CmRej {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  CmMsgRef message_rejected = CmMsgRef::kReq;      // 2 bits
  uint8_t reject_info_length = 0;                  // 7 bits, bytes of ARI used
  uint16_t reason = 0;
  std::array<uint8_t, 72> ari{};                   // Additional Rejection Information
  std::array<uint8_t, 148> private_data{};
  bool operator==(const CmRej&) const = default;
};

// ConnectReply (REP), Table 104.
struct CmRep {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t local_qkey = 0;
  Qpn local_qpn;                                   // 24 bits
  uint32_t local_eecn = 0;                         // 24 bits
  Psn starting_psn;                                // 24 bits
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;                    // 5 bits
  uint8_t failover_accepted = 0;                   // 2 bits
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;                     // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, 196> private_data{};
  bool operator==(const CmRep&) const = default;
};

// ReadyToUse (RTU), Table 105.
struct CmRtu {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<uint8_t, 224> private_data{};
  bool operator==(const CmRtu&) const = default;
};

// DisconnectRequest (DREQ), Table 106.
struct CmDreq {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  Qpn remote_qpn;                                  // 24 bits: remote QPN/EECN
  std::array<uint8_t, 220> private_data{};
  bool operator==(const CmDreq&) const = default;
};

// DisconnectReply (DREP), Table 107.
struct CmDrep {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<uint8_t, 224> private_data{};
  bool operator==(const CmDrep&) const = default;
};

// ServiceIDResolutionRequest (SIDR_REQ), Table 112: rdma_cm's RDMA_PS_UDP.
struct CmSidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = 0xFFFF;
  uint64_t service_id = 0;
  std::array<uint8_t, 216> private_data{};
  bool operator==(const CmSidrReq&) const = default;
};

// SIDR_REP status (Table 113).
namespace sidr_status {
inline constexpr uint8_t kValid = 0, kServiceIdNotSupported = 1, kRejected = 2, kNoQp = 3,
                         kRedirect = 4, kUnsupportedVersion = 5;
}

// ServiceIDResolutionResponse (SIDR_REP), Table 113.
struct CmSidrRep {
  uint32_t request_id = 0;
  uint8_t status = 0;
  uint8_t additional_info_length = 0;
  Qpn qpn;                                  // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, 72> class_port_info{};  // redirection; also the additional info
  std::array<uint8_t, 136> private_data{};
  bool operator==(const CmSidrRep&) const = default;
};

using CmMessage =
    std::variant<CmReq, CmMra, CmRej, CmRep, CmRtu, CmDreq, CmDrep, CmSidrReq, CmSidrRep>;
CmAttr attr_of(const CmMessage& m);

// A whole CM MAD. On encode, hdr.attr_id is taken from msg and the rest of hdr
// is written as given (make_cm_mad fills the CM defaults).
struct CmMad {
  MadHeader hdr;
  CmMessage msg;
};

// A CM MAD with the common header a CM sends: base version 1, class 0x07,
// class version 2, method Send, status 0, the given TID and attribute modifier 0.
CmMad make_cm_mad(uint64_t tid, CmMessage msg);

// Writes the 256-byte MAD into out. Errors: kBufferTooSmall, kFieldOutOfRange
// (a value wider than its bit field: a 5-bit timeout of 32, a 24-bit EECN,
// a 20-bit flow label, a 7-bit reject info length ...).
Result<size_t> encode_cm_mad(std::span<std::byte> out, const CmMad& m);

// Reads a CM MAD. Never reads out of bounds. Errors: kTruncated (fewer than
// 256 bytes), kBadMad (base version not 1, or a CM MAD whose class version is
// not 2), kNotCmMad (another management class), kUnknownCmAttribute (LAP, APR,
// ClassPortInfo or an unassigned ID). Reserved bits are ignored.
Result<CmMad> parse_cm_mad(std::span<const std::byte> mad);

}  // namespace rocelab::wire
