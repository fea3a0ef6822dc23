// UC and UD under loss on the simulated fabric. Neither transport
// retransmits: UC drops a message that lost a packet and carries on with the
// next one (IBTA 9.8.3: after a gap, drop until the next FIRST or ONLY); UD
// drops the datagram. The sender completes every WR at transmit either way.
#include <set>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"
#include "wire/packet.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAccess = access::kLocalWrite | access::kRemoteWrite;
constexpr uint32_t kMtu = 1024;
constexpr uint32_t kSlot = 8 * 1024;  // one receive buffer (and one WRITE target) per message
constexpr int kMaxMsgs = 240;

// The PSNs of every packet the device receives, before any check.
struct RxPsns : PacketTap {
  std::set<uint32_t> psns;
  void on_packet(Direction dir, Nanos, const Datagram& d) override {
    if (dir != Direction::kRx) return;
    if (auto p = wire::parse_roce(d.payload)) psns.insert(p->hdr.bth.psn.value());
  }
};

struct Msg {
  WrOpcode op = WrOpcode::kSend;
  uint32_t len = 0;
  uint32_t first_psn = 0, npkts = 0;
};

class Unreliable : public ::testing::Test {
 protected:
  // a (which sends) gets faults_a on what it sends; b receives.
  void connect(QpType type, const std::string& faults_a) {
    type_ = type;
    env_ = std::make_unique<Env>(Net::kSim, Mtu::k1024);
    env_->set_faults(faults_a);
    const QpCap cap{256, 256, 1, 1, 0};
    a_ = env_->make_node(1, type, kMaxMsgs * kSlot, kAccess, 1024, cap);
    env_->set_faults("");
    // b: receive slots in the first half, WRITE targets in the second.
    b_ = env_->make_node(2, type, 2 * kMaxMsgs * kSlot, kAccess, 1024, cap);
    ASSERT_TRUE(a_.qp && b_.qp);
    ConnectOptions o;
    o.path_mtu = Mtu::k1024;
    o.psn_a = 0xFFFFF0;  // wraps during the run
    o.psn_b = 0x10;
    psn_ = o.psn_a;
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, o));
    if (type == QpType::kUD) {
      AhAttr aa;
      ASSERT_FALSE(b_.dev->query_gid(kPortNum, 0, &aa.dgid));
      ah_ = *a_.dev->create_ah(a_.pd, aa);
    }
    b_.dev->set_tap(&rx_);
  }
  uint64_t write_target(size_t m) const { return b_.addr() + (kMaxMsgs + m) * kSlot; }
  size_t grh() const { return type_ == QpType::kUD ? 40 : 0; }

  void post_recvs(size_t n) {
    for (size_t i = 0; i < n; ++i, ++posted_recvs_)
      ASSERT_FALSE(post_recv(b_.qp, b_.addr() + posted_recvs_ * kSlot, kSlot, b_.mr->lkey(), posted_recvs_));
  }
  // Posts message m (imm = m): its payload is a pattern of its own.
  void post_msg(WrOpcode op, uint32_t len) {
    const size_t m = msgs_.size();
    fill_pattern(a_.buf, m * kSlot, len, static_cast<uint8_t>(m * 13 + 1));
    sge_[m] = {a_.addr() + m * kSlot, len, a_.mr->lkey()};
    SendWr wr = make_wr(op, &sge_[m], 1, m);
    wr.imm_data = static_cast<uint32_t>(m);
    if (op == WrOpcode::kRdmaWriteWithImm) wr.rdma = {write_target(m), b_.mr->rkey()};
    if (ah_) wr.ud = {ah_, b_.qp->qp_num(), 0x11111111};
    ASSERT_FALSE(post_send(a_.qp, wr));
    const uint32_t n = len == 0 ? 1 : (len + kMtu - 1) / kMtu;
    msgs_.push_back({op, len, psn_, n});
    psn_ = (psn_ + n) & 0xFFFFFF;
  }
  // Runs both devices until nothing is left in flight on the fabric. (Not
  // Env::wait_wcs: UC and UD arm no timers, so an idle fabric has no next
  // event, and stepping it would move the virtual clock to the end of time.)
  void run_until_quiet() {
    SimFabric& f = *env_->fabric();
    for (int i = 0; i < 100000; ++i) {
      if (a_.dev->progress() + b_.dev->progress() > 0) continue;
      if (f.next_event() == Nanos::max()) return;
      f.advance(f.next_event());
    }
    ADD_FAILURE() << "the fabric never became quiet";
  }
  std::vector<Wc> poll_all(Cq* cq) {
    run_until_quiet();
    std::vector<Wc> out;
    Wc wc[32];
    for (int n; (n = cq->poll(std::span<Wc>(wc, 32))) > 0;) out.insert(out.end(), wc, wc + n);
    return out;
  }
  // Every WR completes successfully at the sender, lost or not.
  void expect_all_sent() {
    auto wcs = poll_all(a_.scq);
    ASSERT_EQ(wcs.size(), msgs_.size() - sent_checked_);
    for (const Wc& wc : wcs) {
      EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
      EXPECT_EQ(wc.wr_id, sent_checked_++);
    }
  }
  // The receive completions, once the fabric is quiet.
  std::vector<Wc> drain_recvs() { return poll_all(b_.rcq); }
  // A delivered message: whole, byte-exact, in the buffer its completion names.
  void expect_delivered(const Wc& wc, size_t m) {
    const Msg& msg = msgs_[m];
    EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
    EXPECT_EQ(wc.imm_data, m);
    EXPECT_EQ(wc.byte_len, msg.len + grh());
    const std::byte* src = a_.buf.data() + m * kSlot;
    if (msg.op == WrOpcode::kRdmaWriteWithImm) {
      EXPECT_EQ(wc.opcode, WcOpcode::kRecvRdmaWithImm);
      EXPECT_EQ(std::memcmp(b_.buf.data() + (write_target(m) - b_.addr()), src, msg.len), 0) << "message " << m;
    } else {
      EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
      ASSERT_LT(wc.wr_id, posted_recvs_);
      EXPECT_EQ(std::memcmp(b_.buf.data() + wc.wr_id * kSlot + grh(), src, msg.len), 0) << "message " << m;
    }
  }
  // Messages whose every packet reached b: exactly these may be delivered.
  std::vector<size_t> whole_messages() const {
    std::vector<size_t> out;
    for (size_t m = 0; m < msgs_.size(); ++m) {
      bool all = true;
      for (uint32_t k = 0; k < msgs_[m].npkts; ++k) all &= rx_.psns.count((msgs_[m].first_psn + k) & 0xFFFFFF) == 1;
      if (all) out.push_back(m);
    }
    return out;
  }

  QpType type_ = QpType::kUC;
  std::unique_ptr<Env> env_;
  Node a_, b_;
  Ah* ah_ = nullptr;
  RxPsns rx_;
  uint32_t psn_ = 0;
  std::vector<Msg> msgs_;
  Sge sge_[kMaxMsgs];
  size_t posted_recvs_ = 0, sent_checked_ = 0;
};

