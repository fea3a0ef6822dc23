// DCQCN in the engine, across the switched network: the pacer holds a QP to
// its rate, CE-marked packets are answered with CNPs as a ConnectX sends
// them, the senders' rate control acts on them, and so the incast's queue at
// the switch stays well below what ECN marking alone lets it reach.
#include <gtest/gtest.h>

#include <vector>

#include "fabric/incast.h"
#include "wire/frame.h"
#include "wire/packet.h"

namespace rocelab::fabric {
namespace {

constexpr uint64_t k1G = 1'000'000'000, k10G = 10'000'000'000;

emu::DeviceConfig dcqcn(uint64_t line_rate_bps) {
  emu::DeviceConfig dc;
  dc.cc = cc::Algorithm::kDcqcn;
  dc.line_rate_bps = line_rate_bps;
  return dc;
}

// Lossless (PFC with room to spare) and marking from 5 KiB of queue on.
Topology marking_incast(size_t senders) {
  Topology t = incast_star(uint32_t(senders), k10G, Nanos(1000));
  t.switches.pfc = {true, 512 * 1024, 256 * 1024};
  t.switches.ecn = {true, 5 * 1024, 200 * 1024, 0.01};  // the DCQCN paper's Kmin, Kmax, Pmax
  return t;
}

// The CNPs one device sends, as it built them.
struct CnpTap : emu::PacketTap {
  std::vector<wire::IpUdpInfo> ip;
  std::vector<wire::RocePacket> cnp;
  std::vector<size_t> len;
  void on_packet(emu::Direction dir, Nanos, const emu::Datagram& d) override {
    if (dir != emu::Direction::kTx) return;
    auto p = wire::parse_roce(d.payload);
    if (!p || p->hdr.bth.opcode != wire::op::kCnp) return;
    ip.push_back(d.ip);
    cnp.push_back(*p);
    len.push_back(d.payload.size());
  }
};

TEST(DcqcnOverFabric, ThePacerHoldsAQpToItsRate) {
  // One sender on a 10 Gb/s link whose NIC says 1 Gb/s: DCQCN starts at line
  // rate, so the WRITEs take as long as their bytes on the wire at 1 Gb/s.
  IncastOptions o;
  o.topology = incast_star(1, k10G, Nanos(1000));
  o.senders = 1;
  o.sender_device = dcqcn(k1G);
  const IncastResult r = run_incast(o);
  ASSERT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  // 256 packets of 1024 bytes: IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + Ethernet 38
  // around each payload, and a RETH (16) on the first of each 64 KiB WRITE.
  const double wire_bytes = 256.0 * (1024 + 20 + 8 + 12 + 4 + wire::kEthernetWireOverhead) + 4 * 16;
  const double paced_ns = wire_bytes * 8 / 1.0;  // at 1 Gb/s, 1 bit per ns
  EXPECT_GT(double(r.finish.count()), 0.99 * paced_ns);
  EXPECT_LT(double(r.finish.count()), 1.03 * paced_ns);  // + one RTT for the last ACK
  EXPECT_EQ(r.sink.np_ecn_marked_roce_packets, 0u);
  EXPECT_EQ(r.senders.rp_cnp_handled, 0u);
}

TEST(DcqcnOverFabric, ABurstInTimeLetsAnIdleQpRunAheadOfItsRateByThatTime) {
  // As above, with a burst of 100 us: the idle QP's first 100 us of bytes at
  // 1 Gb/s leave at once (at the link's 10 Gb/s), and from then on it keeps
  // to its rate 100 us ahead of the schedule without the burst, so it
  // finishes 100 us earlier; the same burst in bytes (12,500 bytes at 1 Gb/s)
  // finishes as early.
  IncastOptions o;
  o.topology = incast_star(1, k10G, Nanos(1000));
  o.senders = 1;
  o.sender_device = dcqcn(k1G);
  const IncastResult paced = run_incast(o);
  o.sender_device.pacing_burst_time = std::chrono::microseconds(100);
  const IncastResult in_time = run_incast(o);
  o.sender_device.pacing_burst_time = {};
  o.sender_device.pacing_burst_bytes = 12'500;
  const IncastResult in_bytes = run_incast(o);
  ASSERT_TRUE(paced.all_done && in_time.all_done && in_bytes.all_done);
  const double early_ns = double((paced.finish - in_time.finish).count());
  EXPECT_NEAR(early_ns, 100'000, 1106 * 8);  // within a packet at 1 Gb/s
  EXPECT_NEAR(double(in_time.finish.count()), double(in_bytes.finish.count()), 1106 * 8);  // a packet at 1 Gb/s
}

TEST(DcqcnOverFabric, ASlowlyPacedQpDoesNotTimeOutBetweenItsAckRequests) {
  // At 100 Mb/s a 64 KiB WRITE (64 packets, one AckReq on the last) takes
  // 5.7 ms, the retransmission timeout is 1 ms: the timer must run from the
  // last packet sent, not the first unacknowledged one, or the QP resends
  // although nothing was lost.
  IncastOptions o;
  o.topology = incast_star(1, k10G, Nanos(1000));
  o.senders = 1;
  o.bytes = 128 * 1024;
  o.sender_device = dcqcn(100'000'000);
  const IncastResult r = run_incast(o);
  ASSERT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  EXPECT_EQ(r.senders.completer_retry_err, 0u);
  EXPECT_EQ(r.sink.duplicate_request, 0u);
  EXPECT_GT(double(r.finish.count()), 0.99 * 128 * 1106 * 8 * 10.0);  // ns at 100 Mb/s
}

TEST(DcqcnOverFabric, CeMarksAreAnsweredWithCnpsAsAConnectXSendsThem) {
  CnpTap tap;
  IncastOptions o;
  o.topology = marking_incast(3);
  o.sink_device = dcqcn(k10G);
  o.sender_device = dcqcn(k10G);
  o.sink_tap = &tap;
  const IncastResult r = run_incast(o);
  ASSERT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  ASSERT_GT(r.sink.np_ecn_marked_roce_packets, 0u);
  ASSERT_FALSE(tap.cnp.empty());
  // At most one CNP per QP per 4 us (mlx5's min_time_between_cnps), and fewer CNPs than marks.
  EXPECT_EQ(r.sink.np_cnp_sent, tap.cnp.size());
  EXPECT_LT(r.sink.np_cnp_sent, r.sink.np_ecn_marked_roce_packets);
  for (size_t i = 0; i < tap.cnp.size(); ++i) {
    const wire::RocePacket& p = tap.cnp[i];
    EXPECT_TRUE(p.hdr.bth.becn);
    EXPECT_EQ(p.hdr.bth.psn.value(), 0u);
    EXPECT_EQ(p.hdr.bth.pkey, wire::kDefaultPkey);
    EXPECT_EQ(tap.len[i], 12u + 16u + 4u);  // BTH, 16 reserved bytes, ICRC
    EXPECT_EQ(tap.ip[i].tclass, 0xC2);       // DSCP 48, ECT(0)
    EXPECT_NE(std::find(r.sender_qpns.begin(), r.sender_qpns.end(), p.hdr.bth.dest_qpn.value()),
              r.sender_qpns.end());
  }
  // Every CNP reached its QP (the ICRC checked) and the rate control acted on it.
  EXPECT_EQ(r.senders.rp_cnp_handled, r.sink.np_cnp_sent);
  EXPECT_EQ(r.senders.rcvd_icrc_err, 0u);
  EXPECT_EQ(r.senders.rcvd_hdr_err, 0u);
}

TEST(DcqcnOverFabric, DcqcnKeepsTheIncastQueueWellBelowWhatMarkingAloneLetsItReach) {
  IncastOptions o;
  o.topology = marking_incast(3);
  o.bytes = 1024 * 1024;
  o.sample_interval = std::chrono::microseconds(10);
  o.traffic_class = 0x02;  // ECT(0) without congestion control: marked, never slowed
  const IncastResult plain = run_incast(o);
  o.traffic_class = 0;
  o.sink_device = dcqcn(k10G);
  o.sender_device = dcqcn(k10G);
  const IncastResult cc = run_incast(o);
  ASSERT_TRUE(plain.all_done);
  ASSERT_TRUE(cc.all_done);
  EXPECT_TRUE(cc.memory_ok);
  EXPECT_GT(plain.to_sink.ecn_marked, 0u);
  EXPECT_EQ(plain.senders.rp_cnp_handled, 0u);
  EXPECT_GT(cc.senders.rp_cnp_handled, 0u);
  EXPECT_EQ(cc.totals.dropped, 0u);
  EXPECT_EQ(cc.senders.completer_retry_err, 0u);
  // Without congestion control the queue is as deep as the senders' windows
  // let it be (3 x 128 packets in flight: 271 KB on average when this was
  // written); with DCQCN 114 KB. The first ~300 KB of the flows, sent before
  // the cuts take hold, make up most of that: the bound is a factor of 2.
  EXPECT_LT(cc.mean_queue_to_sink * 2, plain.mean_queue_to_sink)
      << "mean queue with DCQCN " << cc.mean_queue_to_sink << " bytes, without " << plain.mean_queue_to_sink;
  // mlx5's parameters cut hard at a 1 us RTT (a cut per CNP, a CNP per 4 us)
  // and recover in 300 us stages: the bottleneck idles for a while (1.31 x
  // the time at line rate when this was written). The bound: 1.5 x.
  EXPECT_LT(double(cc.finish.count()), 1.5 * double(plain.finish.count()))
      << "with DCQCN " << cc.finish.count() << " ns, without " << plain.finish.count() << " ns";
}

TEST(DcqcnOverFabric, ASenderWithoutCongestionControlCountsCnpsAndIgnoresThem) {
  IncastOptions o;
  o.topology = marking_incast(3);
  o.traffic_class = 0x02;
  o.sink_device = dcqcn(k10G);
  const IncastResult r = run_incast(o);
  ASSERT_TRUE(r.all_done);
  EXPECT_GT(r.sink.np_cnp_sent, 0u);
  EXPECT_EQ(r.senders.rp_cnp_ignored, r.sink.np_cnp_sent);
  EXPECT_EQ(r.senders.rp_cnp_handled, 0u);
}

}  // namespace
}  // namespace rocelab::fabric
