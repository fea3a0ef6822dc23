#include "fabric/topology.h"

#include <algorithm>
#include <map>
#include <set>

namespace rocelab::fabric {

const std::string& Topology::add_host(const std::string& name, const wire::IpAddr& addr) {
  nodes.push_back({name, false, addr});
  return nodes.back().name;
}

const std::string& Topology::add_switch(const std::string& name) {
  nodes.push_back({name, true, {}});
  return nodes.back().name;
}

void Topology::link(const std::string& a, const std::string& b, uint64_t bits_per_sec, Nanos delay) {
  links.push_back({a, b, bits_per_sec, delay});
}

std::string Topology::check() const {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeSpec& n = nodes[i];
    if (n.name.empty()) return "node " + std::to_string(i) + " has no name";
    if (!index.emplace(n.name, i).second) return "two nodes are called \"" + n.name + "\"";
  }
  std::set<std::string> addrs;
  for (const NodeSpec& n : nodes) {
    if (n.is_switch) continue;
    if (n.addr.is_multicast()) return "host " + n.name + " has a multicast address";
    if (!addrs.insert(n.addr.to_string()).second)
      return "hosts share the address " + n.addr.to_string() + " (" + n.name + ")";
  }
  if (addrs.empty()) return "the network has no host";
  std::vector<std::vector<size_t>> adj(nodes.size());
  for (const LinkSpec& l : links) {
    auto a = index.find(l.a), b = index.find(l.b);
    if (a == index.end()) return "a link names the unknown node \"" + l.a + "\"";
    if (b == index.end()) return "a link names the unknown node \"" + l.b + "\"";
    if (a->second == b->second) return "a link joins " + l.a + " to itself";
    if (l.bits_per_sec == 0) return "the link " + l.a + "-" + l.b + " has rate 0";
    if (l.delay.count() < 0) return "the link " + l.a + "-" + l.b + " has a negative delay";
    adj[a->second].push_back(b->second);
    adj[b->second].push_back(a->second);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].is_switch && adj[i].size() != 1)
      return "host " + nodes[i].name + " has " + std::to_string(adj[i].size()) + " links (a host has one)";
  }
  const EcnParams& e = switches.ecn;
  if (e.enabled && (e.kmin_bytes > e.kmax_bytes || e.pmax < 0 || e.pmax > 1))
    return "ECN wants kmin <= kmax and pmax in [0, 1]";
  const PfcParams& p = switches.pfc;
  if (p.enabled && p.xon_bytes > p.xoff_bytes) return "PFC wants xon <= xoff";
  if (switches.buffer_bytes == 0) return "switches have no buffer";
  // Every host reaches every other: one connected component holds them all.
  std::vector<bool> seen(nodes.size());
  size_t first = 0;
  while (nodes[first].is_switch) ++first;
  std::vector<size_t> todo{first};
  seen[first] = true;
  while (!todo.empty()) {
    const size_t n = todo.back();
    todo.pop_back();
    // Hosts do not forward: a path may end at a host but not pass through one.
    if (n != first && !nodes[n].is_switch) continue;
    for (size_t m : adj[n]) {
      if (!seen[m]) {
        seen[m] = true;
        todo.push_back(m);
      }
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].is_switch && !seen[i]) return "host " + nodes[i].name + " cannot reach " + nodes[first].name;
  }
  return "";
}

wire::IpAddr preset_address(uint32_t i) {
  return wire::IpAddr::v4(10, 0, static_cast<uint8_t>(i / 250), static_cast<uint8_t>(i % 250 + 1));
}

Topology dumbbell(uint32_t n, uint64_t host_bps, uint64_t bottleneck_bps, Nanos delay) {
  Topology t;
  t.add_switch("left");
  t.add_switch("right");
  for (uint32_t i = 0; i < n; ++i) {
    t.link(t.add_host("s" + std::to_string(i), preset_address(i)), "left", host_bps, delay);
    t.link(t.add_host("r" + std::to_string(i), preset_address(n + i)), "right", host_bps, delay);
  }
  t.link("left", "right", bottleneck_bps, delay);
  return t;
}

Topology incast_star(uint32_t n, uint64_t host_bps, Nanos delay) {
  Topology t;
  t.add_switch("tor");
  t.link(t.add_host("sink", preset_address(0)), "tor", host_bps, delay);
  for (uint32_t i = 0; i < n; ++i)
    t.link(t.add_host("s" + std::to_string(i), preset_address(i + 1)), "tor", host_bps, delay);
  return t;
}

Topology leaf_spine(uint32_t leaves, uint32_t spines, uint32_t hosts_per_leaf, uint64_t host_bps,
                    uint64_t fabric_bps, Nanos delay) {
  Topology t;
  for (uint32_t s = 0; s < spines; ++s) t.add_switch("spine" + std::to_string(s));
  for (uint32_t l = 0; l < leaves; ++l) {
    const std::string leaf = t.add_switch("leaf" + std::to_string(l));
    for (uint32_t s = 0; s < spines; ++s) t.link(leaf, "spine" + std::to_string(s), fabric_bps, delay);
    for (uint32_t h = 0; h < hosts_per_leaf; ++h) {
      const uint32_t k = l * hosts_per_leaf + h;
      t.link(t.add_host("h" + std::to_string(k), preset_address(k)), leaf, host_bps, delay);
    }
  }
  return t;
}

}  // namespace rocelab::fabric
