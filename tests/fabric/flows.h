// Long-running flows of real engines across the switched network, for the
// tests that check DCQCN's published behaviours: each flow is one RC QP pair
// from a host to another that keeps `outstanding` WRITEs of `message` bytes
// posted from its start time until its stop time; the run lasts `run_for` of
// virtual time. What each flow delivered is recorded per completion, so a
// test can take any flow's rate over any window.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emu/device.h"
#include "fabric/network.h"

namespace rocelab::fabric {

struct FlowSpec {
  std::string src, dst;  // host names of the topology
  Nanos start{0};
  Nanos stop = Nanos::max();
};

struct FlowsOptions {
  Topology topology;
  std::vector<FlowSpec> flows;
  emu::DeviceConfig device;   // every host's; line_rate_bps is set from its link
  uint8_t traffic_class = 0;  // every QP's AV
  uint32_t message = 64 * 1024;
  uint32_t outstanding = 4;
  Nanos run_for = std::chrono::milliseconds(10);
  Nanos sample_interval = std::chrono::microseconds(100);
};

struct FlowsResult {
  bool ok = false;  // no WRITE completed in error, the run reached run_for
  // Per flow: (virtual time, bytes) of every WRITE completion.
  std::vector<std::vector<std::pair<Nanos, uint32_t>>> completions;
  std::shared_ptr<SwitchedNetwork> net;  // its stats and series, at the end
  Nanos end{0};
  emu::Counters counters;  // every device's, summed

  // Flow f's goodput in bits/s over [from, to): bytes of the WRITEs completed in it.
  double rate_bps(size_t f, Nanos from, Nanos to) const;
  // Mean queue depth in bytes of the port from a to b, over the series' samples in [from, to).
  double mean_queue(const std::string& a, const std::string& b, Nanos from, Nanos to);
};

FlowsResult run_flows(const FlowsOptions& o);

}  // namespace rocelab::fabric
