// DCQCN's published behaviours (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015), reproduced with real engines
// running DCQCN over the switched network, each against a stated tolerance:
// two flows on one bottleneck converge to fair rates and keep it busy; the
// bottleneck's queue settles where the paper's fluid model (src/cc) puts its
// equilibrium, far below Kmax; with ECN off, PFC's pauses spread to a flow
// whose destination is idle, and DCQCN's marks take that damage away.
#include <gtest/gtest.h>

#include <cstdio>

#include "cc/fluid_model.h"
#include "fabric/flows.h"

namespace rocelab::fabric {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
constexpr uint64_t k40G = 40'000'000'000;

// The paper's setting: 40 Gb/s, its DCQCN parameters and CNP interval
// (docs/congestion.md), its RED profile (Kmin 5 KB, Kmax 200 KB, Pmax 1 %);
// PFC on, as the paper runs DCQCN.
emu::DeviceConfig paper_dcqcn() {
  emu::DeviceConfig dc;
  dc.cc = cc::Algorithm::kDcqcn;
  dc.dcqcn = cc::kDcqcnPaperDefaults;
  dc.min_time_between_cnps = cc::kMinTimeBetweenCnpsPaper;
  return dc;
}
SwitchParams paper_switch() {
  SwitchParams sw;
  sw.ecn = {true, 5'000, 200'000, 0.01};
  sw.pfc = {true, 512 * 1024, 256 * 1024};
  return sw;
}

// Two flows through the dumbbell's 40 Gb/s bottleneck, the second joining
// at 2 ms; 20 ms in all, the last 16 ms taken as the steady state.
class TwoFlows : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    FlowsOptions o;
    o.topology = dumbbell(2, k40G, k40G, microseconds(1));
    o.topology.switches = paper_switch();
    o.flows = {{"s0", "r0", Nanos(0)}, {"s1", "r1", milliseconds(2)}};
    o.device = paper_dcqcn();
    o.run_for = milliseconds(20);
    result_ = new FlowsResult(run_flows(o));
  }
  static void TearDownTestSuite() { delete result_; }
  static constexpr Nanos kFrom = milliseconds(4), kTo = milliseconds(20);
  static FlowsResult* result_;
};
FlowsResult* TwoFlows::result_ = nullptr;

TEST_F(TwoFlows, ConvergeToFairRatesAndKeepTheBottleneckBusy) {
  const FlowsResult& r = *result_;
  ASSERT_TRUE(r.ok);
  EXPECT_GT(r.counters.rp_cnp_handled, 0u);
  const double a = r.rate_bps(0, kFrom, kTo), b = r.rate_bps(1, kFrom, kTo);
  std::printf("goodput over [4, 20) ms: %.2f and %.2f Gb/s\n", a / 1e9, b / 1e9);
  // The paper: DCQCN converges to fair rates. Measured when this was
  // written: 17.3 and 19.3 Gb/s, oscillating by about 10 % around the fair
  // share from window to window. Tolerances: Jain's index at least 0.98
  // (1 is perfectly fair; 0.98 is a 43/57 split), each flow at least 40 %.
  const double jain = (a + b) * (a + b) / (2 * (a * a + b * b));
  EXPECT_GE(jain, 0.98);
  EXPECT_GT(a, 0.4 * (a + b));
  EXPECT_GT(b, 0.4 * (a + b));
  // Goodput counts payload only: 1024 of every 1106 bytes on the wire are
  // 92.6 % of 40 Gb/s. At least 85 % of 40 Gb/s: the bottleneck stays busy.
  EXPECT_GT(a + b, 0.85 * 40e9);
}

