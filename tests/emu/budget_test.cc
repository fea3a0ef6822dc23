// The device's in-flight budget (requester.cc): over all its RC QPs a device
// has at most 1024 PSNs sent and not yet acknowledged. Forty QPs each posting a
// 64 KiB WRITE at MTU 1024 (2,560 PSNs) put 1,024 packets on the wire and no
// more until ACKs come back; then the waiting QPs send, and every WRITE lands.
// Retransmissions are not held back.
#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAccess = access::kLocalWrite | access::kRemoteWrite;
constexpr size_t kQps = 40;
constexpr uint32_t kMsg = 64 * 1024;  // 64 packets at MTU 1024

class DeviceBudget : public ::testing::TestWithParam<Net> {
 protected:
  void SetUp() override {
    env_ = std::make_unique<Env>(GetParam());
    a_ = env_->make_node(1, QpType::kRC, kQps * kMsg, kAccess, 1024);
    b_ = env_->make_node(2, QpType::kRC, kQps * kMsg, kAccess, 1024);
    if (GetParam() == Net::kUdp && (!a_.dev || !b_.dev)) GTEST_SKIP() << "no free 127.0.0.x";
    ASSERT_TRUE(a_.qp && b_.qp);
    ConnectOptions o;
    o.path_mtu = Mtu::k1024;
    qa_.push_back(a_.qp);
    qb_.push_back(b_.qp);
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, o));
    QpInitAttr ia;
    ia.qp_type = QpType::kRC;
    ia.cap = {4, 4, 1, 1, 0};
    for (size_t i = 1; i < kQps; ++i) {
      ia.send_cq = ia.recv_cq = a_.scq;
      Qp* x = *a_.dev->create_qp(a_.pd, ia);
      ia.send_cq = ia.recv_cq = b_.scq;
      Qp* y = *b_.dev->create_qp(b_.pd, ia);
      ASSERT_FALSE(connect_pair(*a_.dev, *x, *b_.dev, *y, o));
      qa_.push_back(x);
      qb_.push_back(y);
    }
  }
  void post_writes() {
    for (size_t i = 0; i < kQps; ++i) {
      fill_pattern(a_.buf, i * kMsg, kMsg, static_cast<uint8_t>(i + 1));
      sge_[i] = {a_.addr() + i * kMsg, kMsg, a_.mr->lkey()};
      SendWr wr = make_wr(WrOpcode::kRdmaWrite, &sge_[i], 1, i);
      wr.rdma = {b_.addr() + i * kMsg, b_.mr->rkey()};
      ASSERT_FALSE(post_send(qa_[i], wr));
    }
  }
  std::unique_ptr<Env> env_;
  Node a_, b_;
  std::vector<Qp*> qa_, qb_;
  Sge sge_[kQps];
};

TEST_P(DeviceBudget, ThousandsOfPsnsWaitForAcksAndEveryWriteLands) {
  if (GetParam() == Net::kSim) {
    // Nothing has been acknowledged yet (b has not run): a sent 1,024 packets.
    post_writes();
    EXPECT_EQ(a_.dev->transport().stats().tx_datagrams, 1024u);
  } else {
    post_writes();
  }
  auto wcs = env_->wait_wcs(a_.scq, kQps, {a_.dev.get(), b_.dev.get()});
  ASSERT_EQ(wcs.size(), kQps);
  for (const Wc& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  EXPECT_TRUE(std::equal(a_.buf.begin(), a_.buf.end(), b_.buf.begin()));
  // Every packet went once: nothing was lost to a burst the peer could not take.
  EXPECT_EQ(a_.dev->counters().completer_retry_err, 0u);
  EXPECT_EQ(a_.dev->counters().sent_pkts, kQps * 64);
}

// Eight QPs whose peer went silent (its QPs in ERR drop everything) hold the
// whole budget with their 8 x 128 unacknowledged PSNs and retry forever. A
// healthy ninth QP must not wait for them: once their retransmission timers
// have expired, their packets count as lost, not in flight.
TEST(DeviceBudgetSim, SilentPeersDoNotStarveAHealthyQp) {
  Env env(Net::kSim);
  env.set_retry_forever(true);
  Node a = env.make_node(1, QpType::kRC, 9 * 128 * 1024, kAccess, 1024);
  Node b = env.make_node(2, QpType::kRC, 9 * 128 * 1024, kAccess, 1024);
  ASSERT_TRUE(a.qp && b.qp);
  ConnectOptions o;
  o.path_mtu = Mtu::k1024;
  QpInitAttr ia;
  ia.qp_type = QpType::kRC;
  ia.cap = {4, 4, 1, 1, 0};
  std::vector<Qp*> qa{a.qp}, qb{b.qp};
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, o));
  for (int i = 1; i < 9; ++i) {
    ia.send_cq = ia.recv_cq = a.scq;
    Qp* x = *a.dev->create_qp(a.pd, ia);
    ia.send_cq = ia.recv_cq = b.scq;
    Qp* y = *b.dev->create_qp(b.pd, ia);
    ASSERT_FALSE(connect_pair(*a.dev, *x, *b.dev, *y, o));
    qa.push_back(x);
    qb.push_back(y);
  }
  // The first eight go silent on b's side; each of their WRITEs is 128 packets.
  for (int i = 0; i < 8; ++i) {
    QpAttr err;
    err.qp_state = QpState::kErr;
    ASSERT_FALSE(qb[i]->modify(err, qp_attr::kState));
  }
  Sge sge[9];
  for (int i = 0; i < 9; ++i) {
    const uint32_t len = i < 8 ? 128 * 1024 : 4096;
    sge[i] = {a.addr() + static_cast<uint64_t>(i) * 128 * 1024, len, a.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &sge[i], 1, static_cast<uint64_t>(i));
    wr.rdma = {b.addr() + static_cast<uint64_t>(i) * 128 * 1024, b.mr->rkey()};
    ASSERT_FALSE(post_send(qa[i], wr));
  }
  EXPECT_EQ(a.dev->transport().stats().tx_datagrams, 1024u);  // the ninth waits for budget
  auto wcs = env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()});
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 8u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << to_string(wcs[0].status);
}

INSTANTIATE_TEST_SUITE_P(All, DeviceBudget, ::testing::Values(Net::kSim, Net::kUdp),
                         [](const auto& p) { return std::string(to_string(p.param)); });

}  // namespace
}  // namespace rocelab::emu::test
