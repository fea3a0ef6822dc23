// Atomic Extended Transport Header, 28 bytes (IBTA 9.3.4):
//   VA 64 | R_Key 32 | Swap (or Add) Data 64 | Compare Data 64
// Atomic Acknowledge Extended Transport Header, 8 bytes (IBTA 9.3.6): Original Remote Data 64.
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"

namespace rocelab::wire {

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;

  static AtomicEth load(const std::byte* p) {
    return {load_be64(p), load_be32(p + 8), load_be64(p + 12), load_be64(p + 20)};
  }
  void store(std::byte* p) const {
    store_be64(p, va);
    store_be32(p + 8, rkey);
    store_be64(p + 12, swap_add);
    store_be64(p + 20, compare);
  }
  bool operator==(const AtomicEth&) const = default;
};
static_assert(kAtomicEthLen == 28);

struct AtomicAckEth {
  uint64_t orig = 0;
  static AtomicAckEth load(const std::byte* p) { return {load_be64(p)}; }
  void store(std::byte* p) const { store_be64(p, orig); }
  bool operator==(const AtomicAckEth&) const = default;
};
static_assert(kAtomicAckEthLen == 8);

}  // namespace rocelab::wire
