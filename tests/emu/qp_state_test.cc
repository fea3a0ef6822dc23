// The QP state machine against the project's own transition table
// (docs/qp-state-machine.md, "The transition table"), EXHAUSTIVELY: every
// from-state x to-state x QP type x attribute bit. The expectation is parsed
// from the document itself, so the engine's table cannot agree with itself by
// construction. (qp_state_external_test.cc checks that document against
// Linux's table in ../shared, where that is present.)
#include <map>

#include <gtest/gtest.h>

#include "emu/qp_state.h"
#include "tests/emu/pair.h"
#include "tests/emu/qp_state_doc.h"

namespace rocelab::emu::test {
namespace {

constexpr QpState kStates[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                               QpState::kSqd,   QpState::kSqe,  QpState::kErr};
constexpr QpType kTypes[] = {QpType::kRC, QpType::kUC, QpType::kUD};

using Key = QpKey;

QpTable load_table() {
  return load_qp_table(ROCELAB_SOURCE_DIR "/docs/qp-state-machine.md", "The transition table");
}

bool expected_ok(const QpTable& t, QpState from, QpState to, QpType type, uint32_t mask) {
  return qp_table_allows(t, from, to, type, mask);
}

TEST(QpStateTable, DocumentParsesIntoEveryRow) {
  const auto t = load_table();
  // 7 -> RESET, 6 -> ERR, 9 other transitions, for three types.
  EXPECT_EQ(t.size(), 3u * (7 + 6 + 9));
  EXPECT_TRUE(t.at({int(QpState::kSqe), int(QpState::kRts), int(QpType::kRC)}).valid);
  EXPECT_FALSE(t.count({int(QpState::kReset), int(QpState::kErr), int(QpType::kRC)}));
}

// The engine's table against the document for every state pair, type and bit.
TEST(QpStateTable, EngineTableMatchesDocumentForEveryBit) {
  const auto t = load_table();
  int checked = 0;
  for (QpType type : kTypes) {
    for (QpState from : kStates) {
      for (QpState to : kStates) {
        auto it = t.find({int(from), int(to), int(type)});
        const uint32_t req = it == t.end() ? 0 : it->second.req;
        const uint32_t base = qp_attr::kState | req;
        EXPECT_EQ(qp_modify_is_ok(from, to, type, base), expected_ok(t, from, to, type, base))
            << to_string(from) << "->" << to_string(to) << " " << to_string(type);
        for (int b = 0; b < qp_attr::kNumBits; ++b) {
          const uint32_t bit = 1u << b;
          const uint32_t with = base | bit, without = base & ~bit;
          EXPECT_EQ(qp_modify_is_ok(from, to, type, with), expected_ok(t, from, to, type, with))
              << to_string(from) << "->" << to_string(to) << " " << to_string(type) << " +" << b;
          EXPECT_EQ(qp_modify_is_ok(from, to, type, without), expected_ok(t, from, to, type, without))
              << to_string(from) << "->" << to_string(to) << " " << to_string(type) << " -" << b;
          checked += 2;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 7 * 7 * qp_attr::kNumBits * 2);
}

// A complete, valid set of attribute values.
QpAttr good_attr(QpState from, QpState to, const Gid& peer) {
  QpAttr a;
  a.qp_state = to;
  a.cur_qp_state = from;
  a.path_mtu = Mtu::k1024;
  a.qkey = 0x1234;
  a.rq_psn = 11;
  a.sq_psn = 22;
  a.dest_qp_num = 0x55;
  a.qp_access_flags = access::kRemoteWrite | access::kRemoteRead;
  a.ah_attr.dgid = peer;
  a.alt_ah_attr.dgid = peer;
  a.en_sqd_async_notify = 1;
  a.max_rd_atomic = 4;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.timeout = 14;
  a.retry_cnt = 6;
  a.rnr_retry = 5;
  return a;
}

class QpStateModify : public ::testing::TestWithParam<QpType> {
 protected:
  void SetUp() override {
    dev_ = env_.make_device(1);
    ASSERT_TRUE(dev_);
    pd_ = *dev_->alloc_pd();
    cq_ = *dev_->create_cq(64, nullptr, 0);
    peer_ = wire::IpAddr::v4(10, 0, 0, 2).gid();
  }
  Qp* make_qp() {
    QpInitAttr ia;
    ia.send_cq = ia.recv_cq = cq_;
    ia.qp_type = GetParam();
    ia.cap = {4, 4, 1, 1, 0};
    auto r = dev_->create_qp(pd_, ia);
    return r ? *r : nullptr;
  }
  // Drives a fresh QP to `s` along legal transitions; false when no modify reaches it (SQE).
  bool bring_to(Qp* qp, QpState s, const QpTable& t) {
    const QpState path[] = {QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kSqd};
    if (s == QpState::kReset) return true;
    if (s == QpState::kSqe) return false;
    if (s == QpState::kErr) return step(qp, QpState::kInit, t) && step(qp, QpState::kErr, t);
    for (QpState p : path) {
      if (!step(qp, p, t)) return false;
      if (p == s) return true;
    }
    return false;
  }
  bool step(Qp* qp, QpState to, const QpTable& t) {
    const QpState from = qp->state();
    auto it = t.find({int(from), int(to), int(GetParam())});
    if (it == t.end()) return false;
    return !qp->modify(good_attr(from, to, peer_), qp_attr::kState | it->second.req);
  }
  Env env_{Net::kSim};
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  Gid peer_{};
};

// modify() itself, for every reachable from-state: EINVAL and nothing changed
// when the document says no; the new state when it says yes.
TEST_P(QpStateModify, EveryTransitionAndBitThroughModify) {
  const auto t = load_table();
  const QpType type = GetParam();
  int tried = 0;
  for (QpState from : kStates) {
    if (from == QpState::kSqe) continue;  // only a send error enters SQE (covered by the table test)
    for (QpState to : kStates) {
      auto it = t.find({int(from), int(to), int(type)});
      const uint32_t req = it == t.end() ? 0 : it->second.req;
      std::vector<uint32_t> masks = {qp_attr::kState | req};
      for (int b = 0; b < qp_attr::kNumBits; ++b) {
        masks.push_back((qp_attr::kState | req) | (1u << b));
        if (req & (1u << b)) masks.push_back((qp_attr::kState | req) & ~(1u << b));
      }
      for (uint32_t mask : masks) {
        Qp* qp = make_qp();
        ASSERT_TRUE(qp);
        ASSERT_TRUE(bring_to(qp, from, t)) << to_string(from);
        QpAttr before;
        ASSERT_FALSE(qp->query(&before, nullptr));
        const bool want = expected_ok(t, from, to, type, mask);
        const auto ec = qp->modify(good_attr(from, to, peer_), mask);
        ++tried;
        if (want) {
          EXPECT_FALSE(ec) << to_string(from) << "->" << to_string(to) << " mask " << std::hex << mask;
          EXPECT_EQ(qp->state(), (mask & qp_attr::kState) ? to : from);
        } else {
          EXPECT_EQ(ec, std::errc::invalid_argument)
              << to_string(from) << "->" << to_string(to) << " mask " << std::hex << mask;
          QpAttr after;
          ASSERT_FALSE(qp->query(&after, nullptr));
          EXPECT_EQ(after.qp_state, from);
          EXPECT_EQ(after.qkey, before.qkey);
          EXPECT_EQ(after.sq_psn, before.sq_psn);
          EXPECT_EQ(after.rq_psn, before.rq_psn);
          EXPECT_EQ(after.qp_access_flags, before.qp_access_flags);
          EXPECT_EQ(after.dest_qp_num, before.dest_qp_num);
          EXPECT_EQ(after.timeout, before.timeout);
        }
        ASSERT_FALSE(dev_->destroy_qp(qp));
      }
    }
  }
  EXPECT_GT(tried, 6 * 7 * qp_attr::kNumBits);
}

TEST_P(QpStateModify, BadValuesAreRejectedWithoutChange) {
  const auto t = load_table();
  Qp* qp = make_qp();
  ASSERT_TRUE(bring_to(qp, QpState::kInit, t));
  QpAttr a = good_attr(QpState::kInit, QpState::kInit, peer_);
  a.port_num = 2;
  EXPECT_EQ(qp->modify(a, qp_attr::kPort), std::errc::invalid_argument);
  a = good_attr(QpState::kInit, QpState::kInit, peer_);
  a.pkey_index = 64;
  EXPECT_EQ(qp->modify(a, qp_attr::kPkeyIndex), std::errc::invalid_argument);
  // Setting the state equal to the current one through CUR_STATE with a wrong value.
  ASSERT_TRUE(bring_to(qp, QpState::kRts, t) || qp->state() == QpState::kRts);
  a = good_attr(QpState::kRtr, QpState::kRts, peer_);  // claims RTR while in RTS
  EXPECT_EQ(qp->modify(a, qp_attr::kState | qp_attr::kCurState), std::errc::invalid_argument);
  if (GetParam() == QpType::kRC) {
    a = good_attr(QpState::kRts, QpState::kRts, peer_);
    a.min_rnr_timer = 32;
    EXPECT_EQ(qp->modify(a, qp_attr::kMinRnrTimer), std::errc::invalid_argument);
  }
  EXPECT_EQ(qp->state(), QpState::kRts);
}

TEST_P(QpStateModify, QueryReturnsEveryAttributeSet) {
  const auto t = load_table();
  Qp* qp = make_qp();
  ASSERT_TRUE(bring_to(qp, QpState::kRts, t));
  QpAttr q;
  QpInitAttr init;
  ASSERT_FALSE(qp->query(&q, &init));
  const QpAttr g = good_attr(QpState::kRtr, QpState::kRts, peer_);
  EXPECT_EQ(q.qp_state, QpState::kRts);
  EXPECT_EQ(q.port_num, 1);
  EXPECT_EQ(q.pkey_index, 0);
  EXPECT_EQ(init.qp_type, GetParam());
  EXPECT_EQ(init.send_cq, cq_);
  EXPECT_EQ(q.sq_psn, g.sq_psn);
  if (GetParam() == QpType::kUD) {
    EXPECT_EQ(q.qkey, g.qkey);
    return;
  }
  EXPECT_EQ(q.qp_access_flags, g.qp_access_flags);
  EXPECT_EQ(q.path_mtu, g.path_mtu);
  EXPECT_EQ(q.dest_qp_num, g.dest_qp_num);
  EXPECT_EQ(q.rq_psn, g.rq_psn);
  EXPECT_EQ(q.ah_attr.dgid, peer_);
  if (GetParam() == QpType::kRC) {
    EXPECT_EQ(q.timeout, g.timeout);
    EXPECT_EQ(q.retry_cnt, g.retry_cnt);
    EXPECT_EQ(q.rnr_retry, g.rnr_retry);
    EXPECT_EQ(q.max_rd_atomic, g.max_rd_atomic);
    EXPECT_EQ(q.max_dest_rd_atomic, g.max_dest_rd_atomic);
    EXPECT_EQ(q.min_rnr_timer, g.min_rnr_timer);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QpStateModify, ::testing::Values(QpType::kRC, QpType::kUC, QpType::kUD),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// A refused modify records why, in words a student can act on; the errno stays EINVAL.
TEST(QpStateExplain, RefusalsSayWhy) {
  Env env(Net::kSim);
  auto dev = env.make_device(1);
  Pd* pd = *dev->alloc_pd();
  Cq* cq = *dev->create_cq(8, nullptr, 0);
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = QpType::kRC;
  ia.cap = {4, 4, 1, 1, 0};
  Qp* qp = *dev->create_qp(pd, ia);
  EXPECT_EQ(qp->last_refusal(), "");
  QpAttr a = good_attr(QpState::kReset, QpState::kRts, wire::IpAddr::v4(10, 0, 0, 2).gid());
  EXPECT_EQ(qp->modify(a, qp_attr::kState), std::errc::invalid_argument);
  EXPECT_EQ(qp->last_refusal(), "modify_qp RESET->RTS on RC: no such transition (IBTA 10.3.1)");
  a.qp_state = QpState::kInit;
  EXPECT_EQ(qp->modify(a, qp_attr::kState | qp_attr::kPort | qp_attr::kQkey), std::errc::invalid_argument);
  EXPECT_EQ(qp->last_refusal(), "modify_qp RESET->INIT on RC: missing ACCESS_FLAGS, PKEY_INDEX; not allowed QKEY");
  a.port_num = 1;
  ASSERT_FALSE(qp->modify(a, qp_attr::kState | qp_attr::kPort | qp_attr::kPkeyIndex | qp_attr::kAccessFlags));
  a.qp_state = QpState::kRtr;
  EXPECT_EQ(qp->modify(a, qp_attr::kState | qp_attr::kAv | qp_attr::kPathMtu), std::errc::invalid_argument);
  EXPECT_EQ(qp->last_refusal(),
            "modify_qp INIT->RTR on RC: missing RQ_PSN, MIN_RNR_TIMER, MAX_DEST_RD_ATOMIC, DEST_QPN");
  a.timeout = 40;
  EXPECT_EQ(qp->modify(a, qp_attr::kTimeout), std::errc::invalid_argument);  // INIT->INIT: TIMEOUT not allowed
  EXPECT_EQ(qp->last_refusal(), "modify_qp INIT->INIT on RC: not allowed TIMEOUT");
  a.path_mtu = static_cast<Mtu>(9);
  EXPECT_EQ(qp->modify(a, qp_attr::kState | qp_attr::kAv | qp_attr::kPathMtu | qp_attr::kDestQpn |
                              qp_attr::kRqPsn | qp_attr::kMaxDestRdAtomic | qp_attr::kMinRnrTimer),
            std::errc::invalid_argument);
  EXPECT_EQ(qp->last_refusal(), "modify_qp INIT->RTR on RC: PATH_MTU is not an MTU this port supports (256..4096)");
  a.cur_qp_state = QpState::kRts;
  EXPECT_EQ(qp->modify(a, qp_attr::kCurState), std::errc::invalid_argument);
  EXPECT_EQ(qp->last_refusal(), "modify_qp: CUR_STATE says RTS, the QP is in INIT");
  EXPECT_EQ(qp->state(), QpState::kInit);  // nothing changed by any of them
  // The verdict itself, as `rocelab fsm check` shows it.
  const QpModifyVerdict v = check_qp_modify(QpState::kRtr, QpState::kRts, QpType::kUD, qp_attr::kState);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.missing, qp_attr::kSqPsn);
  EXPECT_NE(qp_attr_purpose(qp_attr::kSqPsn), "");
  ASSERT_FALSE(dev->destroy_qp(qp));
}

}  // namespace
}  // namespace rocelab::emu::test
