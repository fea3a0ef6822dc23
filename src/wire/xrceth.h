// XRC Extended Transport Header, 4 bytes (IBTA XRC annex): reserved 8 | XRC SRQ number 24.
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"

namespace rocelab::wire {

struct XrcEth {
  uint32_t srqn = 0;  // 24 bits
  static XrcEth load(const std::byte* p) { return {load_be24(p + 1)}; }
  void store(std::byte* p) const {
    store8(p, 0);
    store_be24(p + 1, srqn);
  }
  bool operator==(const XrcEth&) const = default;
};
static_assert(kXrcEthLen == 4);

}  // namespace rocelab::wire