// ---- UC, one scheduled loss ----

constexpr uint32_t k4Pkts = 3 * kMtu + 700;  // FIRST, MIDDLE, MIDDLE, LAST
constexpr size_t kLost = 2;                  // message 2 of 6 loses a packet

struct UcCase {
  WrOpcode op;
  uint32_t pkt;  // 0 FIRST, 1 MIDDLE, 3 LAST
  const char* name;
};

class UcScheduledLoss : public Unreliable, public ::testing::WithParamInterface<UcCase> {};

// Six 4-packet messages; one packet of message 2 is dropped. Message 2 is not
// delivered, every other one is, whole and in order; the sender completes all
// six. The receive WQE message 2 had started filling (or would have used) is
// used by message 3, so the completions name WQEs 0..4 and WQE 5 stays posted.
TEST_P(UcScheduledLoss, MessageWithALostPacketIsDroppedTheNextIsDelivered) {
  const UcCase c = GetParam();
  const char* cls = c.op == WrOpcode::kSendWithImm ? "send" : "write";
  connect(QpType::kUC, std::string("drop:class=") + cls + ":nth=" + std::to_string(kLost * 4 + c.pkt + 1));
  post_recvs(6);
  for (int m = 0; m < 6; ++m) post_msg(c.op, k4Pkts);
  expect_all_sent();
  auto wcs = drain_recvs();
  ASSERT_EQ(wcs.size(), 5u);
  for (size_t i = 0; i < wcs.size(); ++i) {
    const size_t m = i < kLost ? i : i + 1;
    expect_delivered(wcs[i], m);
    EXPECT_EQ(wcs[i].wr_id, i);
  }
  // The responder saw the gap: every packet from the one after the hole up to
  // and including the FIRST of message 3 arrived ahead of the expected PSN.
  const Counters bc = b_.qp->counters();
  EXPECT_EQ(bc.out_of_seq_request, 4u - c.pkt);
  EXPECT_EQ(bc.duplicate_request, 0u);
  EXPECT_EQ(bc.rdma_recvs, c.op == WrOpcode::kSendWithImm ? 5u : 0u);
  if (c.op == WrOpcode::kRdmaWriteWithImm && c.pkt > 0) {
    // UC WRITE has no undo: the packets before the hole were placed. Only the
    // missing completion tells the receiver the message is not whole.
    const size_t t = write_target(kLost) - b_.addr();
    EXPECT_EQ(std::memcmp(b_.buf.data() + t, a_.buf.data() + kLost * kSlot, c.pkt * kMtu), 0);
  }
  // WQE 5 is still posted: one more message lands in it.
  post_msg(c.op, 100);
  expect_all_sent();
  auto last = drain_recvs();
  ASSERT_EQ(last.size(), 1u);
  expect_delivered(last[0], 6);
  EXPECT_EQ(last[0].wr_id, 5u);
}

