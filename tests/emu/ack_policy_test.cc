// The RC ACK policy (docs/performance.md): like rxe and a NIC, the
// requester sets AckReq on the last packet of a message and on every 64th
// packet within a long one (requester.cc kAckReqEvery), and the responder
// answers AckReq'd packets with one ACK per QP per receive batch, a later ACK
// covering the earlier (responder.cc acknowledge, counted as ack_deferred).
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
  void on_packet(Direction dir, Nanos, const Datagram& d) override {
    if (dir != Direction::kTx) return;
    auto p = wire::parse_roce(d.payload);
    if (p) tx.push_back({p->hdr.bth.opcode, p->hdr.bth.psn.value(), p->hdr.bth.ack_req});
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

}  // namespace
}  // namespace rocelab::emu::test
