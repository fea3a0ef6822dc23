// An all-to-all of RDMA WRITEs across a leaf-spine of real engines (src/fabric
// behind the simulated fabric): every host's device has one RC QP to every
// other host, each QP WRITEs one message to its peer, and the run goes on, in
// virtual time, until every WRITE has completed. `make bench` measures the
// simulated fabric's speed with it at 64 hosts and 1 MiB
// (bench/fabric_alltoall.cc); a ctest smoke test runs it small and checks
// every byte (bench/alltoall_test.cc).
//
// Memory, and what is checked. Every QP of a host WRITEs from one source
// buffer of the host (message + hosts * 64 bytes of a pattern drawn from the
// host's index), the QP towards host d from offset d * 64: what a WRITE
// carries depends on its sender and its destination, while the sources of a
// host take one message of memory, not hosts - 1. At the destination, the
// WRITEs of `verified` chosen senders land in buffers of their own, compared
// byte for byte with what their sender sent; the others all land in one
// shared sink per host, a message long. Concurrent WRITEs to one buffer are
// legal and leave it holding, packet by packet, what one of them carried: the
// check of a sink is that each of its MTU-sized chunks is exactly that chunk
// of one of the senders that write there. Distinct destinations for every
// WRITE would take hosts * (hosts - 1) messages (4 GiB at 64 hosts and
// 1 MiB); with verified = 2 the 64-host run holds 4 messages per host.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cc/rate_control.h"
#include "emu/records.h"
#include "emu/verbs_attrs.h"
#include "fabric/network.h"

namespace rocelab::bench {

using Nanos = std::chrono::nanoseconds;

// How the run drives the devices. Either way every device polls its one CQ
// (which runs its engine: timers, received packets, sends) and the fabric's
// clock then moves to its next event.
enum class Driver {
  // A round polls every device, as the loops of tests/fabric do: a round per
  // event time, so idle devices cost hosts polls per event.
  kEveryDevice,
  // A round polls only the devices with something to do, as the fabric lists
  // them (SimFabric::ports_with_work: a timer due, a datagram arrived), in
  // host order.
  kDueDevices,
};

struct AlltoallOptions {
  // The leaf_spine preset (src/fabric/topology.h): hosts = leaves * hosts_per_leaf.
  uint32_t leaves = 8, spines = 8, hosts_per_leaf = 8;
  uint64_t host_bps = 100'000'000'000, fabric_bps = 100'000'000'000;
  Nanos link_delay{1000};           // one way, every link
  size_t message = 1 << 20;         // bytes per WRITE; a multiple of the MTU
  emu::Mtu mtu = emu::Mtu::k4096;   // the devices' active MTU and the QPs' path MTU
  // Per destination host, how many of its senders' WRITEs land in buffers of
  // their own (checked byte for byte); hosts - 1 or more: every sender's.
  uint32_t verified = 2;
  bool pfc = true;                  // lossless: PFC at the switches' defaults (PfcParams)
  bool ecn = true;                  // RED marking at EcnParams' defaults
  uint8_t traffic_class = 0x02;     // the QPs' AV: ECT(0), so the switches may mark
  cc::Algorithm cc = cc::Algorithm::kNone;  // the devices' congestion control (DeviceConfig::cc)
  uint64_t seed = 1;                // the ECN draws and the ECMP hash (Topology::seed)
  Nanos deadline{std::chrono::seconds(1)};  // of virtual time: the run gives up beyond it
  Driver driver = Driver::kDueDevices;
};

struct AlltoallResult {
  std::string error;  // "" when all is well; else the first thing found wrong
  uint32_t hosts = 0;
  size_t qps = 0;
  size_t completions = 0;       // send completions polled
  size_t failed = 0;            // of them, not SUCCESS (or not the WRITE expected)
  size_t verified_writes = 0;   // destinations of their own, checked byte for byte
  size_t verified_bad = 0;
  size_t sink_chunks = 0;       // MTU-sized chunks of the shared sinks checked
  size_t sink_chunks_bad = 0;   // not a whole chunk of a sender to that host
  Nanos sim_time{0};            // virtual time from the posts to the last completion
  double setup_wall_s = 0;      // devices, QPs, connections, buffers
  double run_wall_s = 0;        // the simulation, from the posts to the last completion
  double run_cpu_s = 0;         // the same, in this thread's CPU time
  double check_wall_s = 0;      // the memory checks
  uint64_t rounds = 0;          // progress rounds
  uint64_t device_polls = 0;    // CQ polls over all rounds (each runs the device's engine)
  uint64_t packets = 0;         // sent by the engines (sent_pkts summed): requests, ACKs, resends
  uint64_t data_packets = 0;    // of them, the requests a lossless run needs: qps * message / MTU
  uint64_t delivered = 0;       // datagrams the fabric handed to a port
  size_t buffer_bytes = 0;      // application buffers, all hosts
  size_t max_in_flight = 0;     // most datagrams inside the network at once (each a payload copy)
  fabric::PortStats totals;     // every port of the network: link frames (every hop), drops, marks, pauses
  emu::Counters counters;       // every device's, summed
};

// Builds the network, the devices and their QPs, posts every WRITE, runs the
// fabric until all have completed (or the deadline), and checks memory.
AlltoallResult run_alltoall(const AlltoallOptions& o);

}  // namespace rocelab::bench
