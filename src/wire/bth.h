// Base Transport Header, 12 bytes (IBTA 9.2):
//  byte 0      OpCode
//  byte 1      SE(0x80) | MigReq(0x40) | PadCnt(0x30) | TVer(0x0F)
//  bytes 2-3   P_Key
//  byte 4      FECN(0x80) | BECN(0x40) | reserved   (masked in the ICRC)
//  bytes 5-7   DestQP (24 bits)
//  byte 8      AckReq(0x80) | reserved
//  bytes 9-11  PSN (24 bits)
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"
#include "wire/psn.h"

namespace rocelab::wire {

// Read access to a BTH in a received buffer.
class BthView {
 public:
  explicit BthView(const std::byte* p) : p_(p) {}
  uint8_t opcode() const { return load8(p_); }
  bool se() const { return load8(p_ + 1) & 0x80; }
  bool mig_req() const { return load8(p_ + 1) & 0x40; }
  uint8_t pad_count() const { return (load8(p_ + 1) >> 4) & 3; }
  uint8_t tver() const { return load8(p_ + 1) & 0x0F; }
  uint16_t pkey() const { return load_be16(p_ + 2); }
  bool fecn() const { return load8(p_ + 4) & 0x80; }
  bool becn() const { return load8(p_ + 4) & 0x40; }
  Qpn dest_qpn() const { return Qpn(load_be24(p_ + 5)); }
  bool ack_req() const { return load8(p_ + 8) & 0x80; }
  Psn psn() const { return Psn(load_be24(p_ + 9)); }

 private:
  const std::byte* p_;
};

// Write access to a BTH being built.
class BthWriter {
 public:
  explicit BthWriter(std::byte* p) : p_(p) {}
  void set_opcode(uint8_t v) { store8(p_, v); }
  void set_flags(bool se, bool mig_req, uint8_t pad, uint8_t tver) {
    store8(p_ + 1, static_cast<uint8_t>((se ? 0x80 : 0) | (mig_req ? 0x40 : 0) | ((pad & 3) << 4) |
                                        (tver & 0x0F)));
  }
  void set_pkey(uint16_t v) { store_be16(p_ + 2, v); }
  void set_ecn(bool fecn, bool becn) {
    store8(p_ + 4, static_cast<uint8_t>((fecn ? 0x80 : 0) | (becn ? 0x40 : 0)));
  }
  void set_dest_qpn(Qpn q) { store_be24(p_ + 5, q.value()); }
  void set_ack_req_psn(bool ack_req, Psn psn) {
    store8(p_ + 8, ack_req ? 0x80 : 0);
    store_be24(p_ + 9, psn.value());
  }

 private:
  std::byte* p_;
};
static_assert(kBthLen == 12);

}  // namespace rocelab::wire
