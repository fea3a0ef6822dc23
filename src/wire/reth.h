// RDMA Extended Transport Header, 16 bytes (IBTA 9.3.3): VA 64 | R_Key 32 | DMA Length 32.
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"

namespace rocelab::wire {

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;

  static Reth load(const std::byte* p) { return {load_be64(p), load_be32(p + 8), load_be32(p + 12)}; }
  void store(std::byte* p) const {
    store_be64(p, va);
    store_be32(p + 8, rkey);
    store_be32(p + 12, dma_len);
  }
  bool operator==(const Reth&) const = default;
};
static_assert(kRethLen == 16);

}  // namespace rocelab::wire