INSTANTIATE_TEST_SUITE_P(Uc, UcScheduledLoss,
                         ::testing::Values(UcCase{WrOpcode::kSendWithImm, 0, "SendFirst"},
                                           UcCase{WrOpcode::kSendWithImm, 1, "SendMiddle"},
                                           UcCase{WrOpcode::kSendWithImm, 3, "SendLast"},
                                           UcCase{WrOpcode::kRdmaWriteWithImm, 0, "WriteImmFirst"},
                                           UcCase{WrOpcode::kRdmaWriteWithImm, 1, "WriteImmMiddle"},
                                           UcCase{WrOpcode::kRdmaWriteWithImm, 3, "WriteImmLast"}),
                         [](const ::testing::TestParamInfo<UcCase>& i) { return std::string(i.param.name); });

// A lost single-packet (ONLY) message between two multi-packet ones.
TEST_F(Unreliable, UcLostOnlyPacket) {
  connect(QpType::kUC, "drop:class=send:nth=5");
  post_recvs(3);
  post_msg(WrOpcode::kSendWithImm, k4Pkts);
  post_msg(WrOpcode::kSendWithImm, 500);
  post_msg(WrOpcode::kSendWithImm, k4Pkts);
  expect_all_sent();
  auto wcs = drain_recvs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_delivered(wcs[0], 0);
  expect_delivered(wcs[1], 2);
  EXPECT_EQ(wcs[1].wr_id, 1u);  // message 1 never took a WQE
}

// Duplicates are PSNs out of sequence too (as in rxe): a duplicated ONLY is
// the start of a message and is delivered again; a duplicated MIDDLE ends the
// message it belongs to, which is then dropped.
TEST_F(Unreliable, UcDuplicatedPackets) {
  connect(QpType::kUC, "dup:nth=1;dup:nth=3");  // message 0's ONLY, message 1's first MIDDLE
  post_recvs(4);
  post_msg(WrOpcode::kSendWithImm, 500);
  post_msg(WrOpcode::kSendWithImm, k4Pkts);
  post_msg(WrOpcode::kSendWithImm, k4Pkts);
  expect_all_sent();
  auto wcs = drain_recvs();
  ASSERT_EQ(wcs.size(), 3u);
  expect_delivered(wcs[0], 0);
  expect_delivered(wcs[1], 0);
  expect_delivered(wcs[2], 2);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 2u);
}

// ---- UC, random loss ----

