// The IBTA BTH opcode table (IBTA vol. 1, 9.2.3, Table 38) for RC, UC, UD and
// XRC, plus the RoCEv2 CNP. One table drives the encoder, the decoder, length
// checks and demux (docs/style.md §5): the RC rows are constexpr
// (opcode_table.cc), expanded once, at first use, into one 256-entry table for
// all transports. Each entry holds the spec's name, the transport, the extension
// headers it carries and the opcode class.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rocelab::wire {

enum class Transport : uint8_t { kRC, kUC, kUD, kXRC, kCNP };
std::string_view to_string(Transport t);

// Extension headers present after the BTH (a flag set).
enum class Hdr : uint16_t {
  kNone = 0,
  kDeth = 1 << 0,
  kXrcEth = 1 << 1,
  kReth = 1 << 2,
  kAtomicEth = 1 << 3,
  kAeth = 1 << 4,
  kAtomicAckEth = 1 << 5,
  kImmDt = 1 << 6,
  kIeth = 1 << 7,
  kCnpPad = 1 << 8,  // RoCEv2 CNP: 16 reserved bytes after the BTH
};
constexpr Hdr operator|(Hdr a, Hdr b) { return Hdr(uint16_t(a) | uint16_t(b)); }
constexpr bool has(Hdr set, Hdr h) { return (uint16_t(set) & uint16_t(h)) != 0; }

// What the opcode does (a separate flag set, so neither is tested against a raw byte).
enum class OpClass : uint16_t {
  kNone = 0,
  kRequest = 1 << 0,   // sent by a requester
  kResponse = 1 << 1,  // sent by a responder (ACK, ATOMIC ACK, READ response)
  kSend = 1 << 2,
  kWrite = 1 << 3,
  kRead = 1 << 4,      // READ request or READ response
  kAtomic = 1 << 5,    // CmpSwap, FetchAdd or ATOMIC Acknowledge
  kAck = 1 << 6,       // Acknowledge (ACK or NAK)
  kFirst = 1 << 7,
  kMiddle = 1 << 8,
  kLast = 1 << 9,
  kImm = 1 << 10,
  kInv = 1 << 11,
  kPayload = 1 << 12,  // may carry a payload
  kCnp = 1 << 13,
  kOnly = kFirst | kLast,
};
constexpr OpClass operator|(OpClass a, OpClass b) { return OpClass(uint16_t(a) | uint16_t(b)); }
constexpr bool has(OpClass set, OpClass c) { return (uint16_t(set) & uint16_t(c)) == uint16_t(c); }

// Header sizes in bytes (IBTA 9.2-9.3; RoCEv2 annex A17 for the CNP).
inline constexpr size_t kBthLen = 12, kRethLen = 16, kAethLen = 4, kAtomicEthLen = 28,
                        kAtomicAckEthLen = 8, kDethLen = 8, kImmDtLen = 4, kIethLen = 4,
                        kXrcEthLen = 4, kCnpPadLen = 16, kIcrcLen = 4;
inline constexpr size_t kMaxMtu = 4096;

// Byte length of one extension header.
constexpr size_t header_len(Hdr h) {
  switch (h) {
    case Hdr::kDeth: return kDethLen;
    case Hdr::kXrcEth: return kXrcEthLen;
    case Hdr::kReth: return kRethLen;
    case Hdr::kAtomicEth: return kAtomicEthLen;
    case Hdr::kAeth: return kAethLen;
    case Hdr::kAtomicAckEth: return kAtomicAckEthLen;
    case Hdr::kImmDt: return kImmDtLen;
    case Hdr::kIeth: return kIethLen;
    case Hdr::kCnpPad: return kCnpPadLen;
    case Hdr::kNone: return 0;
  }
  return 0;
}

// Extension headers in the order they follow the BTH (IBTA 9.2, Figure 63).
inline constexpr std::array<Hdr, 9> kHeaderOrder = {
    Hdr::kDeth, Hdr::kXrcEth, Hdr::kReth, Hdr::kAtomicEth, Hdr::kAeth,
    Hdr::kAtomicAckEth, Hdr::kImmDt, Hdr::kIeth, Hdr::kCnpPad};

struct OpInfo {
  bool valid = false;
  uint8_t code = 0;
  std::string_view name;  // as the spec writes it, e.g. "RC RDMA WRITE First"
  Transport transport = Transport::kRC;
  Hdr hdrs = Hdr::kNone;
  OpClass cls = OpClass::kNone;

  constexpr bool is(OpClass c) const { return has(cls, c); }
  constexpr bool carries(Hdr h) const { return has(hdrs, h); }
  // Length of BTH plus every extension header.
  constexpr size_t header_bytes() const {
    size_t n = kBthLen;
    for (Hdr h : kHeaderOrder) if (carries(h)) n += header_len(h);
    return n;
  }
  // Offset of extension header h from the start of the BTH (h must be carried).
  constexpr size_t offset_of(Hdr h) const {
    size_t n = kBthLen;
    for (Hdr x : kHeaderOrder) {
      if (x == h) return n;
      if (carries(x)) n += header_len(x);
    }
    return n;
  }
};

// The table, indexed by BTH opcode byte. Entries with valid == false are opcodes
// we do not implement (RD, reserved, manufacturer-specific).
const std::array<OpInfo, 256>& opcode_table();
inline const OpInfo& op_info(uint8_t opcode) { return opcode_table()[opcode]; }

// Named opcodes used by the engine (IBTA Table 38 values).
namespace op {
inline constexpr uint8_t kRcSendFirst = 0x00, kRcSendMiddle = 0x01, kRcSendLast = 0x02,
    kRcSendLastImm = 0x03, kRcSendOnly = 0x04, kRcSendOnlyImm = 0x05, kRcWriteFirst = 0x06,
    kRcWriteMiddle = 0x07, kRcWriteLast = 0x08, kRcWriteLastImm = 0x09, kRcWriteOnly = 0x0A,
    kRcWriteOnlyImm = 0x0B, kRcReadRequest = 0x0C, kRcReadRespFirst = 0x0D,
    kRcReadRespMiddle = 0x0E, kRcReadRespLast = 0x0F, kRcReadRespOnly = 0x10,
    kRcAck = 0x11, kRcAtomicAck = 0x12, kRcCmpSwap = 0x13, kRcFetchAdd = 0x14,
    kRcSendLastInv = 0x16, kRcSendOnlyInv = 0x17;
inline constexpr uint8_t kUcBase = 0x20, kUdBase = 0x60, kXrcBase = 0xA0;
inline constexpr uint8_t kUdSendOnly = 0x64, kUdSendOnlyImm = 0x65;
inline constexpr uint8_t kCnp = 0x81;
}  // namespace op

// The RC-relative opcode of any transport's opcode (its low five bits: XRC's
// CmpSwap 0xB3 is RC's 0x13), for what the transports share.
constexpr uint8_t rc_relative(uint8_t opcode) { return opcode & 0x1F; }

// The opcode of transport t for the RC-relative opcode rc_op (e.g. UC SEND Only =
// for_transport(kUC, kRcSendOnly)), or nullopt when t has no such opcode.
std::optional<uint8_t> for_transport(Transport t, uint8_t rc_op);

}  // namespace rocelab::wire
