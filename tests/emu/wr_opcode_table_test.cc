// The WR-opcode table (src/emu/wr_opcode_table) against the BTH opcode table
// (src/wire/opcode_table): every opcode a WR becomes on every QP type that may
// post it exists on that transport and carries what the WR needs.
#include <gtest/gtest.h>

#include "emu/wr_opcode_table.h"
#include "wire/opcode_table.h"

namespace rocelab::emu::test {
namespace {

using wire::Hdr;
using wire::OpClass;

struct TypeOnWire {
  uint8_t bit;
  wire::Transport t;
};
constexpr TypeOnWire kTypes[] = {{qp_types::kRc, wire::Transport::kRC},
                                 {qp_types::kUc, wire::Transport::kUC},
                                 {qp_types::kUd, wire::Transport::kUD},
                                 {qp_types::kXrcIni, wire::Transport::kXRC}};

TEST(WrOpcodeTable, EveryRowIsItsOpcodeAndNamedAsLibibverbs) {
  const auto& t = wr_opcode_table();
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_TRUE(t[i].valid);
    EXPECT_EQ(static_cast<size_t>(t[i].op), i);
    EXPECT_EQ(to_string(t[i].op), t[i].name);
  }
  EXPECT_FALSE(wr_op_info(static_cast<WrOpcode>(200)).valid);
  EXPECT_FALSE(wr_op_info(static_cast<WrOpcode>(200)).allowed_on(QpType::kRC));
}

TEST(WrOpcodeTable, EveryBthOpcodeExistsOnEveryTransportThatMayPostIt) {
  for (const WrOpInfo& w : wr_opcode_table()) {
    SCOPED_TRACE(std::string(w.name));
    if (w.local()) {
      EXPECT_EQ(w.only, 0) << "a local operation sends nothing";
      EXPECT_FALSE(w.sges);
      continue;
    }
    for (const TypeOnWire& ty : kTypes) {
      if (!(w.qp_types & ty.bit)) continue;
      SCOPED_TRACE(std::string(wire::to_string(ty.t)));
      // UD carries single-packet messages only (IBTA 9.8.4).
      const uint32_t max_pkts = ty.t == wire::Transport::kUD || w.kind != WrKind::kMessage ? 1 : 3;
      for (uint32_t n = 1; n <= max_pkts; ++n) {
        for (uint32_t k = 0; k < n; ++k) {
          const auto code = wire::for_transport(ty.t, w.bth_opcode(k, n));
          ASSERT_TRUE(code.has_value()) << "packet " << k << " of " << n;
          const wire::OpInfo& info = wire::op_info(*code);
          EXPECT_TRUE(info.is(OpClass::kRequest)) << info.name;
          EXPECT_EQ(info.is(OpClass::kFirst), k == 0) << info.name;
          EXPECT_EQ(info.is(OpClass::kLast), k + 1 == n) << info.name;
          EXPECT_EQ(info.carries(Hdr::kXrcEth), ty.t == wire::Transport::kXRC) << info.name;
          switch (w.kind) {
            case WrKind::kMessage:
              EXPECT_EQ(info.is(OpClass::kSend), w.send) << info.name;
              EXPECT_EQ(info.is(OpClass::kWrite), !w.send) << info.name;
              // A WRITE names its target in the first packet (RETH).
              EXPECT_EQ(info.carries(Hdr::kReth), w.remote && k == 0) << info.name;
              break;
            case WrKind::kRead:
              EXPECT_TRUE(info.is(OpClass::kRead) && info.carries(Hdr::kReth)) << info.name;
              break;
            case WrKind::kAtomic:
              EXPECT_TRUE(info.is(OpClass::kAtomic) && info.carries(Hdr::kAtomicEth)) << info.name;
              EXPECT_NE(w.atomic, AtomicOperands::kNone);
              break;
            case WrKind::kLocal: break;
          }
        }
      }
      // The last packet says what the WR adds to its message.
      const wire::OpInfo& last = wire::op_info(*wire::for_transport(ty.t, w.bth_opcode(0, 1)));
      EXPECT_EQ(last.carries(Hdr::kImmDt), w.op == WrOpcode::kSendWithImm || w.op == WrOpcode::kRdmaWriteWithImm);
      EXPECT_EQ(last.carries(Hdr::kIeth), w.op == WrOpcode::kSendWithInv);
    }
  }
}

TEST(WrOpcodeTable, ReadsAndAtomicsWriteLocalMemoryAndAreLimitedByMaxRdAtomic) {
  for (const WrOpInfo& w : wr_opcode_table()) {
    EXPECT_EQ(w.writes_local, w.rd_atomic()) << w.name;
    EXPECT_EQ(w.inline_ok, w.kind == WrKind::kMessage) << w.name;
  }
  EXPECT_TRUE(wr_op_info(WrOpcode::kSend).allowed_on(QpType::kUD));
  EXPECT_FALSE(wr_op_info(WrOpcode::kRdmaWrite).allowed_on(QpType::kUD));
  EXPECT_FALSE(wr_op_info(WrOpcode::kRdmaRead).allowed_on(QpType::kUC));
  EXPECT_FALSE(wr_op_info(WrOpcode::kBindMw).allowed_on(QpType::kUD));
}

}  // namespace
}  // namespace rocelab::emu::test
