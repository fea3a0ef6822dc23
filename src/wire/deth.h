// Datagram Extended Transport Header, 8 bytes (IBTA 9.3.2): Q_Key 32 | reserved 8 | SrcQP 24.
#pragma once
#include "wire/byte_order.h"
#include "wire/opcode_table.h"
#include "wire/psn.h"

namespace rocelab::wire {

inline constexpr uint32_t kGsiQkey = 0x80010000;

struct Deth {
  uint32_t qkey = 0;
  Qpn src_qpn;

  static Deth load(const std::byte* p) { return {load_be32(p), Qpn(load_be24(p + 5))}; }
  void store(std::byte* p) const {
    store_be32(p, qkey);
    store8(p + 4, 0);
    store_be24(p + 5, src_qpn.value());
  }
  bool operator==(const Deth&) const = default;
};
static_assert(kDethLen == 8);

}  // namespace rocelab::wire
