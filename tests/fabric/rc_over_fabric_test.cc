// Real engines across the switched network: an incast of RC WRITEs into one
// host. With a small buffer and no PFC the switch drops and RC's
// retransmission still delivers every byte; with PFC nothing is lost and
// nothing is retransmitted; with ECN the packets of a QP whose traffic class
// is ECT(0) arrive marked.
#include <gtest/gtest.h>

#include "fabric/incast.h"

namespace rocelab::fabric {
namespace {

constexpr uint64_t k10G = 10'000'000'000;
constexpr size_t kSenders = 3;

IncastResult incast(Topology t, uint8_t traffic_class) {
  IncastOptions o;
  o.topology = std::move(t);
  o.senders = kSenders;
  o.traffic_class = traffic_class;
  return run_incast(o);
}

Topology small_buffer_incast() {
  Topology t = incast_star(kSenders, k10G, Nanos(1000));
  t.switches.buffer_bytes = 32 * 1024;
  return t;
}

TEST(RcOverFabric, AnIncastIntoASmallBufferDropsAndRcRecoversEveryByte) {
  const IncastResult r = incast(small_buffer_incast(), 0);
  EXPECT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  EXPECT_GT(r.totals.dropped, 0u);
  EXPECT_GT(r.senders.completer_retry_err, 0u);
}

TEST(RcOverFabric, PfcMakesTheIncastLosslessWithoutRetransmission) {
  Topology t = small_buffer_incast();
  t.switches.pfc = {true, 8 * 1024, 4 * 1024};
  const IncastResult r = incast(t, 0);
  EXPECT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  EXPECT_EQ(r.totals.dropped, 0u);
  EXPECT_EQ(r.senders.completer_retry_err, 0u);
  EXPECT_GT(r.totals.pauses_received, 0u);
}

TEST(RcOverFabric, EcnMarksTheIncastOfEctQps) {
  Topology t = incast_star(kSenders, k10G, Nanos(1000));
  t.switches.pfc = {true, 64 * 1024, 32 * 1024};
  t.switches.ecn = {true, 5 * 1024, 20 * 1024, 0.1};
  const IncastResult ect = incast(t, 0x02);
  EXPECT_TRUE(ect.all_done);
  EXPECT_TRUE(ect.memory_ok);
  EXPECT_GT(ect.totals.ecn_marked, 0u);
  EXPECT_EQ(ect.sink.np_ecn_marked_roce_packets, ect.totals.ecn_marked);
  const IncastResult plain = incast(t, 0);
  EXPECT_EQ(plain.totals.ecn_marked, 0u);
  EXPECT_EQ(plain.sink.np_ecn_marked_roce_packets, 0u);
}

}  // namespace
}  // namespace rocelab::fabric
