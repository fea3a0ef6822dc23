#include "emu/wr_opcode_table.h"

#include "wire/opcode_table.h"

namespace rocelab::emu {
namespace {

namespace op = wire::op;
using namespace qp_types;
using K = WrKind;
using A = AtomicOperands;

constexpr WrOpInfo row(WrOpcode o, std::string_view name, uint8_t types, K kind, bool sges, bool inl,
                       bool remote, A atomic, bool writes_local, bool window, bool send, uint8_t first,
                       uint8_t middle, uint8_t last, uint8_t only, WcOpcode wc) {
  return WrOpInfo{true, o, name, types, kind, sges, inl, remote, atomic, writes_local, window, send,
                  first, middle, last, only, wc};
}

// Memory windows are bound and invalidated on RC, UC and XRC, as rxe
// (rxe_opcode.c: IB_WR_LOCAL_INV / IB_WR_BIND_MW mask RC, UC); READ, atomics
// and SEND_WITH_INV need a reliable connection (IBTA 9.7, 9.8 Table 39).
constexpr std::array<WrOpInfo, kNumWrOpcodes> kTable = {
    //  opcode                        name                    QP types            kind        SGEs   inline remote atomic            wr_loc window send   FIRST                MIDDLE               LAST                   ONLY                    completes as
    row(WrOpcode::kRdmaWrite,         "RDMA_WRITE",           kRc | kUc | kXrcIni, K::kMessage, true,  true,  true,  A::kNone,        false, false, false, op::kRcWriteFirst,   op::kRcWriteMiddle,  op::kRcWriteLast,      op::kRcWriteOnly,       WcOpcode::kRdmaWrite),
    row(WrOpcode::kRdmaWriteWithImm,  "RDMA_WRITE_WITH_IMM",  kRc | kUc | kXrcIni, K::kMessage, true,  true,  true,  A::kNone,        false, false, false, op::kRcWriteFirst,   op::kRcWriteMiddle,  op::kRcWriteLastImm,   op::kRcWriteOnlyImm,    WcOpcode::kRdmaWrite),
    row(WrOpcode::kSend,              "SEND",                 kAll,                K::kMessage, true,  true,  false, A::kNone,        false, false, true,  op::kRcSendFirst,    op::kRcSendMiddle,   op::kRcSendLast,       op::kRcSendOnly,        WcOpcode::kSend),
    row(WrOpcode::kSendWithImm,       "SEND_WITH_IMM",        kAll,                K::kMessage, true,  true,  false, A::kNone,        false, false, true,  op::kRcSendFirst,    op::kRcSendMiddle,   op::kRcSendLastImm,    op::kRcSendOnlyImm,     WcOpcode::kSend),
    row(WrOpcode::kRdmaRead,          "RDMA_READ",            kRc | kXrcIni,       K::kRead,    true,  false, true,  A::kNone,        true,  false, false, 0,                   0,                   0,                     op::kRcReadRequest,     WcOpcode::kRdmaRead),
    row(WrOpcode::kAtomicCmpAndSwp,   "ATOMIC_CMP_AND_SWP",   kRc | kXrcIni,       K::kAtomic,  true,  false, true,  A::kCompareSwap, true,  false, false, 0,                   0,                   0,                     op::kRcCmpSwap,         WcOpcode::kCompSwap),
    row(WrOpcode::kAtomicFetchAndAdd, "ATOMIC_FETCH_AND_ADD", kRc | kXrcIni,       K::kAtomic,  true,  false, true,  A::kFetchAdd,    true,  false, false, 0,                   0,                   0,                     op::kRcFetchAdd,        WcOpcode::kFetchAdd),
    row(WrOpcode::kLocalInv,          "LOCAL_INV",            kRc | kUc | kXrcIni, K::kLocal,   false, false, false, A::kNone,        false, false, false, 0,                   0,                   0,                     0,                      WcOpcode::kLocalInv),
    row(WrOpcode::kBindMw,            "BIND_MW",              kRc | kUc | kXrcIni, K::kLocal,   false, false, false, A::kNone,        false, true,  false, 0,                   0,                   0,                     0,                      WcOpcode::kBindMw),
    row(WrOpcode::kSendWithInv,       "SEND_WITH_INV",        kRc | kXrcIni,       K::kMessage, true,  true,  false, A::kNone,        false, false, true,  op::kRcSendFirst,    op::kRcSendMiddle,   op::kRcSendLastInv,    op::kRcSendOnlyInv,     WcOpcode::kSend),
};

// The table is indexed by the enum's value.
constexpr bool indexed_by_value() {
  for (int i = 0; i < kNumWrOpcodes; ++i)
    if (static_cast<int>(kTable[i].op) != i) return false;
  return true;
}
static_assert(indexed_by_value());

const WrOpInfo kInvalid{};

}  // namespace

uint8_t qp_type_bit(QpType t) {
  switch (t) {
    case QpType::kRC: return kRc;
    case QpType::kUC: return kUc;
    case QpType::kUD: return kUd;
    case QpType::kXrcIni: return kXrcIni;
    case QpType::kXrcTgt: return 0;  // a target only receives
  }
  return 0;
}

const std::array<WrOpInfo, kNumWrOpcodes>& wr_opcode_table() { return kTable; }

const WrOpInfo& wr_op_info(WrOpcode o) {
  const auto i = static_cast<unsigned>(o);
  return i < kTable.size() ? kTable[i] : kInvalid;
}

}  // namespace rocelab::emu
