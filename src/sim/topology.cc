#include "sim/topology.h"

#include <iterator>
#include <map>

namespace rocelab::sim {

namespace {

using At = TopologyError::At;
constexpr uint64_t kDefaultRate = 100'000'000'000;  // 100 Gb/s
constexpr uint32_t kMaxHosts = 1024;                 // a lab, not a data centre

bool fail(TopologyError* e, At at, int index, std::string message) {
  e->at = at;
  e->index = index;
  e->message = std::move(message);
  return false;
}

// The preset's shape fields: given only where they mean something.
bool check_preset_fields(const scenario::Topology& t, TopologyError* e) {
  const std::string& p = t.preset();
  if (t.switch__size() != 0 || t.link_size() != 0)
    return fail(e, At::kPreset, 0,
                "a preset has its own switches and links: give the preset, or switch and link, not both");
  const bool leafy = t.leaves() || t.spines() || t.hosts_per_leaf();
  if (p == "dumbbell" || p == "incast_star") {
    if (leafy) return fail(e, At::kPreset, 0, "leaves, spines and hosts_per_leaf are leaf_spine's, not " + p + "'s");
    if (t.senders() == 0) return fail(e, At::kPreset, 0, p + ": how many senders? (senders: 1 or more)");
    if (p == "incast_star" && t.core_bits_per_sec())
      return fail(e, At::kPreset, 0, "an incast_star has no core link: core_bits_per_sec is dumbbell's and leaf_spine's");
    const uint64_t hosts = p == "dumbbell" ? 2ull * t.senders() : t.senders() + 1ull;
    if (hosts > kMaxHosts) return fail(e, At::kPreset, 0, p + ": at most " + std::to_string(kMaxHosts) + " hosts");
    return true;
  }
  if (p == "leaf_spine") {
    if (t.senders()) return fail(e, At::kPreset, 0, "senders is dumbbell's and incast_star's, not leaf_spine's");
    if (t.leaves() == 0 || t.spines() == 0 || t.hosts_per_leaf() == 0)
      return fail(e, At::kPreset, 0, "leaf_spine: leaves, spines and hosts_per_leaf must each be 1 or more");
    if (uint64_t{t.leaves()} * t.hosts_per_leaf() > kMaxHosts)
      return fail(e, At::kPreset, 0, "leaf_spine: at most " + std::to_string(kMaxHosts) + " hosts");
    return true;
  }
  return fail(e, At::kPreset, 0, "unknown preset \"" + p + "\" (dumbbell, incast_star or leaf_spine)");
}

std::string host_list(const fabric::Topology& t) {
  std::string s;
  size_t n = 0, hosts = 0;
  for (const auto& node : t.nodes) hosts += !node.is_switch;
  for (const auto& node : t.nodes) {
    if (node.is_switch) continue;
    if (++n > 6) {
      s += " ... (" + std::to_string(hosts) + " hosts)";
      break;
    }
    s += (s.empty() ? "" : ", ") + node.name;
  }
  return s;
}

constexpr const char* kPortCounters[] = {"tx_packets",      "tx_bytes",        "ecn_marked", "dropped",
                                         "max_queue_bytes", "pauses_received", "paused_ns"};

}  // namespace

std::optional<uint64_t> port_counter(const fabric::PortStats& s, std::string_view name) {
  const uint64_t v[] = {s.tx_packets,      s.tx_bytes,        s.ecn_marked, s.dropped,
                        s.max_queue_bytes, s.pauses_received, static_cast<uint64_t>(s.paused.count())};
  static_assert(std::size(v) == std::size(kPortCounters));
  for (size_t i = 0; i < std::size(v); ++i)
    if (name == kPortCounters[i]) return v[i];
  return std::nullopt;
}

bool port_counter_known(std::string_view name) { return port_counter(fabric::PortStats{}, name).has_value(); }

std::string port_counter_names() {
  std::string s;
  for (const char* n : kPortCounters) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

wire::IpAddr default_node_address(int i) { return wire::IpAddr::v4(10, 0, 0, static_cast<uint8_t>(i + 1)); }

std::optional<ScenarioTopology> scenario_topology(const scenario::Scenario& s, TopologyError* error) {
  *error = TopologyError{};
  if (!s.fabric().has_topology()) return std::nullopt;
  const scenario::Topology& t = s.fabric().topology();
  if (s.fabric().latency_ns() || s.fabric().link_bits_per_sec()) {
    fail(error, At::kFabric, 0,
         "latency_ns and link_bits_per_sec are the single wire's: with a topology every link has its own "
         "rate and delay (host_bits_per_sec, delay_ns, link)");
    return std::nullopt;
  }
  ScenarioTopology out;
  const uint64_t host_bps = t.host_bits_per_sec() ? t.host_bits_per_sec() : kDefaultRate;
  const uint64_t core_bps = t.core_bits_per_sec() ? t.core_bits_per_sec() : host_bps;
  const fabric::Nanos delay(t.delay_ns() ? t.delay_ns() : 1000);
  const int nodes = s.node_size();
  auto node_addr = [&](int i) {
    const std::string& a = s.node(i).address();
    return a.empty() ? default_node_address(i) : *wire::IpAddr::parse(a);
  };
  auto host_of = [&](int i) { return s.node(i).host().empty() ? s.node(i).name() : s.node(i).host(); };

  fabric::Topology& topo = out.topo;
  if (!t.preset().empty()) {
    if (!check_preset_fields(t, error)) return std::nullopt;
    out.shape = t.preset();
    if (t.preset() == "dumbbell")
      topo = fabric::dumbbell(t.senders(), host_bps, core_bps, delay);
    else if (t.preset() == "incast_star")
      topo = fabric::incast_star(t.senders(), host_bps, delay);
    else
      topo = fabric::leaf_spine(t.leaves(), t.spines(), t.hosts_per_leaf(), host_bps, core_bps, delay);
  } else {
    out.shape = "topology";
    if (t.link_size() == 0) {
      fail(error, At::kTopology, 0, "a topology is a preset, or switches and links between them and the nodes");
      return std::nullopt;
    }
    if (t.senders() || t.leaves() || t.spines() || t.hosts_per_leaf() || t.core_bits_per_sec()) {
      fail(error, At::kTopology, 0,
           "senders, leaves, spines, hosts_per_leaf and core_bits_per_sec describe a preset; this topology has none");
      return std::nullopt;
    }
    for (const std::string& sw : t.switch_()) {
      if (sw.empty()) {
        fail(error, At::kTopology, 0, "a switch needs a name");
        return std::nullopt;
      }
      topo.add_switch(sw);
    }
    for (int i = 0; i < nodes; ++i) topo.add_host(host_of(i), node_addr(i));
    std::map<std::string, bool> known;
    for (const auto& n : topo.nodes) known[n.name] = n.is_switch;
    for (int k = 0; k < t.link_size(); ++k) {
      const scenario::Link& l = t.link(k);
      for (const std::string& end : {l.a(), l.b()}) {
        if (end.empty()) {
          fail(error, At::kLink, k, "a link needs both ends (a and b)");
          return std::nullopt;
        }
        if (!known.contains(end)) {
          fail(error, At::kLink, k, "link " + l.a() + "-" + l.b() + ": no switch or node is called \"" + end + "\"");
          return std::nullopt;
        }
      }
      if (known[l.a()] == false && known[l.b()] == false) {
        fail(error, At::kLink, k, "link " + l.a() + "-" + l.b() + " joins two hosts: hosts connect to switches");
        return std::nullopt;
      }
      topo.link(l.a(), l.b(), l.bits_per_sec() ? l.bits_per_sec() : host_bps,
                l.delay_ns() ? fabric::Nanos(l.delay_ns()) : delay);
    }
  }
  fabric::SwitchParams& sw = topo.switches;
  if (t.buffer_bytes()) sw.buffer_bytes = t.buffer_bytes();
  if (t.has_ecn()) {
    const scenario::Ecn& e = t.ecn();
    sw.ecn.enabled = !e.has_enabled() || e.enabled();
    if (e.has_kmin_bytes()) sw.ecn.kmin_bytes = e.kmin_bytes();
    if (e.has_kmax_bytes()) sw.ecn.kmax_bytes = e.kmax_bytes();
    if (e.has_pmax()) sw.ecn.pmax = e.pmax();
    if (sw.ecn.kmin_bytes > sw.ecn.kmax_bytes) {
      fail(error, At::kEcn, 0,
           "ecn: kmin_bytes (" + std::to_string(sw.ecn.kmin_bytes) + ") is above kmax_bytes (" +
               std::to_string(sw.ecn.kmax_bytes) + "): marking starts at kmin and is certain from kmax");
      return std::nullopt;
    }
    if (!(sw.ecn.pmax >= 0 && sw.ecn.pmax <= 1)) {
      fail(error, At::kEcn, 0, "ecn: pmax is a probability, 0 to 1");
      return std::nullopt;
    }
  }
  if (t.has_pfc()) {
    const scenario::Pfc& p = t.pfc();
    sw.pfc.enabled = !p.has_enabled() || p.enabled();
    if (p.has_xoff_bytes()) sw.pfc.xoff_bytes = p.xoff_bytes();
    if (p.has_xon_bytes()) sw.pfc.xon_bytes = p.xon_bytes();
    if (sw.pfc.xon_bytes > sw.pfc.xoff_bytes) {
      fail(error, At::kPfc, 0,
           "pfc: xon_bytes (" + std::to_string(sw.pfc.xon_bytes) + ") is above xoff_bytes (" +
               std::to_string(sw.pfc.xoff_bytes) + "): a paused port resumes below where it paused");
      return std::nullopt;
    }
    if (sw.pfc.xoff_bytes == 0) {
      fail(error, At::kPfc, 0, "pfc: xoff_bytes must be above 0");
      return std::nullopt;
    }
  }
  if (t.seed()) topo.seed = t.seed();
  if (t.sample_interval_ns()) out.sample_interval = std::chrono::nanoseconds(t.sample_interval_ns());
  if (std::string why = topo.check(); !why.empty()) {
    fail(error, At::kTopology, 0, out.shape + ": " + why);
    return std::nullopt;
  }
  // Which host each node is.
  std::map<std::string, int> taken;
  for (int i = 0; i < nodes; ++i) {
    const std::string host = host_of(i);
    const fabric::NodeSpec* spec = nullptr;
    for (const auto& n : topo.nodes)
      if (n.name == host) spec = &n;
    if (spec == nullptr || spec->is_switch) {
      fail(error, At::kNode, i,
           "node " + s.node(i).name() + ": the " + out.shape + " has no host \"" + host + "\"" +
               (s.node(i).host().empty() ? " (host: names it; the default is the node's name)" : "") +
               "; its hosts: " + host_list(topo));
      return std::nullopt;
    }
    if (auto [it, fresh] = taken.emplace(host, i); !fresh) {
      fail(error, At::kNode, i, "nodes " + s.node(it->second).name() + " and " + s.node(i).name() + " are both host " + host);
      return std::nullopt;
    }
    if (!s.node(i).address().empty() && !(*wire::IpAddr::parse(s.node(i).address()) == spec->addr)) {
      fail(error, At::kNode, i,
           "node " + s.node(i).name() + ": host " + host + " is at " + spec->addr.to_string() + ", not " +
               s.node(i).address() + " (leave address out)");
      return std::nullopt;
    }
    uint64_t rate = 0;
    for (const auto& l : topo.links)
      if (l.a == host || l.b == host) rate = l.bits_per_sec;
    out.node_host.push_back(host);
    out.node_addr.push_back(spec->addr);
    out.node_line_rate.push_back(rate);
  }
  return out;
}

}  // namespace rocelab::sim
