// ACK Extended Transport Header, 4 bytes (IBTA 9.3.5): Syndrome 8 | MSN 24.
// Syndrome bits 6-5 say what it is:
//   00 ACK       bits 4-0: credit count (rxe always sends 0x1F: no end-to-end credits)
//   01 RNR NAK   bits 4-0: the minimum RNR NAK timer code (IBTA Table 45)
//   11 NAK       bits 4-0: 0 PSN sequence error, 1 invalid request, 2 remote access
//                error, 3 remote operational error, 4 invalid RD request
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"
#include "wire/psn.h"

namespace rocelab::wire {

enum class AckKind : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

enum class NakCode : uint8_t {
  kPsnSeqError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOpError = 3,
  kInvalidRdRequest = 4,
};

struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits

  static Aeth load(const std::byte* p) { return {load8(p), load_be24(p + 1)}; }
  void store(std::byte* p) const {
    store8(p, syndrome);
    store_be24(p + 1, msn & kMask24);
  }

  AckKind kind() const { return static_cast<AckKind>((syndrome >> 5) & 3); }
  uint8_t value5() const { return syndrome & 0x1F; }  // credits, RNR timer or NAK code

  static Aeth ack(uint32_t msn, uint8_t credits = 0x1F) {
    return {static_cast<uint8_t>(credits & 0x1F), msn};
  }
  static Aeth rnr_nak(uint32_t msn, uint8_t timer_code) {
    return {static_cast<uint8_t>(0x20 | (timer_code & 0x1F)), msn};
  }
  static Aeth nak(uint32_t msn, NakCode code) {
    return {static_cast<uint8_t>(0x60 | static_cast<uint8_t>(code)), msn};
  }
  bool operator==(const Aeth&) const = default;
};
static_assert(kAethLen == 4);

std::string_view to_string(NakCode c);

// IBTA Table 45: RNR NAK timer field code -> minimum delay in microseconds.
uint32_t rnr_timer_us(uint8_t code);

}  // namespace rocelab::wire