// 200 SENDs and WRITE_WITH_IMMs of 1 to 5 packets, 10% of the packets lost:
// exactly the messages whose every packet arrived are delivered (so never a
// partial or spliced one), byte-exact and in order; the others are dropped.
TEST_F(Unreliable, UcRandomLossDeliversExactlyTheWholeMessages) {
  connect(QpType::kUC, "drop:p=0.1");
  post_recvs(200);
  for (int m = 0; m < 200; ++m) {
    const uint32_t len = static_cast<uint32_t>((m * 977) % (5 * kMtu)) + 1;
    post_msg(m % 3 == 2 ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kSendWithImm, len);
  }
  expect_all_sent();
  auto wcs = drain_recvs();
  const std::vector<size_t> whole = whole_messages();
  ASSERT_EQ(wcs.size(), whole.size());
  size_t sends = 0;
  for (size_t i = 0; i < wcs.size(); ++i) {
    expect_delivered(wcs[i], whole[i]);
    sends += msgs_[whole[i]].op == WrOpcode::kSendWithImm;
  }
  const size_t lost = msgs_.size() - whole.size();
  EXPECT_GT(lost, 10u);        // the loss did happen ...
  EXPECT_GT(whole.size(), 100u);  // ... and most messages still made it
  EXPECT_EQ(whole.size() + lost, msgs_.size());
  EXPECT_EQ(b_.qp->counters().rdma_recvs, sends);
  EXPECT_GT(b_.qp->counters().out_of_seq_request, 0u);
}

// ---- UD ----

// Datagrams 3 and 7 of 10 are lost: the other eight arrive, each whole, with
// the 40-byte GRH in front (IPv4: bytes 20..39 are the IP header); each lost
// one simply never consumes a receive WQE.
TEST_F(Unreliable, UdLostDatagramsDoNotArrive) {
  connect(QpType::kUD, "drop:nth=3;drop:nth=7");
  post_recvs(10);
  for (int m = 0; m < 10; ++m) post_msg(WrOpcode::kSendWithImm, 100 + m * 90);
  expect_all_sent();
  auto wcs = drain_recvs();
  ASSERT_EQ(wcs.size(), 8u);
  const size_t expected[] = {0, 1, 3, 4, 5, 7, 8, 9};
  for (size_t i = 0; i < wcs.size(); ++i) {
    expect_delivered(wcs[i], expected[i]);
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_TRUE(wcs[i].wc_flags & wc_flags::kGrh);
    EXPECT_EQ(wcs[i].src_qp, a_.qp->qp_num());
    const std::byte* g = b_.buf.data() + wcs[i].wr_id * kSlot;
    for (int k = 0; k < 20; ++k) EXPECT_EQ(g[k], std::byte{0});
    EXPECT_EQ(g[20], std::byte{0x45});  // IPv4, 20-byte header
    const std::byte src[4] = {std::byte{10}, std::byte{0}, std::byte{0}, std::byte{1}};
    const std::byte dst[4] = {std::byte{10}, std::byte{0}, std::byte{0}, std::byte{2}};
    EXPECT_EQ(std::memcmp(g + 32, src, 4), 0);
    EXPECT_EQ(std::memcmp(g + 36, dst, 4), 0);
  }
  EXPECT_EQ(b_.qp->counters().rdma_recvs, 8u);
  // WQEs 8 and 9 are still posted.
  post_msg(WrOpcode::kSendWithImm, 64);
  post_msg(WrOpcode::kSendWithImm, 1024);
  expect_all_sent();
  auto more = drain_recvs();
  ASSERT_EQ(more.size(), 2u);
  expect_delivered(more[0], 10);
  expect_delivered(more[1], 11);
  EXPECT_EQ(more[1].wr_id, 9u);
}

// 200 datagrams with 20% loss: delivered are exactly those that arrived.
TEST_F(Unreliable, UdRandomLoss) {
  connect(QpType::kUD, "drop:p=0.2");
  post_recvs(200);
  for (int m = 0; m < 200; ++m) post_msg(WrOpcode::kSendWithImm, static_cast<uint32_t>((m * 331) % kMtu) + 1);
  expect_all_sent();
  auto wcs = drain_recvs();
  const std::vector<size_t> arrived = whole_messages();
  ASSERT_EQ(wcs.size(), arrived.size());
  for (size_t i = 0; i < wcs.size(); ++i) expect_delivered(wcs[i], arrived[i]);
  EXPECT_GT(msgs_.size() - arrived.size(), 20u);
  EXPECT_GT(arrived.size(), 100u);
}

}  // namespace
}  // namespace rocelab::emu::test