TEST_F(TwoFlows, TheQueueSettlesAtTheFluidModelsEquilibriumFarBelowKmax) {
  FlowsResult& r = *result_;
  ASSERT_TRUE(r.ok);
  cc::FluidParams fp;  // the paper's parameters are FluidParams' defaults
  fp.flows = 2;
  fp.capacity_bps = fp.line_rate_bps = 40e9;
  fp.packet_bytes = 1106;  // a 1 KiB WRITE packet on the wire
  fp.kmin_bytes = 5'000;
  fp.kmax_bytes = 200'000;
  fp.pmax = 0.01;
  const auto fixed = cc::fluid_fixed_point(fp);
  ASSERT_TRUE(fixed);
  const double mean = r.mean_queue("left", "right", kFrom, kTo);
  std::printf("bottleneck queue over [4, 20) ms: mean %.0f bytes; the fluid model's equilibrium %.0f bytes\n",
              mean, fixed->queue_bytes);
  // Measured when this was written: 21.9 KB against the model's 21.8 KB.
  // The model has no hyper increase and no packets: within a factor of 1.5.
  EXPECT_GT(mean, fixed->queue_bytes / 1.5);
  EXPECT_LT(mean, fixed->queue_bytes * 1.5);
  // Bounded: no sample of the steady state at Kmax, where every packet is marked.
  const int port = r.net->port_between("left", "right");
  const Series& s = r.net->series(r.end);
  for (const Series::PortLine& line : s.ports) {
    if (line.port != uint32_t(port)) continue;
    for (size_t i = 0; i < s.t.size(); ++i) {
      if (s.t[i] < kFrom) continue;
      EXPECT_LT(line.queue_bytes[i], 200'000u) << "at " << s.t[i].count() << " ns";
    }
  }
}

// s0 and s1 both send into `sink`; s1 also sends to `other`, whose port is
// never congested. The innocent flow s1 -> other shares only s1's link with
// the congested flows.
FlowsResult innocent(bool dcqcn) {
  FlowsOptions o;
  Topology& t = o.topology;
  t.add_switch("tor");
  for (const char* h : {"s0", "s1", "sink", "other"}) {
    t.link(t.add_host(h, preset_address(uint32_t(t.nodes.size() - 1))), "tor", k40G, microseconds(1));
  }
  t.switches = paper_switch();
  t.switches.ecn.enabled = dcqcn;
  // XOFF below what two RC windows (2 x 128 packets) put in flight: without
  // congestion control the incast pauses s1.
  t.switches.pfc = {true, 64 * 1024, 32 * 1024};
  o.flows = {{"s0", "sink"}, {"s1", "sink"}, {"s1", "other"}};
  if (dcqcn) o.device = paper_dcqcn();
  o.run_for = milliseconds(10);
  return run_flows(o);
}

TEST(DcqcnPaper, WithEcnOffPfcPausesSpreadToAnInnocentFlow) {
  FlowsResult pfc = innocent(false), cc = innocent(true);
  ASSERT_TRUE(pfc.ok);
  ASSERT_TRUE(cc.ok);
  const Nanos from = milliseconds(2), to = milliseconds(10);
  const double hurt = pfc.rate_bps(2, from, to), spared = cc.rate_bps(2, from, to);
  const int s1 = pfc.net->port_between("tor", "s1");  // ^ 1: the other direction, s1 -> tor
  std::printf("innocent flow: %.2f Gb/s with PFC alone (s1 paused %.2f ms), %.2f Gb/s with DCQCN\n", hurt / 1e9,
              double(pfc.net->port_stats(uint32_t(s1) ^ 1).paused.count()) / 1e6, spared / 1e9);
  // The paper: with PFC alone, the pauses a congested port sends upstream
  // stop every flow of the paused link, also those bound elsewhere. Here s1's
  // link is paused for much of the run and the flow to the idle `other`
  // waits with it; with DCQCN the pauses (nearly) stop and it takes what s1's
  // link has left. Measured when this was written: 16.9 Gb/s with PFC alone
  // (s1 paused for 1.8 of the 10 ms), 25.4 Gb/s with DCQCN. Tolerance: DCQCN
  // gives it at least 1.3 x.
  EXPECT_GT(pfc.net->port_stats(uint32_t(s1) ^ 1).paused, Nanos(0));
  EXPECT_GT(spared, 1.3 * hurt);
  EXPECT_EQ(pfc.counters.rp_cnp_handled, 0u);
  EXPECT_GT(cc.counters.rp_cnp_handled, 0u);
}

}  // namespace
}  // namespace rocelab::fabric
