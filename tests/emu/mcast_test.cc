// UD multicast (ibv_attach_mcast) on the simulated fabric and on real UDP
// multicast over loopback: every attached QP of every device gets its own copy
// of a datagram sent to the group, QPs not attached get nothing, a detached
// QP nothing more, a QP with another Q_Key drops its copy alone; the verb's
// refusals are those of uverbs and rxe.
#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAccess = access::kLocalWrite;
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kSlot = 2048;  // one receive buffer: the 40-byte GRH, then the payload
constexpr uint32_t kLen = 300;

// A multicast GID: the IPv4-mapped group 239.1.2.n (a group of its own per
// test: on UDP the groups are the host's, shared by tests running at once).
Gid group_gid(uint8_t n) { return wire::IpAddr::v4(239, 1, 2, n).gid(); }

class McastTest : public ::testing::TestWithParam<Net> {
 protected:
  void SetUp() override {
    env_ = std::make_unique<Env>(GetParam());
    for (uint8_t h = 0; h < 3; ++h) {
      nodes_[h] = env_->make_node(static_cast<uint8_t>(h + 1), QpType::kUD, 16 * kSlot, kAccess);
      if (GetParam() == Net::kUdp && !nodes_[h].dev) GTEST_SKIP() << "no free 127.0.0.x";
      ASSERT_TRUE(nodes_[h].qp);
      ASSERT_FALSE(up(nodes_[h].qp));
    }
  }
  // The test's group (the sender's address handle to it), n of its own.
  Gid use_group(uint8_t n) {
    AhAttr aa;
    aa.dgid = group_gid(n);
    ah_ = *sender().dev->create_ah(sender().pd, aa);
    return aa.dgid;
  }
  static std::error_code up(Qp* qp, uint32_t qkey = kQkey) {
    ConnectOptions o;
    o.qkey = qkey;
    if (auto ec = qp_to_init(*qp, o)) return ec;
    if (auto ec = qp_to_rtr(*qp, Gid{}, 0, 0, o)) return ec;
    return qp_to_rts(*qp, 0, o);
  }
  Node& sender() { return nodes_[0]; }
  Node& b() { return nodes_[1]; }
  Node& c() { return nodes_[2]; }
  void step() { env_->step({nodes_[0].dev.get(), nodes_[1].dev.get(), nodes_[2].dev.get()}); }

  void post_recvs(Node& n, int k) {
    for (int i = 0; i < k; ++i, ++n_recvs_[&n - nodes_])
      ASSERT_FALSE(post_recv(n.qp, n.addr() + n_recvs_[&n - nodes_] * kSlot, kSlot, n.mr->lkey(), 0));
  }
  // Sends message m (kLen bytes of pattern m) to the group, naming QP dest_qpn.
  void send(uint8_t m, uint32_t dest_qpn = 0xFFFFFF) {
    fill_pattern(sender().buf, m * kSlot, kLen, m);
    Sge s{sender().addr() + m * kSlot, kLen, sender().mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kSendWithImm, &s, 1, m);
    wr.imm_data = m;
    wr.ud = {ah_, dest_qpn, kQkey};
    ASSERT_FALSE(post_send(sender().qp, wr));
    auto sc = env_->wait_wcs(sender().scq, 1, {sender().dev.get(), b().dev.get(), c().dev.get()});
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  }
  // The k-th receive completion of node n carries message m, byte for byte.
  void expect_message(Node& n, const Wc& wc, size_t slot, uint8_t m) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
    EXPECT_EQ(wc.imm_data, m);
    EXPECT_EQ(wc.byte_len, kLen + 40);
    EXPECT_EQ(wc.src_qp, sender().qp->qp_num());
    EXPECT_EQ(0, std::memcmp(n.buf.data() + slot * kSlot + 40, sender().buf.data() + m * kSlot, kLen));
  }
  // Everything sent has arrived where it will: on the fabric when it is quiet,
  // on UDP once the sender's last datagram reached the node that must see it.
  std::vector<Wc> recvs(Node& n, size_t want) {
    return env_->wait_wcs(n.rcq, want, {sender().dev.get(), b().dev.get(), c().dev.get()});
  }

  std::unique_ptr<Env> env_;
  Node nodes_[3];
  size_t n_recvs_[3] = {};
  Ah* ah_ = nullptr;
};

