// The state-machine explorer (src/sim/fsm.h): parsing what a student types,
// the table and drawing against the engine's own transition table, and the
// explained verdicts.
#include "sim/fsm.h"

#include <gtest/gtest.h>

#include <sstream>

namespace rocelab::sim {
namespace {

using emu::QpState;
using emu::QpType;
namespace qa = emu::qp_attr;

TEST(Fsm, ParsesTypesStatesAndMasksAsTyped) {
  EXPECT_EQ(parse_qp_type("rc"), QpType::kRC);
  EXPECT_EQ(parse_qp_type("UD"), QpType::kUD);
  EXPECT_FALSE(parse_qp_type("xrc"));
  EXPECT_EQ(parse_qp_state("init"), QpState::kInit);
  EXPECT_EQ(parse_qp_state("IBV_QPS_RTS"), QpState::kRts);
  EXPECT_FALSE(parse_qp_state("READY"));
  std::string err;
  EXPECT_EQ(parse_attr_mask("STATE,AV,path_mtu", &err), qa::kState | qa::kAv | qa::kPathMtu);
  EXPECT_EQ(parse_attr_mask("IBV_QP_STATE|IBV_QP_SQ_PSN", &err), qa::kState | qa::kSqPsn);
  EXPECT_EQ(parse_attr_mask(" STATE , DEST_QPN ", &err), qa::kState | qa::kDestQpn);
  EXPECT_EQ(parse_attr_mask("0x181", &err), 0x181u);
  EXPECT_FALSE(parse_attr_mask("STATE,PATHMTU", &err));
  EXPECT_NE(err.find("PATHMTU"), std::string::npos) << err;
  EXPECT_FALSE(parse_attr_mask("", &err));
  EXPECT_FALSE(parse_attr_mask("0x1zz", &err));
}

// One table row per valid transition of the engine's table, with its attributes.
TEST(Fsm, TableHasARowForEveryTransitionOfTheEngine) {
  for (QpType type : {QpType::kRC, QpType::kUC, QpType::kUD}) {
    const std::string table = fsm_table(type);
    int rows = 0;
    std::istringstream in(table);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream w(line);
      std::string from, to;
      w >> from >> to;
      auto f = parse_qp_state(from), t = parse_qp_state(to);
      if (!f || !t) continue;
      ++rows;
      EXPECT_TRUE(emu::qp_transition(*f, *t).valid) << line;
    }
    EXPECT_EQ(rows, 7 + 6 + 9) << table;  // to RESET, to ERR, the others
  }
  const std::string rc = fsm_table(QpType::kRC);
  EXPECT_NE(rc.find("RTR    RTS    TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC SQ_PSN"), std::string::npos) << rc;
  const std::string ud = fsm_table(QpType::kUD);
  EXPECT_NE(ud.find("RESET  INIT   PKEY_INDEX PORT QKEY"), std::string::npos) << ud;
}

TEST(Fsm, DotHasEveryStateAndEveryTransition) {
  const std::string dot = fsm_dot(QpType::kUC);
  EXPECT_EQ(dot.rfind("digraph qp_UC {", 0), 0u);
  size_t edges = 0;
  for (size_t p = dot.find(" -> "); p != std::string::npos; p = dot.find(" -> ", p + 1)) ++edges;
  EXPECT_EQ(edges, 22u);
  EXPECT_NE(dot.find("INIT -> RTR [label=\"AV\\nPATH_MTU\\nRQ_PSN\\nDEST_QPN\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("RTS -> ERR [color=gray70, style=dashed]"), std::string::npos) << dot;
}

TEST(Fsm, ExplainsARefusalAttributeByAttribute) {
  const std::string e = explain_modify(QpState::kInit, QpState::kRtr, QpType::kUC, qa::kAv | qa::kQkey);
  EXPECT_EQ(e.substr(0, e.find('\n')),
            "modify_qp INIT->RTR on UC: missing PATH_MTU, RQ_PSN, DEST_QPN; not allowed QKEY");
  EXPECT_NE(e.find("  missing DEST_QPN: the peer QP's number"), std::string::npos) << e;
  EXPECT_NE(e.find("  not allowed QKEY: "), std::string::npos) << e;
  EXPECT_NE(e.find("  optional: ACCESS_FLAGS PKEY_INDEX ALT_PATH"), std::string::npos) << e;
  const std::string none = explain_modify(QpState::kReset, QpState::kRts, QpType::kRC, 0);
  EXPECT_NE(none.find("no such transition"), std::string::npos) << none;
  EXPECT_NE(none.find("can go to: RESET INIT"), std::string::npos) << none;
  const std::string cur = explain_modify(QpState::kInit, QpState::kInit, QpType::kRC, qa::kCurState);
  EXPECT_NE(cur.find("CUR_STATE only from RTR, RTS, SQD or SQE"), std::string::npos) << cur;
  const std::string ok = explain_modify(QpState::kRts, QpState::kSqd, QpType::kUD, 0);
  EXPECT_EQ(ok.substr(0, ok.find('\n')), "modify_qp RTS->SQD on UD: allowed");
}

}  // namespace
}  // namespace rocelab::sim
