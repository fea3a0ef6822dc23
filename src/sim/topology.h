// A scenario's switched network (proto/scenario.proto, Fabric.topology) as a
// fabric::Topology: a preset or switches and links written out, the switches'
// ECN, PFC and buffer, and which host each node is. The checker (scenario.cc)
// builds it to find mistakes before anything runs, the runner to run it.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/network.h"
#include "fabric/topology.h"
#include "proto/scenario.pb.h"
#include "wire/ip_udp.h"

namespace rocelab::sim {

// What is wrong with a topology, and where: the scenario's element the
// message is about (the checker turns it into a line).
struct TopologyError {
  enum class At { kFabric, kTopology, kPreset, kLink, kEcn, kPfc, kNode };
  At at = At::kTopology;
  int index = 0;  // kLink: which link; kNode: which node
  std::string message;
};

struct ScenarioTopology {
  fabric::Topology topo;
  std::string shape;                       // the preset, or "topology" when written out
  std::vector<std::string> node_host;      // per scenario node: the host it is
  std::vector<wire::IpAddr> node_addr;     // ... its address
  std::vector<uint64_t> node_line_rate;    // ... its link's rate, bits/s
  std::chrono::nanoseconds sample_interval{10'000};
};

// A switch port's counter by the name expect_port and --json give it:
// tx_packets, tx_bytes, ecn_marked, dropped, max_queue_bytes,
// pauses_received, paused_ns. nullopt for another name.
std::optional<uint64_t> port_counter(const fabric::PortStats& s, std::string_view name);
bool port_counter_known(std::string_view name);
std::string port_counter_names();  // "tx_packets, tx_bytes, ..."

// The default address of node i without a topology (or with one written out).
wire::IpAddr default_node_address(int i);

// The scenario's network. nullopt when it has none (error->message empty) or
// when it is wrong (error says what and where). Node addresses must already
// parse (the checker looks at them first).
std::optional<ScenarioTopology> scenario_topology(const scenario::Scenario& s, TopologyError* error);

}  // namespace rocelab::sim
