// Invalidate Extended Transport Header, 4 bytes (IBTA 9.3.8): the R_Key to invalidate.
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"

namespace rocelab::wire {

struct Ieth {
  uint32_t rkey = 0;
  static Ieth load(const std::byte* p) { return {load_be32(p)}; }
  void store(std::byte* p) const { store_be32(p, rkey); }
  bool operator==(const Ieth&) const = default;
};
static_assert(kIethLen == 4);

}  // namespace rocelab::wire
