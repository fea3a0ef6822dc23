// Scenarios on a switched network, run (src/sim/runner.h): an incast through
// one switch queues at the port toward the receiver, ECN marks the packets of
// ECT QPs, PFC pauses the senders, a small buffer without PFC drops, DCQCN
// nodes answer marks with CNPs; the report's time series add up to the
// switch's own counters and the devices' counters, and a ladder filtered to
// one QP pair or two nodes draws exactly their packets.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace rocelab::sim {
namespace {

struct Incast {
  int senders = 3;
  // The switch: ECN marking between 10 and 40 KiB, PFC at 32 KiB per ingress.
  std::string switches = "ecn { kmin_bytes: 10240 kmax_bytes: 40960 pmax: 0.2 } "
                         "pfc { xoff_bytes: 32768 xon_bytes: 16384 }";
  uint32_t traffic_class = 2;  // ECT(0)
  std::string cc;              // every node's, when given
  std::string ladder;          // a `ladder { ... }`
  size_t bytes = 65536;        // per sender, one RDMA WRITE
  std::string steps;           // after the WRITEs have completed
};

// senders s0.. WRITE `bytes` each into their slice of the sink's MR over
// QPs a<i> -> k<i>, all at once.
std::string scenario(const Incast& o) {
  const std::string n = std::to_string(o.senders), len = std::to_string(o.bytes);
  const std::string cc = o.cc.empty() ? "" : " cc: \"" + o.cc + "\"";
  std::string s = "fabric { topology { preset: \"incast_star\" senders: " + n +
                  " host_bits_per_sec: 10000000000 " + o.switches + " } }\n";
  s += "node { name: \"sink\"" + cc + " cq { name: \"k_cq\" cqe: 64 }\n  mr { name: \"k_mem\" length: " +
       std::to_string(o.bytes * size_t(o.senders)) + " access: \"LOCAL_WRITE\" access: \"REMOTE_WRITE\" }\n";
  for (int i = 0; i < o.senders; ++i) s += "  qp { name: \"k" + std::to_string(i) + "\" type: \"RC\" send_cq: \"k_cq\" }\n";
  s += "}\n";
  for (int i = 0; i < o.senders; ++i) {
    const std::string k = std::to_string(i);
    s += "node { name: \"s" + k + "\"" + cc + " cq { name: \"c" + k + "\" } mr { name: \"m" + k + "\" length: " + len +
         " access: \"LOCAL_WRITE\" fill: " + std::to_string(i + 1) + " } qp { name: \"a" + k +
         "\" type: \"RC\" send_cq: \"c" + k + "\" } }\n";
  }
  s += o.ladder + "\n";
  for (int i = 0; i < o.senders; ++i) {
    const std::string k = std::to_string(i);
    s += "step { connect { qp: \"a" + k + "\" peer: \"k" + k + "\" traffic_class: " +
         std::to_string(o.traffic_class) + " } }\n";
  }
  for (int i = 0; i < o.senders; ++i) {
    const std::string k = std::to_string(i);
    s += "step { post_send { qp: \"a" + k + "\" wr_id: 1 opcode: \"RDMA_WRITE\" sge { mr: \"m" + k +
         "\" } remote_mr: \"k_mem\" remote_offset: " + std::to_string(o.bytes * size_t(i)) + " } }\n";
  }
  for (int i = 0; i < o.senders; ++i) {
    const std::string k = std::to_string(i);
    s += "step { poll_cq { cq: \"c" + k + "\" expect { wr_id: 1 status: \"SUCCESS\" } } }\n";
    s += "step { expect_mem { mr: \"k_mem\" offset: " + std::to_string(o.bytes * size_t(i)) + " fill: " +
         std::to_string(i + 1) + " length: " + len + " } }\n";
  }
  return s + o.steps;
}

SimResult run(const Incast& o) {
  std::string err;
  auto sc = parse_scenario(scenario(o), "incast.textproto", &err);
  EXPECT_TRUE(sc) << err << "\n" << scenario(o);
  SimResult r;
  if (!sc) return r;
  EXPECT_TRUE(run_scenario(*sc, {}, &r, &err)) << err;
  return r;
}

const FabricReport::Port& port(const FabricReport& r, const std::string& name) {
  for (const auto& p : r.ports)
    if (p.name == name) return p;
  ADD_FAILURE() << "no port " << name;
  return r.ports.front();
}

const FabricReport::Flow* flow(const FabricReport& r, const std::string& src, const std::string& dst) {
  for (const auto& f : r.flows)
    if (f.src == src && f.dst == dst) return &f;
  return nullptr;
}

uint64_t counter(const FabricReport& r, const std::string& node, const std::string& name) {
  for (const auto& h : r.hosts)
    if (h.node == node)
      for (const auto& [n, v] : h.counters)
        if (n == name) return v;
  ADD_FAILURE() << "no counter " << name << " on " << node;
  return 0;
}

template <typename V>
uint64_t sum(const V& v) {
  return std::accumulate(v.begin(), v.end(), uint64_t{0});
}

TEST(FabricRun, AnIncastQueuesAtTheBottleneckAndItsMarksAddUpToTheSwitchCounters) {
  const SimResult r = run({});
  ASSERT_TRUE(r.failures.empty()) << r.failures.front();
  ASSERT_TRUE(r.fabric);
  const FabricReport& f = *r.fabric;
  // The samples are on one grid, every interval, and every line has one value per sample.
  ASSERT_FALSE(f.t.empty());
  for (size_t k = 0; k < f.t.size(); ++k) EXPECT_EQ(f.t[k], f.interval * int64_t(k + 1));
  const FabricReport::Port& bottleneck = port(f, "tor->sink");
  ASSERT_TRUE(bottleneck.sampled);
  EXPECT_EQ(bottleneck.queue_bytes.size(), f.t.size());
  // Three senders at line rate into one port: the queue grows past Kmin.
  EXPECT_GT(*std::max_element(bottleneck.queue_bytes.begin(), bottleneck.queue_bytes.end()), 10240u);
  EXPECT_LE(*std::max_element(bottleneck.queue_bytes.begin(), bottleneck.queue_bytes.end()),
            bottleneck.stats.max_queue_bytes);
  // Marks: the switch counted them, the flows' CE series hold them, the sink's device received them.
  EXPECT_GT(bottleneck.stats.ecn_marked, 0u);
  EXPECT_EQ(f.totals.ecn_marked, bottleneck.stats.ecn_marked);
  uint64_t ce = 0, ce_series = 0;
  for (const auto& fl : f.flows) {
    EXPECT_EQ(fl.bytes.size(), f.t.size());
    EXPECT_EQ(fl.ce.size(), f.t.size());
    EXPECT_EQ(sum(fl.bytes), fl.bytes_delivered) << fl.label();
    ce += fl.ce_marked;
    ce_series += sum(fl.ce);
  }
  EXPECT_EQ(ce, bottleneck.stats.ecn_marked);
  EXPECT_EQ(ce_series, bottleneck.stats.ecn_marked);
  EXPECT_EQ(counter(f, "sink", "np_ecn_marked_roce_packets"), bottleneck.stats.ecn_marked);
  // Every sender's flow delivered its 64 KiB (64 packets of 1 KiB) and lost nothing.
  for (int i = 0; i < 3; ++i) {
    const FabricReport::Flow* fl = flow(f, "s" + std::to_string(i), "sink");
    ASSERT_TRUE(fl);
    EXPECT_EQ(fl->qp, "a" + std::to_string(i));
    EXPECT_EQ(fl->dest_qp, "k" + std::to_string(i));
    EXPECT_EQ(fl->packets_sent, 64u);
    EXPECT_EQ(fl->packets_delivered, 64u);
  }
  EXPECT_EQ(f.totals.dropped, 0u);
}

TEST(FabricRun, QpsThatAreNotEctAreNeverMarked) {
  Incast o;
  o.traffic_class = 0;
  const SimResult r = run(o);
  ASSERT_TRUE(r.fabric);
  EXPECT_GT(port(*r.fabric, "tor->sink").stats.max_queue_bytes, 40960u);  // above Kmax: ECT packets would be marked
  EXPECT_EQ(r.fabric->totals.ecn_marked, 0u);
  EXPECT_EQ(counter(*r.fabric, "sink", "np_ecn_marked_roce_packets"), 0u);
}

TEST(FabricRun, PfcPausesTheSendersAndThePauseSeriesAddUpToThePortTotals) {
  const SimResult r = run({});
  ASSERT_TRUE(r.fabric);
  const FabricReport& f = *r.fabric;
  uint64_t pauses = 0;
  for (int i = 0; i < 3; ++i) {
    const FabricReport::Port& p = port(f, "s" + std::to_string(i) + "->tor");
    ASSERT_TRUE(p.sampled);
    EXPECT_GT(p.stats.pauses_received, 0u);
    EXPECT_GT(p.stats.paused.count(), 0);
    // Pause time within each sample, summed, is the port's total paused time.
    EXPECT_EQ(sum(p.paused_ns), uint64_t(p.stats.paused.count()));
    // No sample holds more pause than its interval.
    for (uint64_t ns : p.paused_ns) EXPECT_LE(ns, uint64_t(f.interval.count()));
    pauses += p.stats.pauses_received;
  }
  EXPECT_EQ(f.totals.pauses_received, pauses);
  EXPECT_EQ(f.totals.dropped, 0u);
}

TEST(FabricRun, ASmallBufferWithoutPfcDropsAndTheFlowsCountWhatWasLost) {
  Incast o;
  o.switches = "buffer_bytes: 32768";
  const SimResult r = run(o);
  ASSERT_TRUE(r.failures.empty()) << r.failures.front();  // RC recovered every WRITE
  ASSERT_TRUE(r.fabric);
  const FabricReport& f = *r.fabric;
  EXPECT_GT(port(f, "tor->sink").stats.dropped, 0u);
  EXPECT_EQ(f.totals.pauses_received, 0u);
  uint64_t lost = 0, sent = 0;
  for (const auto& fl : f.flows) {
    lost += fl.packets_sent - fl.packets_delivered;
    if (fl.dst == "sink") sent += fl.packets_sent;
  }
  EXPECT_EQ(lost, f.totals.dropped);
  EXPECT_GT(sent, 3u * 64);  // the retransmissions
}

TEST(FabricRun, DcqcnNodesAnswerMarksWithCnpsThatTheSeriesCount) {
  Incast o;
  o.cc = "dcqcn";
  const SimResult r = run(o);
  ASSERT_TRUE(r.failures.empty()) << r.failures.front();
  ASSERT_TRUE(r.fabric);
  const FabricReport& f = *r.fabric;
  uint64_t received = 0;
  for (const auto& h : f.hosts) {
    EXPECT_EQ(h.cnps.size(), f.t.size());
    EXPECT_EQ(sum(h.cnps), h.cnps_received) << h.node;
    if (h.node == "sink") continue;
    // The CNPs the network delivered to a sender are those its QP took.
    EXPECT_EQ(h.cnps_received, counter(f, h.node, "rp_cnp_handled")) << h.node;
    received += h.cnps_received;
  }
  EXPECT_GT(received, 0u);
  EXPECT_EQ(received, counter(f, "sink", "np_cnp_sent"));
}

TEST(FabricRun, TheLadderOfOneQpPairDrawsExactlyItsPackets) {
  Incast o;
  o.ladder = "ladder { qp: \"a1\" qp: \"k1\" }";
  const SimResult r = run(o);
  ASSERT_TRUE(r.fabric);
  const Ladder& l = r.ladder;
  ASSERT_EQ(l.lanes.size(), 2u);
  EXPECT_EQ(l.lanes[0].substr(0, 5), "sink ");
  EXPECT_EQ(l.lanes[1].substr(0, 3), "s1 ");
  size_t to_sink = 0, to_s1 = 0;
  for (const LadderEntry& e : l.entries) {
    if (!e.packet) continue;
    const LadderPacket& p = l.packets[*e.packet];
    ASSERT_TRUE((p.from == 1 && p.to == 0) || (p.from == 0 && p.to == 1)) << p.label();
    EXPECT_EQ(p.fate, LadderPacket::Fate::kDelivered) << p.label();
    (p.to == 0 ? to_sink : to_s1)++;
  }
  EXPECT_EQ(to_sink, flow(*r.fabric, "s1", "sink")->packets_sent);
  EXPECT_EQ(to_s1, flow(*r.fabric, "sink", "s1")->packets_sent);
  // The other QPs' events are not drawn, the pair's are.
  bool k1 = false;
  for (const LadderEntry& e : l.entries) {
    EXPECT_EQ(e.text.find("k0:"), std::string::npos) << e.text;
    EXPECT_EQ(e.text.find("k2:"), std::string::npos) << e.text;
    k1 = k1 || e.text.rfind("k1: RTR → RTS", 0) == 0;
  }
  EXPECT_TRUE(k1);
  // The page's state holds the pair only.
  ASSERT_FALSE(l.states.empty());
  for (const auto& q : l.states.back()["qps"]) {
    const std::string name = q["name"];
    EXPECT_TRUE(name == "a1" || name == "k1") << name;
  }
}

TEST(FabricRun, TheLadderOfOneQpPairLeavesOutAnotherPairBetweenTheSameNodes) {
  std::string err;
  auto sc = parse_scenario(R"(
fabric { topology { preset: "incast_star" senders: 1 host_bits_per_sec: 10000000000 } }
node { name: "sink" cq { name: "kc" } mr { name: "km" length: 16384 access: "LOCAL_WRITE" access: "REMOTE_WRITE" }
       qp { name: "k0" type: "RC" send_cq: "kc" } qp { name: "k1" type: "RC" send_cq: "kc" } }
node { name: "s0" cq { name: "sc" } mr { name: "sm" length: 8192 access: "LOCAL_WRITE" }
       qp { name: "a0" type: "RC" send_cq: "sc" } qp { name: "b0" type: "RC" send_cq: "sc" } }
ladder { qp: "b0" qp: "k1" }
step { connect { qp: "a0" peer: "k0" } }
step { connect { qp: "b0" peer: "k1" } }
step { post_send { qp: "a0" wr_id: 1 opcode: "RDMA_WRITE" sge { mr: "sm" } remote_mr: "km" } }
step { post_send { qp: "b0" wr_id: 2 opcode: "RDMA_WRITE" sge { mr: "sm" length: 4096 } remote_mr: "km" remote_offset: 8192 } }
step { poll_cq { cq: "sc" count: 2 } }
)",
                           "pairs.textproto", &err);
  ASSERT_TRUE(sc) << err;
  SimResult r;
  ASSERT_TRUE(run_scenario(*sc, {}, &r, &err)) << err;
  ASSERT_TRUE(r.failures.empty()) << r.failures.front();
  ASSERT_TRUE(r.fabric);
  // Both pairs ran between the same two hosts; the ladder draws b0's 4 packets and k1's ACKs only.
  uint64_t pair_packets = 0, all_packets = 0;
  for (const auto& f : r.fabric->flows) {
    all_packets += f.packets_sent;
    if (f.qp == "b0" || f.qp == "k1") pair_packets += f.packets_sent;
  }
  EXPECT_GT(all_packets, pair_packets);
  size_t requests = 0, drawn = 0;
  for (const LadderEntry& e : r.ladder.entries) {
    if (!e.packet) continue;
    ++drawn;
    const LadderPacket& p = r.ladder.packets[*e.packet];
    requests += p.to == 0;
    EXPECT_EQ(p.label().find("psn 5"), std::string::npos) << "a0's WRITE has 8 packets, b0's 4: " << p.label();
  }
  EXPECT_EQ(requests, 4u);
  EXPECT_EQ(drawn, pair_packets);
}

