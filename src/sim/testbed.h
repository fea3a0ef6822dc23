// The testbed: emulated devices on one simulated fabric, each behind its own
// fault injector, driven from one thread with virtual time. `rocelab sim`
// builds scenarios on it; everything it does is deterministic (the same calls
// give the same packets at the same virtual times).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emu/device.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/sim_fabric.h"

namespace rocelab::sim {

using Nanos = std::chrono::nanoseconds;

struct TestbedNode {
  std::string name;
  wire::IpAddr addr;
  std::unique_ptr<emu::Device> dev;
  emu::FaultInjector* faults = nullptr;  // owned by dev (its transport)
};

class Testbed {
 public:
  explicit Testbed(emu::SimFabricConfig cfg = {}) : fabric_(cfg) {}

  // A node at addr with a fault injector (seeded, with `rules` from the start)
  // under its device. The config's helper_thread is forced off. Returns the
  // node's index, or an error message in *error.
  int add_node(const std::string& name, const wire::IpAddr& addr, emu::DeviceConfig cfg,
               uint64_t fault_seed, const std::vector<emu::FaultRule>& rules, std::string* error);

  std::vector<TestbedNode>& nodes() { return nodes_; }
  emu::SimFabric& fabric() { return fabric_; }
  Nanos now() const { return fabric_.now(); }

  // Progress on every device until none has anything to do at this instant.
  void settle();
  // Nothing in flight, no timer armed (after settle()).
  bool idle() const { return fabric_.next_event() == Nanos::max(); }
  // Settles, then moves time event by event until done() holds (true) or the
  // next event lies beyond deadline (false; the clock is left at deadline
  // unless it is Nanos::max()).
  bool run_until(const std::function<bool()>& done, Nanos deadline);

 private:
  emu::SimFabric fabric_;
  std::vector<TestbedNode> nodes_;
};

}  // namespace rocelab::sim
