// An incast of real engines across the switched network, for the tests of
// tests/fabric: `senders` hosts each WRITE `bytes` over one RC QP into a
// slice of one MR on the sink host, in 64 KiB messages, and the run goes on
// until every WRITE has completed (or 10 s of virtual time have passed).
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "emu/device.h"
#include "fabric/network.h"

namespace rocelab::fabric {

struct IncastOptions {
  Topology topology;         // hosts: preset_address(0) is the sink, 1.. the senders
  size_t senders = 3;
  size_t bytes = 256 * 1024;  // per sender, a multiple of 64 KiB
  uint8_t traffic_class = 0;  // the senders' QPs' AV
  emu::DeviceConfig sink_device, sender_device;  // their MTU is 1024 whatever they say
  emu::PacketTap* sink_tap = nullptr;            // sees what the sink sends and receives
  Nanos sample_interval{0};                      // of the network's series (0: none)
};

struct IncastResult {
  bool all_done = false;   // every WRITE completed, each with success
  bool memory_ok = false;  // the sink holds every sender's bytes
  Nanos finish{0};         // virtual time when the last WRITE completed
  PortStats totals;        // over every port of the network
  PortStats to_sink;       // the switch's port toward the sink
  double mean_queue_to_sink = 0;  // its queue depth in bytes, averaged over the series' samples
  emu::Counters sink;      // the sink device's counters
  emu::Counters senders;   // the senders' counters, summed
  std::vector<uint32_t> sender_qpns;
};

IncastResult run_incast(const IncastOptions& o);

}  // namespace rocelab::fabric
