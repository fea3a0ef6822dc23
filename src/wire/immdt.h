// Immediate Data Extended Transport Header, 4 bytes (IBTA 9.3.7). The 32 bits are
// opaque: stored as they appear on the wire (network order), as ibv_wc.imm_data is.
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"

namespace rocelab::wire {

struct ImmDt {
  uint32_t imm = 0;  // value as a big-endian load of the 4 wire bytes
  static ImmDt load(const std::byte* p) { return {load_be32(p)}; }
  void store(std::byte* p) const { store_be32(p, imm); }
  bool operator==(const ImmDt&) const = default;
};
static_assert(kImmDtLen == 4);

}  // namespace rocelab::wire
