// Real engines across the switched network: an incast of RC WRITEs into one
// host. With a small buffer and no PFC the switch drops and RC's
// retransmission still delivers every byte; with PFC nothing is lost and
// nothing is retransmitted; with ECN the packets of a QP whose traffic class
// is ECT(0) arrive marked.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "emu/connect.h"
#include "fabric/network.h"
#include "testbed/endpoint.h"
#include "testbed/testbed.h"

namespace rocelab::fabric {
namespace {

constexpr uint64_t k10G = 10'000'000'000;
constexpr size_t kSenders = 3, kBytes = 256 * 1024;

struct Result {
  bool all_done = false;
  bool memory_ok = false;
  uint64_t retries = 0;
  PortStats totals;
  uint64_t ce_received = 0;
};

Result incast(Topology t, uint8_t traffic_class) {
  Result r;
  std::string err;
  auto net = std::make_shared<SwitchedNetwork>(std::move(t), Nanos(0), &err);
  EXPECT_EQ(err, "");
  emu::SimFabricConfig cfg;
  cfg.network = net;
  testbed::Testbed bed(testbed::Net::kSim, cfg);
  auto device = [&](const wire::IpAddr& a) {
    emu::DeviceConfig dc;
    dc.active_mtu = emu::Mtu::k1024;
    auto d = bed.make_device(a, 1, dc, nullptr, nullptr, &err);
    EXPECT_TRUE(d) << err;
    return d;
  };
  // The sink: one MR with a slice per sender, a QP per sender.
  testbed::Endpoint sink;
  sink.dev = device(preset_address(0));
  EXPECT_EQ(sink.open({emu::QpType::kRC, kSenders * kBytes, emu::access::kLocalWrite | emu::access::kRemoteWrite,
                       256, {64, 64, 4, 4, 64}, false, std::nullopt, false}),
            "");
  std::vector<testbed::Endpoint> senders(kSenders);
  std::vector<emu::Qp*> sink_qps;
  emu::ConnectOptions co;
  co.path_mtu = emu::Mtu::k1024;
  co.timeout = 8;  // 1 ms: losses recover quickly in virtual time
  co.traffic_class = traffic_class;
  for (size_t i = 0; i < kSenders; ++i) {
    testbed::Endpoint& s = senders[i];
    s.dev = device(preset_address(uint32_t(i + 1)));
    EXPECT_EQ(s.open({emu::QpType::kRC, kBytes, emu::access::kLocalWrite}), "");
    for (size_t k = 0; k < kBytes; ++k) s.buf[k] = std::byte(uint8_t(i * 31 + k * 7 + (k >> 10)));
    emu::QpInitAttr ia;
    ia.send_cq = ia.recv_cq = sink.rcq;
    ia.qp_type = emu::QpType::kRC;
    ia.cap = {64, 64, 4, 4, 64};
    auto q = sink.dev->create_qp(sink.pd, ia);
    EXPECT_TRUE(q);
    sink_qps.push_back(*q);
    EXPECT_FALSE(emu::connect_pair(*s.dev, *s.qp, *sink.dev, **q, co));
  }
  // Every sender WRITEs its whole buffer in 64 KiB messages into its slice.
  for (size_t i = 0; i < kSenders; ++i) {
    testbed::Endpoint& s = senders[i];
    for (size_t off = 0; off < kBytes; off += 64 * 1024) {
      emu::Sge sge{reinterpret_cast<uint64_t>(s.buf.data() + off), 64 * 1024, s.mr->lkey()};
      emu::SendWr wr;
      wr.wr_id = off;
      wr.opcode = emu::WrOpcode::kRdmaWrite;
      wr.sg_list = {&sge, 1};
      wr.send_flags = emu::send_flags::kSignaled;
      wr.rdma.remote_addr = sink.iova + i * kBytes + off;
      wr.rdma.rkey = sink.mr->rkey();
      size_t n = 0;
      EXPECT_FALSE(s.qp->post_send({&wr, 1}, &n));
    }
  }
  std::vector<size_t> done(kSenders);
  std::vector<emu::Device*> devs{sink.dev.get()};
  for (auto& s : senders) devs.push_back(s.dev.get());
  bool failed = false;
  r.all_done = bed.fabric()->run_until(
      [&] {
        for (size_t d : done)
          if (d < kBytes / (64 * 1024)) return false;
        return true;
      },
      Nanos(std::chrono::seconds(10)), [&] {
        for (emu::Device* d : devs) d->progress();
        for (size_t i = 0; i < kSenders; ++i) {
          emu::Wc wc[8];
          const int n = senders[i].scq->poll(wc);
          for (int k = 0; k < n; ++k) {
            failed |= wc[k].status != emu::WcStatus::kSuccess;
            ++done[i];
          }
        }
      });
  EXPECT_FALSE(failed);
  r.memory_ok = true;
  for (size_t i = 0; i < kSenders; ++i)
    r.memory_ok &= std::equal(senders[i].buf.begin(), senders[i].buf.end(), sink.buf.begin() + i * kBytes);
  for (auto& s : senders) r.retries += s.dev->counters().completer_retry_err;
  r.ce_received = sink.dev->counters().np_ecn_marked_roce_packets;
  r.totals = net->totals();
  return r;
}

Topology small_buffer_incast() {
  Topology t = incast_star(kSenders, k10G, Nanos(1000));
  t.switches.buffer_bytes = 32 * 1024;
  return t;
}

TEST(RcOverFabric, AnIncastIntoASmallBufferDropsAndRcRecoversEveryByte) {
  const Result r = incast(small_buffer_incast(), 0);
  EXPECT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  EXPECT_GT(r.totals.dropped, 0u);
  EXPECT_GT(r.retries, 0u);
}

TEST(RcOverFabric, PfcMakesTheIncastLosslessWithoutRetransmission) {
  Topology t = small_buffer_incast();
  t.switches.pfc = {true, 8 * 1024, 4 * 1024};
  const Result r = incast(t, 0);
  EXPECT_TRUE(r.all_done);
  EXPECT_TRUE(r.memory_ok);
  EXPECT_EQ(r.totals.dropped, 0u);
  EXPECT_EQ(r.retries, 0u);
  EXPECT_GT(r.totals.pauses_received, 0u);
}

TEST(RcOverFabric, EcnMarksTheIncastOfEctQps) {
  Topology t = incast_star(kSenders, k10G, Nanos(1000));
  t.switches.pfc = {true, 64 * 1024, 32 * 1024};
  t.switches.ecn = {true, 5 * 1024, 20 * 1024, 0.1};
  const Result ect = incast(t, 0x02);
  EXPECT_TRUE(ect.all_done);
  EXPECT_TRUE(ect.memory_ok);
  EXPECT_GT(ect.totals.ecn_marked, 0u);
  EXPECT_EQ(ect.ce_received, ect.totals.ecn_marked);
  const Result plain = incast(t, 0);
  EXPECT_EQ(plain.totals.ecn_marked, 0u);
  EXPECT_EQ(plain.ce_received, 0u);
}

}  // namespace
}  // namespace rocelab::fabric
