// Internal: the table of work-request opcodes (ibv_wr_opcode), as data, in the
// style of src/wire/opcode_table: one row per opcode says what it needs (QP
// types, SGEs, remote address, atomic operands, a window), how the requester
// sends it (which BTH opcodes it becomes) and what it completes as. The post
// checks (post.cc), the requester (requester.cc), the completer and the
// completion plumbing read their rules from here; docs/architecture.md shows
// the table.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "emu/verbs_types.h"

namespace rocelab::emu {

// How the requester carries out a WR.
enum class WrKind : uint8_t {
  kMessage,  // SEND or WRITE: payload packets FIRST/MIDDLE/LAST or ONLY
  kRead,     // one READ request; the data comes back in READ responses
  kAtomic,   // one atomic request; the original value comes back in an ATOMIC ACK
  kLocal,    // a local operation of the send queue (mw.cc): no packet at all
};

// What an atomic request puts into the AtomicETH (IBTA 9.3.3).
enum class AtomicOperands : uint8_t {
  kNone,
  kCompareSwap,  // swap_add = wr.atomic.swap, compare = wr.atomic.compare_add
  kFetchAdd,     // swap_add = wr.atomic.compare_add, compare = 0
};

// QP types as bits, for the set of types that may post an opcode.
namespace qp_types {
inline constexpr uint8_t kRc = 1u << 0, kUc = 1u << 1, kUd = 1u << 2, kXrcIni = 1u << 3;
inline constexpr uint8_t kAll = kRc | kUc | kUd | kXrcIni;
}  // namespace qp_types
// The bit of t (0 for a type that posts no send WR, e.g. an XRC target).
uint8_t qp_type_bit(QpType t);

struct WrOpInfo {
  bool valid = false;
  WrOpcode op = WrOpcode::kSend;
  std::string_view name;        // "SEND_WITH_IMM", as ibv_wr_opcode without IBV_WR_
  uint8_t qp_types = 0;         // qp_types:: bits of the QPs that may post it
  WrKind kind = WrKind::kMessage;
  bool sges = false;            // carries a scatter/gather list
  bool inline_ok = false;       // IBV_SEND_INLINE applies (the payload is copied at post)
  bool remote = false;          // names remote memory (wr.rdma or wr.atomic: address, R_Key)
  AtomicOperands atomic = AtomicOperands::kNone;
  bool writes_local = false;    // the result lands in local memory: its MRs need LOCAL_WRITE
  bool window = false;          // names a memory window (wr.bind_mw.mw)
  bool send = false;            // a SEND message (the rdma_sends counter)
  // RC-relative BTH opcodes (wire::for_transport gives the UC, UD and XRC ones);
  // a single-packet request has only `only`.
  uint8_t first = 0, middle = 0, last = 0, only = 0;
  WcOpcode wc = WcOpcode::kSend;  // the opcode of its send-queue completion

  constexpr bool rd_atomic() const { return kind == WrKind::kRead || kind == WrKind::kAtomic; }
  constexpr bool local() const { return kind == WrKind::kLocal; }
  bool allowed_on(QpType t) const { return valid && (qp_types & qp_type_bit(t)) != 0; }
  // The RC-relative opcode of packet k of n (n == 1: ONLY). A READ or an
  // atomic is one request packet whatever n (its responses) is.
  constexpr uint8_t bth_opcode(uint32_t k, uint32_t n) const {
    if (kind != WrKind::kMessage) return only;
    const bool is_first = k == 0, is_last = k + 1 >= n;
    return is_first && is_last ? only : is_first ? first : is_last ? last : middle;
  }
};

inline constexpr int kNumWrOpcodes = 10;  // ibv_wr_opcode 0..9
const std::array<WrOpInfo, kNumWrOpcodes>& wr_opcode_table();
// The row of op; an invalid row (valid == false) for a value outside the enum.
const WrOpInfo& wr_op_info(WrOpcode op);

}  // namespace rocelab::emu