TEST_P(McastTest, EveryAttachedQpGetsItsOwnCopy) {
  const Gid g = use_group(1);
  ASSERT_FALSE(b().dev->attach_mcast(b().qp, g));
  ASSERT_FALSE(c().dev->attach_mcast(c().qp, g));
  // A second QP on b, attached as well: each QP its own copy (rxe).
  QpInitAttr ia;
  ia.send_cq = b().scq;
  ia.recv_cq = b().rcq;
  ia.qp_type = QpType::kUD;
  ia.cap = {4, 4, 1, 1, 0};
  Qp* b2 = *b().dev->create_qp(b().pd, ia);
  ASSERT_FALSE(up(b2));
  ASSERT_FALSE(b().dev->attach_mcast(b2, g));
  post_recvs(b(), 3);
  post_recvs(c(), 3);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(post_recv(b2, b().addr() + (8 + i) * kSlot, kSlot, b().mr->lkey(), 2));
  for (uint8_t m = 1; m <= 3; ++m) send(m);
  auto wb = recvs(b(), 6);
  auto wc = recvs(c(), 3);
  ASSERT_EQ(wb.size(), 6u);
  ASSERT_EQ(wc.size(), 3u);
  size_t on_b2 = 0, on_b = 0;
  for (const Wc& w : wb) {
    // Each QP's receives complete in order, into its own slots.
    if (w.qp_num == b2->qp_num()) {
      expect_message(b(), w, 8 + on_b2, static_cast<uint8_t>(on_b2 + 1));
      ++on_b2;
    } else {
      expect_message(b(), w, on_b, static_cast<uint8_t>(on_b + 1));
      ++on_b;
    }
  }
  EXPECT_EQ(on_b, 3u);
  EXPECT_EQ(on_b2, 3u);
  for (size_t i = 0; i < 3; ++i) expect_message(c(), wc[i], i, static_cast<uint8_t>(i + 1));
  // The sender is not attached: it received nothing.
  EXPECT_EQ(sender().dev->counters().rcvd_pkts, 0u);
  EXPECT_EQ(b().dev->counters().rcvd_pkts, 3u);  // a datagram counts once per device
  ASSERT_FALSE(b().dev->detach_mcast(b2, g));
  EXPECT_FALSE(b().dev->destroy_qp(b2));
}

TEST_P(McastTest, ADetachedQpGetsNothingMore) {
  const Gid g = use_group(2);
  ASSERT_FALSE(b().dev->attach_mcast(b().qp, g));
  ASSERT_FALSE(c().dev->attach_mcast(c().qp, g));
  post_recvs(b(), 2);
  post_recvs(c(), 2);
  send(1);
  ASSERT_EQ(recvs(c(), 1).size(), 1u);
  ASSERT_EQ(recvs(b(), 1).size(), 1u);
  ASSERT_FALSE(c().dev->detach_mcast(c().qp, g));
  send(2);
  auto wb = recvs(b(), 1);  // b still gets it: the datagram went out
  ASSERT_EQ(wb.size(), 1u);
  expect_message(b(), wb[0], 1, 2);
  for (int i = 0; i < 20; ++i) step();
  Wc w;
  EXPECT_EQ(c().rcq->poll(std::span<Wc>(&w, 1)), 0);
  EXPECT_EQ(c().dev->counters().rcvd_pkts, 1u);
}

TEST_P(McastTest, AQpWithAnotherQkeyDropsItsCopyAlone) {
  const Gid g = use_group(3);
  // b's QP again, now with another Q_Key.
  ASSERT_FALSE(b().dev->destroy_qp(b().qp));
  QpInitAttr ia;
  ia.send_cq = b().scq;
  ia.recv_cq = b().rcq;
  ia.qp_type = QpType::kUD;
  ia.cap = {4, 4, 1, 1, 0};
  b().qp = *b().dev->create_qp(b().pd, ia);
  ASSERT_FALSE(up(b().qp, 0x22222222));
  ASSERT_FALSE(b().dev->attach_mcast(b().qp, g));
  ASSERT_FALSE(c().dev->attach_mcast(c().qp, g));
  post_recvs(b(), 1);
  post_recvs(c(), 1);
  send(1);
  auto wc = recvs(c(), 1);
  ASSERT_EQ(wc.size(), 1u);
  expect_message(c(), wc[0], 0, 1);
  for (int i = 0; i < 20 && b().dev->counters().qkey_viol == 0; ++i) step();
  EXPECT_EQ(b().dev->counters().qkey_viol, 1u);
  EXPECT_EQ(b().dev->counters().dropped("Q_Key"), 1u);
  Wc w;
  EXPECT_EQ(b().rcq->poll(std::span<Wc>(&w, 1)), 0);
}

