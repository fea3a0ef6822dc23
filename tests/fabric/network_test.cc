// The switched network with datagrams sent by hand through the simulated
// fabric's ports: store-and-forward timing, ECN marking on queue depth, buffer
// drops, PFC pauses and the head-of-line blocking they spread, ECMP, and the
// time series.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "emu/transport/sim_fabric.h"
#include "fabric/network.h"

namespace rocelab::fabric {
namespace {

using emu::Datagram;
using emu::SimFabric;
using emu::Transport;

constexpr uint64_t k10G = 10'000'000'000;

struct Received {
  Nanos at;
  uint8_t tclass;
  uint16_t sport;
  uint32_t len;
};

// A network, its fabric and a port per host.
struct Bed {
  std::shared_ptr<SwitchedNetwork> net;
  std::unique_ptr<SimFabric> fabric;
  std::vector<std::unique_ptr<Transport>> ports;  // topology's hosts, in node order
  std::vector<std::vector<Received>> got;

  explicit Bed(Topology t, Nanos interval = Nanos(0)) {
    std::string err;
    net = std::make_shared<SwitchedNetwork>(std::move(t), interval, &err);
    EXPECT_EQ(err, "");
    emu::SimFabricConfig cfg;
    cfg.network = net;
    fabric = std::make_unique<SimFabric>(cfg);
    for (const NodeSpec& n : net->topology().nodes) {
      if (n.is_switch) continue;
      ports.push_back(fabric->attach(n.addr));
      EXPECT_TRUE(ports.back()) << n.name;
    }
    got.resize(ports.size());
  }
  // Sends n datagrams of len payload bytes (first byte: opcode) from host
  // `from` to host `to`.
  void send(size_t from, size_t to, int n, uint32_t len, uint8_t tclass = 0, uint16_t sport = 0xC000,
            uint8_t opcode = 0x0A) {
    std::vector<std::byte> payload(len);
    payload[0] = std::byte{opcode};
    for (int i = 0; i < n; ++i) {
      Datagram d;
      d.ip.src = ports[from]->local_address();
      d.ip.dst = ports[to]->local_address();
      d.ip.sport = sport;
      d.ip.tclass = tclass;
      d.payload = payload;
      ASSERT_EQ(ports[from]->send({&d, 1}), 1u);
    }
  }
  // Runs until nothing is pending, recording what every port receives.
  void drain() {
    fabric->run_until([] { return false; }, Nanos(std::chrono::seconds(1)), [this] {
      for (size_t i = 0; i < ports.size(); ++i) {
        ports[i]->poll([&](const Datagram& d) {
          got[i].push_back({fabric->now(), d.ip.tclass, d.ip.sport, uint32_t(d.payload.size())});
        });
      }
    });
  }
  const PortStats& stats(const char* a, const char* b) {
    const int p = net->port_between(a, b);
    EXPECT_GE(p, 0) << a << "->" << b;
    return net->port_stats(uint32_t(p));
  }
};

TEST(Topology, CheckNamesWhatIsWrong) {
  Topology t = incast_star(1, k10G, Nanos(1000));
  EXPECT_EQ(t.check(), "");
  Topology dup = t;
  dup.nodes[2].addr = dup.nodes[1].addr;
  EXPECT_NE(dup.check().find("share the address"), std::string::npos);
  Topology two_links = t;
  two_links.link("sink", "s0", k10G, Nanos(1));
  EXPECT_NE(two_links.check().find("has 2 links"), std::string::npos);
  Topology unknown = t;
  unknown.links[0].b = "nowhere";
  EXPECT_NE(unknown.check().find("unknown node \"nowhere\""), std::string::npos);
  Topology island = t;
  island.add_switch("island");
  island.link(island.add_host("alone", preset_address(9)), "island", k10G, Nanos(1));
  EXPECT_NE(island.check().find("host alone cannot reach"), std::string::npos);
  std::string err;
  SwitchedNetwork net(unknown, Nanos(0), &err);
  EXPECT_NE(err, "");
  EXPECT_FALSE(net.has_host(preset_address(0)));
}

TEST(SwitchedNetwork, APortAttachesOnlyAtAHostAddress) {
  Bed bed(incast_star(1, k10G, Nanos(1000)));
  EXPECT_EQ(bed.fabric->attach(wire::IpAddr::v4(192, 168, 0, 1)), nullptr);
}

TEST(SwitchedNetwork, APacketIsSerializedAndPropagatedOnEveryHop) {
  Bed bed(incast_star(1, k10G, Nanos(1000)));  // sink = port 0, s0 = port 1
  bed.send(1, 0, 1, 1000);
  bed.drain();
  ASSERT_EQ(bed.got[0].size(), 1u);
  // Frame: 1000 + 28 (IPv4, UDP) + 38 (Ethernet header, FCS, preamble, gap)
  // = 1066 bytes = 8528 bits = 852.8 ns at 10 Gb/s, per hop (store and
  // forward), plus 1 µs of propagation per hop; each port carries its own
  // sub-nanosecond remainder, so both hops round down to 852 ns.
  EXPECT_EQ(bed.got[0][0].at, Nanos(852 + 1000 + 852 + 1000));
  EXPECT_EQ(bed.stats("s0", "tor").tx_packets, 1u);
  EXPECT_EQ(bed.stats("tor", "sink").tx_bytes, 1000u);
}

TEST(SwitchedNetwork, BackToBackPacketsKeepTheExactLineRate) {
  Bed bed(incast_star(1, k10G, Nanos(0)));
  bed.send(1, 0, 1000, 1000);
  bed.drain();
  ASSERT_EQ(bed.got[0].size(), 1000u);
  // 1000 frames of 852.8 ns leave the sender's NIC back to back, the last at
  // exactly 852800 ns; the switch forwards each as it arrives, and its own
  // remainder after 999 frames is 0.2 ns, so the last takes it 853 ns.
  EXPECT_EQ(bed.got[0].back().at, Nanos(852800 + 853));
}

Topology two_into_one(uint64_t buffer) {
  Topology t = incast_star(2, k10G, Nanos(1000));
  t.switches.buffer_bytes = buffer;
  return t;
}

TEST(SwitchedNetwork, EcnMarksEctPacketsOnceTheQueuePassesKmin) {
  Topology t = two_into_one(1 << 20);
  t.switches.ecn = {true, 5 * 1066, 20 * 1066, 1.0};
  Bed bed(t);
  bed.send(1, 0, 40, 1000, /*tclass=*/0x02);
  bed.send(2, 0, 40, 1000, /*tclass=*/0x02);
  bed.drain();
  ASSERT_EQ(bed.got[0].size(), 80u);
  size_t ce = 0;
  for (const Received& r : bed.got[0]) ce += (r.tclass & 3) == 3;
  // Two senders at line rate into one port: the queue grows by a frame every
  // two arrivals, so the first packets find it below Kmin and pass unmarked,
  // and past Kmax (20 frames) every one is marked.
  EXPECT_EQ((bed.got[0][0].tclass & 3), 2);
  EXPECT_GT(ce, 20u);
  EXPECT_LT(ce, 80u);
  EXPECT_EQ(bed.stats("tor", "sink").ecn_marked, ce);
  EXPECT_GE(bed.stats("tor", "sink").max_queue_bytes, 20u * 1066);
}

TEST(SwitchedNetwork, PacketsThatAreNotEcnCapableAreNeverMarked) {
  Topology t = two_into_one(1 << 20);
  t.switches.ecn = {true, 0, 1066, 1.0};
  Bed bed(t);
  bed.send(1, 0, 40, 1000, /*tclass=*/0x00);
  bed.send(2, 0, 40, 1000, /*tclass=*/0xB8);  // DSCP 46, not ECT
  bed.drain();
  ASSERT_EQ(bed.got[0].size(), 80u);
  for (const Received& r : bed.got[0]) EXPECT_EQ(r.tclass & 3, 0);
  EXPECT_EQ(bed.stats("tor", "sink").ecn_marked, 0u);
}

TEST(SwitchedNetwork, AFullSharedBufferDropsWithoutPfc) {
  Bed bed(two_into_one(20 * 1066));
  bed.send(1, 0, 40, 1000);
  bed.send(2, 0, 40, 1000);
  bed.drain();
  const uint64_t dropped = bed.stats("tor", "sink").dropped;
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(bed.got[0].size() + dropped, 80u);
  EXPECT_EQ(bed.fabric->stats().dropped_network, dropped);
  EXPECT_EQ(bed.net->in_flight(), 0u);
}

TEST(SwitchedNetwork, PfcPausesTheSendersInsteadOfDropping) {
  Topology t = two_into_one(20 * 1066);
  t.switches.pfc = {true, 6 * 1066, 3 * 1066};
  Bed bed(t);
  bed.send(1, 0, 40, 1000);
  bed.send(2, 0, 40, 1000);
  bed.drain();
  EXPECT_EQ(bed.got[0].size(), 80u);
  EXPECT_EQ(bed.net->totals().dropped, 0u);
  for (const char* s : {"s0", "s1"}) {
    EXPECT_GT(bed.stats(s, "tor").pauses_received, 0u) << s;
    EXPECT_GT(bed.stats(s, "tor").paused.count(), 0) << s;
    EXPECT_FALSE(bed.net->paused(uint32_t(bed.net->port_between(s, "tor")))) << s << " resumed";
  }
  // Paused senders, not the buffer, hold the backlog: the bottleneck queue
  // stays within the buffer.
  EXPECT_LE(bed.stats("tor", "sink").max_queue_bytes, 20u * 1066);
}

// Two senders congest "sink"; s1 also has packets for "other", whose link is
// idle. A pause of s1's link stops them as well: one lossless class, one FIFO
// in s1's NIC (the DCQCN paper's argument against PFC alone).
Nanos innocent_done(bool pfc) {
  Topology t = incast_star(2, k10G, Nanos(1000));
  t.link(t.add_host("other", preset_address(9)), "tor", k10G, Nanos(1000));
  t.switches.buffer_bytes = 1 << 20;
  t.switches.pfc = {pfc, 6 * 1066, 3 * 1066};
  Bed bed(t);  // ports: sink 0, s0 1, s1 2, other 3
  bed.send(1, 0, 200, 1000);
  for (int i = 0; i < 100; ++i) {
    bed.send(2, 0, 1, 1000);
    bed.send(2, 3, 1, 1000, 0, 0xC001);
  }
  bed.drain();
  EXPECT_EQ(bed.got[3].size(), 100u);
  EXPECT_EQ(bed.got[0].size(), 300u);
  // The innocent flow's own queue never holds more than the frame on the wire.
  EXPECT_LE(bed.stats("tor", "other").max_queue_bytes, 1066u);
  EXPECT_EQ(bed.stats("s1", "tor").paused.count() > 0, pfc);
  return bed.got[3].empty() ? Nanos(0) : bed.got[3].back().at;
}

TEST(SwitchedNetwork, PfcPausesSpreadToAnInnocentFlow) {
  const Nanos lossy = innocent_done(false), lossless = innocent_done(true);
  // Without PFC s1 sends at line rate: 200 frames of 852.8 ns, and the last
  // packet for "other" arrives at 173 µs. With PFC the switch pauses s1 for
  // about 31 µs in all (its half of the bottleneck's backlog), and the flow to
  // the idle "other" waits with it: 200 µs.
  EXPECT_LT(lossy, Nanos(175'000));
  EXPECT_GT(lossless, lossy * 1.1);
}

TEST(SwitchedNetwork, EcmpSpreadsFlowsOverTheSpinesAndKeepsEachOnOnePath) {
  Bed bed(leaf_spine(2, 2, 1, k10G, k10G, Nanos(100)));  // h0 on leaf0, h1 on leaf1
  for (uint16_t f = 0; f < 64; ++f) bed.send(0, 1, 3, 200, 0, uint16_t(0xC000 + f));
  bed.drain();
  ASSERT_EQ(bed.got[1].size(), 192u);
  const uint64_t via0 = bed.stats("leaf0", "spine0").tx_packets, via1 = bed.stats("leaf0", "spine1").tx_packets;
  EXPECT_EQ(via0 + via1, 192u);
  EXPECT_EQ(via0 % 3, 0u) << "a flow's packets all take one spine";
  EXPECT_GT(via0, 192u / 4);
  EXPECT_GT(via1, 192u / 4);
}

TEST(SwitchedNetwork, TheTimeSeriesAccountForEveryByteAndCnp) {
  Bed bed(two_into_one(1 << 20), Nanos(10'000));
  bed.send(1, 0, 40, 1000);
  bed.send(2, 0, 40, 1000, 0, 0xC001);
  bed.send(0, 1, 3, 100, 0, 0xC002, /*opcode=*/0x81);  // CNPs to s0
  bed.drain();
  const Series& s = bed.net->series(bed.fabric->now());
  ASSERT_FALSE(s.t.empty());
  EXPECT_EQ(s.t[0], Nanos(10'000));
  uint64_t bytes = 0;
  for (const Series::FlowLine& f : s.flows) {
    EXPECT_EQ(f.bytes.size(), s.t.size());
    for (uint64_t b : f.bytes) bytes += b;
  }
  EXPECT_EQ(s.flows.size(), 3u);
  EXPECT_EQ(bytes, 80u * 1000 + 3 * 100);
  ASSERT_EQ(s.hosts.size(), 1u);
  uint32_t cnps = 0;
  for (uint32_t c : s.hosts[0].cnps) cnps += c;
  EXPECT_EQ(cnps, 3u);
  EXPECT_EQ(bed.net->cnps_delivered(), 3u);
  const int bottleneck = bed.net->port_between("tor", "sink");
  uint64_t deepest = 0;
  for (const Series::PortLine& p : s.ports) {
    if (p.port != uint32_t(bottleneck)) continue;
    for (uint64_t q : p.queue_bytes) deepest = std::max(deepest, q);
  }
  EXPECT_GT(deepest, 10u * 1066);
  EXPECT_LE(deepest, bed.net->port_stats(uint32_t(bottleneck)).max_queue_bytes);
}

TEST(SwitchedNetwork, ResetEmptiesTheNetworkAndItsCounters) {
  Bed bed(two_into_one(1 << 20), Nanos(1000));
  bed.send(1, 0, 40, 1000);
  EXPECT_GT(bed.fabric->in_flight(), 0u);
  ASSERT_FALSE(bed.fabric->reset());
  EXPECT_EQ(bed.fabric->in_flight(), 0u);
  EXPECT_EQ(bed.net->totals().tx_packets, 0u);
  EXPECT_EQ(bed.fabric->next_event(), Nanos::max());
  bed.send(1, 0, 1, 1000);
  bed.drain();
  EXPECT_EQ(bed.got[0].size(), 1u);
}

}  // namespace
}  // namespace rocelab::fabric
