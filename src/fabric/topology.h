// A switched network's shape: hosts and switches joined by full-duplex links,
// each with a rate and a one-way propagation delay, and the switches'
// parameters (shared buffer, ECN marking, PFC). Presets build the three shapes
// congestion is taught with: a dumbbell, an incast star and a two-tier
// leaf-spine. docs/congestion.md explains the model.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "wire/ip_udp.h"

namespace rocelab::fabric {

using Nanos = std::chrono::nanoseconds;

// RED-style marking on an egress queue's depth q at the moment a packet joins
// it: no mark below kmin, probability pmax * (q - kmin) / (kmax - kmin)
// between, always above kmax (DCQCN paper §4, "switch"; mlx5 and Broadcom
// switches expose the same three numbers). Only ECN-capable packets
// (ECT(0)/ECT(1)) are marked, by setting CE; nothing is dropped by RED.
struct EcnParams {
  bool enabled = false;
  uint64_t kmin_bytes = 5 * 1024;    // the paper's Kmin = 5 KB
  uint64_t kmax_bytes = 200 * 1024;  // Kmax = 200 KB
  double pmax = 0.01;                // Pmax = 1 %
};

// Priority flow control for the one lossless class RoCE uses: when the bytes
// a switch holds that came in through one port reach xoff, the switch pauses
// the link partner's egress toward it; when they fall to xon it resumes it.
// A pause takes effect one propagation delay later; the frame on the wire
// finishes first.
struct PfcParams {
  bool enabled = false;
  uint64_t xoff_bytes = 96 * 1024;
  uint64_t xon_bytes = 48 * 1024;
};

struct SwitchParams {
  uint64_t buffer_bytes = 12 * 1024 * 1024;  // shared by all of a switch's ports (Trident II class)
  EcnParams ecn;
  PfcParams pfc;
};

struct NodeSpec {
  std::string name;
  bool is_switch = false;
  wire::IpAddr addr;  // hosts: where the simulated fabric's port attaches
};

struct LinkSpec {
  std::string a, b;                       // node names
  uint64_t bits_per_sec = 100'000'000'000;
  Nanos delay{1000};                      // one way
};

struct Topology {
  std::vector<NodeSpec> nodes;
  std::vector<LinkSpec> links;
  SwitchParams switches;  // every switch's
  uint64_t seed = 1;      // ECN marking's draws and the ECMP hash
  // Hosts' NIC queues hold at most this much before they drop (a NIC paused
  // for long backs up into host memory; this bounds the simulation's).
  uint64_t host_queue_bytes = 64 * 1024 * 1024;

  // Adds a host or switch; returns its name.
  const std::string& add_host(const std::string& name, const wire::IpAddr& addr);
  const std::string& add_switch(const std::string& name);
  void link(const std::string& a, const std::string& b, uint64_t bits_per_sec, Nanos delay);

  // What is wrong with the description ("" when nothing): names unique and
  // known, hosts with exactly one link and distinct addresses, rates non-zero,
  // thresholds in order, every host able to reach every other.
  std::string check() const;
};

// The address presets give host i: 10.0.(i / 250).(i % 250 + 1).
wire::IpAddr preset_address(uint32_t i);

// n senders s0..s(n-1) on switch "left", n receivers r0..r(n-1) on switch
// "right", one bottleneck link left-right of bottleneck_bps.
Topology dumbbell(uint32_t n, uint64_t host_bps, uint64_t bottleneck_bps, Nanos delay);

// n senders s0..s(n-1) and one receiver "sink" on one switch "tor".
Topology incast_star(uint32_t n, uint64_t host_bps, Nanos delay);

// `leaves` leaf switches leaf0.., `spines` spine switches spine0.., every leaf
// linked to every spine at fabric_bps, hosts_per_leaf hosts h0.. per leaf
// (host k on leaf k / hosts_per_leaf) at host_bps. ECMP spreads flows over
// the spines.
Topology leaf_spine(uint32_t leaves, uint32_t spines, uint32_t hosts_per_leaf, uint64_t host_bps,
                    uint64_t fabric_bps, Nanos delay);

}  // namespace rocelab::fabric
