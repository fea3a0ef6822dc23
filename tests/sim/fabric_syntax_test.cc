// A scenario's switched network as it is written (proto/scenario.proto's
// Topology, a node's host and cc, the ladder filter, expect_port): presets
// and written-out topologies become the fabric::Topology they describe, each
// node sits at its host's address with its link's rate, and every kind of
// mistake is refused before anything runs, as "file:line: what".
#include <gtest/gtest.h>

#include <string>

#include "sim/scenario.h"
#include "sim/topology.h"

namespace rocelab::sim {
namespace {

constexpr const char* kPath = "t.textproto";

std::optional<LoadedScenario> parse(const std::string& text, std::string* error) {
  return parse_scenario(text, kPath, error);
}

// The topology of a scenario that must parse.
ScenarioTopology topology_of(const std::string& text) {
  std::string err;
  auto sc = parse(text, &err);
  EXPECT_TRUE(sc) << err;
  if (!sc) return {};
  TopologyError te;
  auto t = scenario_topology(sc->s, &te);
  EXPECT_TRUE(t) << te.message;
  return t ? *t : ScenarioTopology{};
}

// The error of a scenario that must not parse.
std::string error_of(const std::string& text) {
  std::string err;
  auto sc = parse(text, &err);
  EXPECT_FALSE(sc) << "parsed:\n" << text;
  return err;
}

const fabric::NodeSpec* node(const fabric::Topology& t, const std::string& name) {
  for (const auto& n : t.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

const char* kTwoNodes = R"(
node { name: "sink" }
node { name: "s0" }
)";

TEST(FabricSyntax, AnIncastStarPresetPlacesNodesAtTheHostsOfTheirNames) {
  const ScenarioTopology t = topology_of(std::string(R"(
fabric { topology { preset: "incast_star" senders: 3 host_bits_per_sec: 25000000000 delay_ns: 500
                    ecn { kmin_bytes: 1000 kmax_bytes: 9000 pmax: 0.5 } pfc {} buffer_bytes: 65536 seed: 9 } }
)") + kTwoNodes);
  EXPECT_EQ(t.shape, "incast_star");
  ASSERT_EQ(t.topo.nodes.size(), 5u);  // tor, sink, s0..s2
  ASSERT_TRUE(node(t.topo, "tor"));
  EXPECT_TRUE(node(t.topo, "tor")->is_switch);
  ASSERT_EQ(t.node_addr.size(), 2u);
  EXPECT_EQ(t.node_addr[0].to_string(), "10.0.0.1");  // the sink is host 0
  EXPECT_EQ(t.node_addr[1].to_string(), "10.0.0.2");
  EXPECT_EQ(t.node_host[1], "s0");
  EXPECT_EQ(t.node_line_rate[0], 25'000'000'000u);
  for (const auto& l : t.topo.links) {
    EXPECT_EQ(l.bits_per_sec, 25'000'000'000u);
    EXPECT_EQ(l.delay, fabric::Nanos(500));
  }
  const fabric::SwitchParams& sw = t.topo.switches;
  EXPECT_TRUE(sw.ecn.enabled);
  EXPECT_EQ(sw.ecn.kmin_bytes, 1000u);
  EXPECT_EQ(sw.ecn.kmax_bytes, 9000u);
  EXPECT_EQ(sw.ecn.pmax, 0.5);
  // `pfc {}` is PFC on with the defaults.
  EXPECT_TRUE(sw.pfc.enabled);
  EXPECT_EQ(sw.pfc.xoff_bytes, fabric::PfcParams{}.xoff_bytes);
  EXPECT_EQ(sw.buffer_bytes, 65536u);
  EXPECT_EQ(t.topo.seed, 9u);
  EXPECT_EQ(t.sample_interval, std::chrono::nanoseconds(10'000));
}

TEST(FabricSyntax, ANodesHostFieldChoosesItsHost) {
  const ScenarioTopology t = topology_of(R"(
fabric { topology { preset: "incast_star" senders: 4 sample_interval_ns: 2000 } }
node { name: "alice" host: "s2" }
node { name: "bob" host: "sink" address: "10.0.0.1" }
)");
  EXPECT_EQ(t.node_addr[0].to_string(), "10.0.0.4");
  EXPECT_EQ(t.node_host[0], "s2");
  EXPECT_EQ(t.node_addr[1].to_string(), "10.0.0.1");
  EXPECT_EQ(t.node_line_rate[0], 100'000'000'000u);  // the default host rate
  EXPECT_EQ(t.sample_interval, std::chrono::nanoseconds(2000));
  EXPECT_FALSE(t.topo.switches.ecn.enabled);
  EXPECT_FALSE(t.topo.switches.pfc.enabled);
}

TEST(FabricSyntax, DumbbellAndLeafSpineTakeTheirSizesAndCoreRate) {
  const ScenarioTopology d = topology_of(R"(
fabric { topology { preset: "dumbbell" senders: 2 host_bits_per_sec: 40000000000 core_bits_per_sec: 10000000000 } }
node { name: "s1" }
node { name: "r0" }
)");
  EXPECT_EQ(d.topo.nodes.size(), 6u);
  EXPECT_EQ(d.node_addr[1].to_string(), "10.0.0.3");  // r0 is host `senders`
  bool bottleneck = false;
  for (const auto& l : d.topo.links)
    if (l.a == "left" && l.b == "right") bottleneck = l.bits_per_sec == 10'000'000'000u;
  EXPECT_TRUE(bottleneck);
  EXPECT_EQ(d.node_line_rate[0], 40'000'000'000u);

  const ScenarioTopology ls = topology_of(R"(
fabric { topology { preset: "leaf_spine" leaves: 3 spines: 2 hosts_per_leaf: 2 } }
node { name: "h0" }
node { name: "h5" }
)");
  size_t switches = 0;
  for (const auto& n : ls.topo.nodes) switches += n.is_switch;
  EXPECT_EQ(switches, 5u);
  EXPECT_EQ(ls.topo.links.size(), 3u * 2 + 6);
  EXPECT_EQ(ls.node_addr[1].to_string(), "10.0.0.6");
}

TEST(FabricSyntax, AWrittenOutTopologyMakesEveryNodeAHost) {
  const ScenarioTopology t = topology_of(R"(
fabric { topology {
  switch: "left" switch: "right"
  link { a: "alice" b: "left" }
  link { a: "left" b: "right" bits_per_sec: 1000000000 delay_ns: 5000 }
  link { a: "right" b: "bob" bits_per_sec: 40000000000 }
  ecn { enabled: false kmin_bytes: 100 kmax_bytes: 200 }
} }
node { name: "alice" }
node { name: "bob" address: "192.168.1.9" }
)");
  EXPECT_EQ(t.shape, "topology");
  EXPECT_EQ(t.node_addr[0].to_string(), "10.0.0.1");
  EXPECT_EQ(t.node_addr[1].to_string(), "192.168.1.9");
  EXPECT_EQ(t.node_line_rate[0], 100'000'000'000u);
  EXPECT_EQ(t.node_line_rate[1], 40'000'000'000u);
  ASSERT_EQ(t.topo.links.size(), 3u);
  EXPECT_EQ(t.topo.links[1].delay, fabric::Nanos(5000));
  EXPECT_EQ(t.topo.links[0].delay, fabric::Nanos(1000));
  // enabled: false keeps the numbers and turns marking off.
  EXPECT_FALSE(t.topo.switches.ecn.enabled);
  EXPECT_EQ(t.topo.switches.ecn.kmin_bytes, 100u);
}

TEST(FabricSyntax, AScenarioWithoutATopologyHasNone) {
  std::string err;
  auto sc = parse("fabric { latency_ns: 500 }\nnode { name: \"a\" cc: \"dcqcn\" dcqcn_params: \"paper\" }\n", &err);
  ASSERT_TRUE(sc) << err;
  TopologyError te;
  EXPECT_FALSE(scenario_topology(sc->s, &te));
  EXPECT_EQ(te.message, "");
}

TEST(FabricSyntax, TheLadderFilterAndExpectPortParse) {
  std::string err;
  auto sc = parse(R"(
fabric { topology { preset: "incast_star" senders: 1 } }
node { name: "sink" cq { name: "c" } qp { name: "k" type: "RC" send_cq: "c" } }
node { name: "s0" cc: "none" cq { name: "d" } qp { name: "a" type: "RC" send_cq: "d" } }
ladder { node: "s0" qp: "a" qp: "k" }
step { connect { qp: "a" peer: "k" traffic_class: 2 } }
step { expect_port { port: "tor->sink" name: "ecn_marked" value: 0 } }
step { expect_port { port: "s0->tor" name: "paused_ns" value: 0 at_least: true } }
)",
                  &err);
  EXPECT_TRUE(sc) << err;
}

// Each mistake: the line it is on, and words that say what is wrong.
struct Bad {
  const char* what;
  const char* text;
  const char* want;  // the whole message after "t.textproto:"
};

const Bad kBad[] = {
    {"an unknown preset", R"(node { name: "a" }
fabric {
  topology {
    preset: "fat_tree"
  }
})",
     "4: unknown preset \"fat_tree\" (dumbbell, incast_star or leaf_spine)"},
    {"a link to a missing switch", R"(node { name: "a" }
node { name: "b" }
fabric { topology {
  switch: "tor"
  link { a: "a" b: "tor" }
  link { a: "b" b: "tro" }
} })",
     "6: link b-tro: no switch or node is called \"tro\""},
    {"Kmin above Kmax", R"(node { name: "sink" }
fabric { topology { preset: "incast_star" senders: 2
  ecn { kmin_bytes: 50000 kmax_bytes: 20000 }
} })",
     "3: ecn: kmin_bytes (50000) is above kmax_bytes (20000): marking starts at kmin and is certain from kmax"},
    {"Pmax above 1", R"(node { name: "sink" }
fabric { topology { preset: "incast_star" senders: 2
  ecn { pmax: 1.5 }
} })",
     "3: ecn: pmax is a probability, 0 to 1"},
    {"XON above XOFF", R"(node { name: "sink" }
fabric { topology { preset: "incast_star" senders: 2
  pfc { xoff_bytes: 1000 xon_bytes: 2000 }
} })",
     "3: pfc: xon_bytes (2000) is above xoff_bytes (1000): a paused port resumes below where it paused"},
    {"a node that is no host of the preset", R"(fabric { topology { preset: "incast_star" senders: 2 } }
node { name: "sink" }
node { name: "alice" })",
     "3: node alice: the incast_star has no host \"alice\" (host: names it; the default is the node's name); its "
     "hosts: sink, s0, s1"},
    {"a node at another address than its host", R"(fabric { topology { preset: "incast_star" senders: 2 } }
node { name: "s0" address: "10.0.0.7" })",
     "2: node s0: host s0 is at 10.0.0.2, not 10.0.0.7 (leave address out)"},
    {"two nodes on one host", R"(fabric { topology { preset: "incast_star" senders: 2 } }
node { name: "a" host: "s1" }
node { name: "b" host: "s1" })",
     "3: nodes a and b are both host s1"},
    {"the single wire's fields with a topology", R"(node { name: "sink" }
fabric { latency_ns: 300 topology { preset: "incast_star" senders: 1 } })",
     "2: latency_ns and link_bits_per_sec are the single wire's: with a topology every link has its own rate and "
     "delay (host_bits_per_sec, delay_ns, link)"},
    {"a preset with links of its own", R"(node { name: "sink" }
fabric { topology {
  preset: "incast_star" senders: 1
  link { a: "sink" b: "tor" }
} })",
     "3: a preset has its own switches and links: give the preset, or switch and link, not both"},
    {"a leaf_spine size on an incast_star", R"(node { name: "sink" }
fabric { topology { preset: "incast_star" senders: 1 leaves: 2 } })",
     "2: leaves, spines and hosts_per_leaf are leaf_spine's, not incast_star's"},
    {"an incast without senders", R"(node { name: "sink" }
fabric { topology { preset: "incast_star" } })",
     "2: incast_star: how many senders? (senders: 1 or more)"},
    {"a leaf_spine without spines", R"(node { name: "h0" }
fabric { topology { preset: "leaf_spine" leaves: 2 hosts_per_leaf: 1 } })",
     "2: leaf_spine: leaves, spines and hosts_per_leaf must each be 1 or more"},
    {"a host with two links (Topology::check)", R"(node { name: "a" }
node { name: "b" }
fabric {
  topology {
    switch: "x"
    link { a: "a" b: "x" }
    link { a: "b" b: "x" }
    link { a: "a" b: "x" }
  }
})",
     "4: topology: host a has 2 links (a host has one)"},
    {"two hosts linked to each other", R"(node { name: "a" }
node { name: "b" }
fabric { topology { link { a: "a" b: "b" } } })",
     "3: link a-b joins two hosts: hosts connect to switches"},
    {"a topology that is neither", R"(node { name: "a" }
fabric { topology { switch: "x" } })",
     "2: a topology is a preset, or switches and links between them and the nodes"},
    {"an unknown congestion control", R"(node { name: "a" }
node {
  name: "b"
  cc: "timely"
})",
     "2: node b: cc: unknown congestion control 'timely' (none, dcqcn)"},
    {"unknown DCQCN parameters", R"(node { name: "a" cc: "dcqcn" dcqcn_params: "cx7" })",
     "1: node a: dcqcn_params is \"mlx5\" or \"paper\", not \"cx7\""},
    {"a host without a topology", R"(node { name: "a" host: "s0" })",
     "1: node a: host names a host of the fabric's topology, and there is none"},
    {"a ladder of an unknown node", R"(node { name: "a" }
ladder { node: "b" })",
     "2: ladder: no node is named \"b\""},
    {"a ladder of an unknown QP", R"(node { name: "a" cq { name: "c" } }
ladder { qp: "c" })",
     "2: \"c\" is a cq, not a qp"},
    {"expect_port without a topology", R"(node { name: "a" }
step { expect_port { port: "tor->a" name: "dropped" } })",
     "2: expect_port: the fabric has no topology, so no switch ports"},
    {"expect_port on a port that does not exist", R"(fabric { topology { preset: "incast_star" senders: 1 } }
node { name: "sink" }
step { expect_port { port: "s0->sink" name: "dropped" } })",
     "3: expect_port: no port \"s0->sink\" (a port is \"from->to\", e.g. \"tor->sink\")"},
    {"expect_port of an unknown counter", R"(fabric { topology { preset: "incast_star" senders: 1 } }
node { name: "sink" }

step { expect_port { port: "tor->sink" name: "marks" } })",
     "4: expect_port: unknown counter \"marks\" (tx_packets, tx_bytes, ecn_marked, dropped, max_queue_bytes, "
     "pauses_received, paused_ns)"},
    {"a traffic class that is no byte", R"(node { name: "a" cq { name: "c" } qp { name: "q" type: "RC" send_cq: "c" } qp { name: "r" type: "RC" send_cq: "c" } }
step { connect { qp: "q" peer: "r" traffic_class: 256 } })",
     "2: traffic_class is a byte (DSCP << 2 | ECN, 0..255)"},
};

TEST(FabricSyntax, EveryKindOfMistakeIsNamedWithItsLine) {
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.what);
    EXPECT_EQ(error_of(b.text), std::string(kPath) + ":" + b.want);
  }
}

}  // namespace
}  // namespace rocelab::sim