TEST_P(McastTest, ADatagramToAGroupNamingAUnicastQpIsDropped) {
  ASSERT_FALSE(b().dev->attach_mcast(b().qp, use_group(4)));
  post_recvs(b(), 2);
  send(1, b().qp->qp_num());  // IBTA: a multicast names QP 0xFFFFFF
  for (int i = 0; i < 50 && b().dev->counters().dropped("multicast to a unicast QPN") == 0; ++i)
    step();
  EXPECT_EQ(b().dev->counters().dropped("multicast to a unicast QPN"), 1u);
  send(2);  // the control: the same with 0xFFFFFF arrives
  auto wb = recvs(b(), 1);
  ASSERT_EQ(wb.size(), 1u);
  expect_message(b(), wb[0], 0, 2);
}

TEST_P(McastTest, TheVerbRefusesWhatUverbsRefuses) {
  const Gid g = use_group(5);
  const DeviceAttr& da = b().dev->query_device();
  EXPECT_EQ(da.max_mcast_grp, 8192);
  EXPECT_EQ(da.max_mcast_qp_attach, 56);
  EXPECT_EQ(da.max_total_mcast_qp_attach, 0x70000);
  // Not a multicast GID: the device's own.
  Gid own;
  ASSERT_FALSE(b().dev->query_gid(1, 0, &own));
  EXPECT_EQ(b().dev->attach_mcast(b().qp, own), std::errc::invalid_argument);
  // Not a UD QP.
  Node rc = env_->make_node(9, QpType::kRC, kSlot, kAccess);
  ASSERT_TRUE(rc.qp);
  EXPECT_EQ(rc.dev->attach_mcast(rc.qp, g), std::errc::invalid_argument);
  // Detaching what is not attached.
  EXPECT_EQ(b().dev->detach_mcast(b().qp, g), std::errc::invalid_argument);
  // Twice attached is once attached; an attached QP cannot be destroyed.
  ASSERT_FALSE(b().dev->attach_mcast(b().qp, g));
  ASSERT_FALSE(b().dev->attach_mcast(b().qp, g));
  EXPECT_EQ(b().dev->destroy_qp(b().qp), std::errc::device_or_resource_busy);
  ASSERT_FALSE(b().dev->detach_mcast(b().qp, g));
  EXPECT_EQ(b().dev->detach_mcast(b().qp, g), std::errc::invalid_argument);
  EXPECT_FALSE(b().dev->destroy_qp(b().qp));
  b().qp = nullptr;
  // At most 56 QPs of a device in one group.
  QpInitAttr ia;
  ia.send_cq = c().scq;
  ia.recv_cq = c().rcq;
  ia.qp_type = QpType::kUD;
  ia.cap = {1, 1, 1, 1, 0};
  std::vector<Qp*> qps;
  for (int i = 0; i < 57; ++i) qps.push_back(*c().dev->create_qp(c().pd, ia));
  for (int i = 0; i < 56; ++i) ASSERT_FALSE(c().dev->attach_mcast(qps[i], g)) << i;
  EXPECT_EQ(c().dev->attach_mcast(qps[56], g), std::errc::not_enough_memory);
  for (int i = 0; i < 56; ++i) ASSERT_FALSE(c().dev->detach_mcast(qps[i], g));
  for (Qp* q : qps) EXPECT_FALSE(c().dev->destroy_qp(q));
}

INSTANTIATE_TEST_SUITE_P(All, McastTest, ::testing::Values(Net::kSim, Net::kUdp),
                         [](const auto& p) { return std::string(to_string(p.param)); });

}  // namespace
}  // namespace rocelab::emu::test