TEST(FabricRun, TheLadderOfTwoNodesDrawsTheirPacketsAndTheirFailures) {
  Incast o;
  o.ladder = "ladder { node: \"s2\" node: \"sink\" }";
  // A failed expectation on a node that is not drawn is drawn across the diagram.
  o.steps = "step { expect_counter { node: \"s0\" name: \"rcvd_pkts\" value: 12345 } }\n";
  const SimResult r = run(o);
  ASSERT_TRUE(r.fabric);
  const Ladder& l = r.ladder;
  ASSERT_EQ(l.lanes.size(), 2u);
  size_t packets = 0;
  for (const LadderEntry& e : l.entries) {
    if (!e.packet) continue;
    const LadderPacket& p = l.packets[*e.packet];
    EXPECT_TRUE(p.from >= 0 && p.to >= 0) << p.label();
    ++packets;
  }
  EXPECT_EQ(packets, flow(*r.fabric, "s2", "sink")->packets_sent + flow(*r.fabric, "sink", "s2")->packets_sent);
  ASSERT_EQ(r.failures.size(), 1u);
  bool across = false;
  for (const LadderEntry& e : l.entries)
    across = across || (e.lane == -1 && e.text.rfind("s0: ✗ expected s0 rcvd_pkts = 12345", 0) == 0);
  EXPECT_TRUE(across);
}

TEST(FabricRun, ExpectPortChecksTheSwitchCounters) {
  Incast o;
  o.steps =
      "step { expect_port { port: \"tor->sink\" name: \"dropped\" value: 0 } }\n"
      "step { expect_port { port: \"tor->sink\" name: \"tx_packets\" value: 192 at_least: true } }\n"
      "step { expect_port { port: \"s0->tor\" name: \"pauses_received\" value: 100000 at_least: true } }\n";
  const SimResult r = run(o);
  EXPECT_EQ(r.expectations, 3u * 2 + 3);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].find("incast.textproto:"), 0u) << r.failures[0];
  EXPECT_NE(r.failures[0].find("expected port s0->tor pauses_received >= 100000, got "), std::string::npos)
      << r.failures[0];
}

TEST(FabricRun, AScenarioWithoutATopologyHasNoNetworkReport) {
  std::string err;
  auto sc = parse_scenario("node { name: \"a\" }\nstep { advance { us: 5 } }\n", "plain.textproto", &err);
  ASSERT_TRUE(sc) << err;
  SimResult r;
  ASSERT_TRUE(run_scenario(*sc, {}, &r, &err)) << err;
  EXPECT_FALSE(r.fabric);
}

}  // namespace
}  // namespace rocelab::sim
