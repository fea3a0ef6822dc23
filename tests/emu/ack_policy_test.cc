// The RC ACK policy (docs/performance.md): like rxe and a NIC, the
// requester sets AckReq on the last packet of a message and on every 64th
// packet within a long one (requester.cc kAckReqEvery), and the responder
// answers AckReq'd packets with one ACK per QP per receive batch, a later ACK
// covering the earlier (responder.cc acknowledge, counted as ack_deferred).
// With DeviceConfig::ack_hold, an ACK on a QP that posted recently waits for
// that QP's next post_send and leaves right after its requests, in the same
// batch; or leaves when its time is up.
#include <gtest/gtest.h>

#include <vector>

#include "tests/emu/pair.h"
#include "wire/packet.h"

namespace rocelab::emu::test {
namespace {

struct Seen : PacketTap {
  struct Pkt {
    uint8_t opcode;
    uint32_t psn;
    bool ack_req;
  };
  std::vector<Pkt> tx;
  // What the device sent: when, and in which transmit batch.
  std::vector<Nanos> tx_at;
  std::vector<size_t> tx_batch;
  Nanos last_rx{-1};
  size_t batches = 0;
  void on_packet(Direction dir, Nanos at, const Datagram& d) override {
    if (dir == Direction::kRx) last_rx = at;
    if (dir != Direction::kTx) return;
    auto p = wire::parse_roce(d.payload);
    if (!p) return;
    tx.push_back({p->hdr.bth.opcode, p->hdr.bth.psn.value(), p->hdr.bth.ack_req});
    tx_at.push_back(at);
    tx_batch.push_back(batches);
  }
  void on_batch_end() override { ++batches; }
  void clear() {
    tx.clear();
    tx_at.clear();
    tx_batch.clear();
    last_rx = Nanos(-1);
  }
};

TEST(AckPolicy, AckReqOnEvery64thAndTheLastPacketAndOneAckPerBatch) {
  Env env(Net::kSim);
  constexpr uint32_t kPackets = 200, kLen = kPackets * 1024;
  Node a = env.make_node(1, QpType::kRC, kLen, access::kLocalWrite | access::kRemoteWrite);
  Node b = env.make_node(2, QpType::kRC, kLen, access::kLocalWrite | access::kRemoteWrite);
  ASSERT_TRUE(a.qp && b.qp);
  ConnectOptions o;
  o.path_mtu = Mtu::k1024;
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, o));
  Seen sa, sb;
  a.dev->set_tap(&sa);
  b.dev->set_tap(&sb);
  fill_pattern(a.buf, 0, kLen, 7);
  Sge s{a.addr(), kLen, a.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, 1);
  wr.rdma = {b.addr(), b.mr->rkey()};
  ASSERT_FALSE(post_send(a.qp, wr));
  auto wcs = env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()});
  a.dev->set_tap(nullptr);
  b.dev->set_tap(nullptr);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.end(), b.buf.begin()));

  ASSERT_EQ(sa.tx.size(), kPackets) << "a retransmission or a packet missing";
  std::vector<uint32_t> with_ack_req;
  for (uint32_t i = 0; i < sa.tx.size(); ++i)
    if (sa.tx[i].ack_req) with_ack_req.push_back(i + 1);
  EXPECT_EQ(with_ack_req, (std::vector<uint32_t>{64, 128, 192, 200})) << "AckReq on the wrong packets";

  // The responder sends only ACKs, at most one per AckReq'd packet; those it
  // folded into a later one are counted, and the last ACK names the last PSN.
  size_t acks = 0;
  for (const auto& p : sb.tx) {
    EXPECT_EQ(p.opcode, wire::op::kRcAck);
    ++acks;
  }
  ASSERT_GE(acks, 1u);
  EXPECT_EQ(acks + b.dev->counters().ack_deferred, with_ack_req.size());
  EXPECT_EQ(sb.tx.back().psn, sa.tx.back().psn);
}

// Two connected RC QPs on devices that hold ACKs for 20 us, each with an
// 8-byte buffer the other may write.
struct HoldPair {
  static constexpr Nanos kHold = std::chrono::microseconds(20);
  Env env{Net::kSim};
  Node a, b;
  Seen sb;
  HoldPair() {
    env.set_ack_hold(kHold);
    a = env.make_node(1, QpType::kRC, 8, access::kLocalWrite | access::kRemoteWrite);
    b = env.make_node(2, QpType::kRC, 8, access::kLocalWrite | access::kRemoteWrite);
    EXPECT_TRUE(a.qp && b.qp);
    if (!a.qp || !b.qp) return;
    EXPECT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
    b.dev->set_tap(&sb);
  }
  ~HoldPair() { b.dev->set_tap(nullptr); }
  // One 8-byte WRITE from `from` into `to`'s buffer, completed.
  void write(Node& from, Node& to, uint64_t id) {
    Sge s{from.addr(), 8, from.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, id);
    wr.rdma = {to.addr(), to.mr->rkey()};
    ASSERT_FALSE(post_send(from.qp, wr));
  }
  void wait_write(Node& n) {
    auto wcs = env.wait_wcs(n.scq, 1, {a.dev.get(), b.dev.get()});
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  }
};

TEST(AckPolicy, AHeldAckLeavesRightAfterTheReplyInTheSameBatch) {
  HoldPair p;
  p.write(p.b, p.a, 1);  // b has posted: its ACKs are held for its replies
  p.wait_write(p.b);
  p.sb.clear();
  p.write(p.a, p.b, 2);
  // Until b's device has received a's WRITE and held its ACK.
  for (int i = 0; i < 1000 && p.sb.last_rx < Nanos(0); ++i) p.env.step({p.a.dev.get(), p.b.dev.get()});
  ASSERT_GE(p.sb.last_rx, Nanos(0));
  p.b.dev->progress();
  EXPECT_TRUE(p.sb.tx.empty()) << "b acknowledged before its reply";
  p.write(p.b, p.a, 3);  // the reply, well within the hold
  ASSERT_EQ(p.sb.tx.size(), 2u);
  EXPECT_EQ(p.sb.tx[0].opcode, wire::op::kRcWriteOnly);
  EXPECT_EQ(p.sb.tx[1].opcode, wire::op::kRcAck);
  EXPECT_EQ(p.sb.tx_batch[0], p.sb.tx_batch[1]) << "the ACK left in another batch than the reply";
  p.wait_write(p.a);
  p.wait_write(p.b);
}

TEST(AckPolicy, AHeldAckNobodyRepliesToLeavesWhenItsTimeIsUp) {
  HoldPair p;
  p.write(p.b, p.a, 1);
  p.wait_write(p.b);
  p.sb.clear();
  p.write(p.a, p.b, 2);
  p.wait_write(p.a);
  ASSERT_EQ(p.sb.tx.size(), 1u);
  EXPECT_EQ(p.sb.tx[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(p.sb.tx_at[0] - p.sb.last_rx, HoldPair::kHold);
}

TEST(AckPolicy, AQpThatHasNotPostedIsAcknowledgedAtOnce) {
  HoldPair p;
  p.write(p.a, p.b, 1);
  p.wait_write(p.a);
  ASSERT_EQ(p.sb.tx.size(), 1u);
  EXPECT_EQ(p.sb.tx[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(p.sb.tx_at[0], p.sb.last_rx);
}

}  // namespace
}  // namespace rocelab::emu::test
