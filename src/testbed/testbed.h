// The testbed: emulated devices on one network — the simulated fabric (virtual
// time, deterministic) or real UDP sockets on loopback addresses — each
// optionally behind its own fault injector. It is the one way rocelab
// assembles devices outside a program under `rocelab run`: `rocelab sim`,
// `rocelab loopback`, `rocelab replay`, the fuzzers' victim, the benchmarks and
// the engine and CM tests build on it. It says how a node gets its transport
// (or a bare port on the fabric), its faults and its device, and how time
// moves while a caller waits; endpoint.h adds the objects of one side.
//
// On the simulated fabric everything runs on the caller's thread (devices
// without helper threads) and the same calls give the same packets at the same
// virtual times. On UDP each device has its helper thread and step() yields
// the CPU to them.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "emu/device.h"
#include "emu/transport/fault_config.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/sim_fabric.h"

namespace rocelab::testbed {

using Nanos = std::chrono::nanoseconds;

enum class Net { kSim, kUdp };
inline const char* to_string(Net n) { return n == Net::kSim ? "sim" : "udp"; }

// A node's fault injector: its PRNG seed and the rules it starts with (more can
// be added later with FaultInjector::add_rules).
struct NodeFaults {
  uint64_t seed = 1;
  std::vector<emu::FaultRule> rules;

  // The injector of a FaultConfig (the flags of `rocelab loopback` and
  // `rocelab run`), seeded with seed: nullopt when the config injects nothing
  // or is wrong (*error then says why, else it is left empty).
  static std::optional<NodeFaults> from(const emu::FaultConfig& cfg, uint64_t seed, std::string* error);
};

struct TestbedNode {
  std::string name;
  wire::IpAddr addr;
  std::unique_ptr<emu::Device> dev;
  emu::FaultInjector* faults = nullptr;  // owned by dev (its transport); null without faults
};

class Testbed {
 public:
  explicit Testbed(Net net = Net::kSim, emu::SimFabricConfig cfg = {});

  Net net() const { return net_; }
  // The simulated fabric; nullptr on UDP.
  emu::SimFabric* fabric() { return fabric_.get(); }

  // A transport for a new device: on the fabric at sim_addr, or on UDP at the
  // first free 127.0.0.x from udp_first; under a fault injector when faults is
  // given (*injector then points at it). nullptr with a message in *error.
  std::unique_ptr<emu::Transport> make_transport(const wire::IpAddr& sim_addr, uint8_t udp_first,
                                                 const NodeFaults* faults, emu::FaultInjector** injector,
                                                 std::string* error);
  // A device on such a transport, owned by the caller; cfg.helper_thread is
  // set for the network (off on the fabric, on for UDP).
  std::unique_ptr<emu::Device> make_device(const wire::IpAddr& sim_addr, uint8_t udp_first, emu::DeviceConfig cfg,
                                           const NodeFaults* faults, emu::FaultInjector** injector,
                                           std::string* error);

  // A node owned by the testbed (scenarios): returns its index, or -1 with a
  // message in *error.
  int add_node(const std::string& name, const wire::IpAddr& sim_addr, emu::DeviceConfig cfg,
               const NodeFaults* faults, std::string* error);
  std::vector<TestbedNode>& nodes() { return nodes_; }

  // Time: the fabric's virtual clock, or the steady clock on UDP.
  Nanos now() const;

  // One round of progress on devs (the testbed's own nodes when devs is
  // empty). When nothing moved: on the fabric, the clock advances to the next
  // event (it stays when nothing is pending); on UDP this thread sleeps 200 µs
  // and the helper threads work. Returns how much moved.
  size_t step(const std::vector<emu::Device*>& devs = {});

  // The fabric only (the testbed's own nodes): progress until nothing moves at
  // this instant; idle = nothing in flight and no timer armed; run_until moves
  // time event by event until done() holds (true) or the next event lies
  // beyond deadline (false; the clock is then left at deadline unless it is
  // Nanos::max()).
  //
  // Their rounds go over the nodes in order and poll the first time every
  // node, after that only a node whose port has work when its turn comes
  // (SimFabric::has_work), which is what polling them all would do: an engine
  // does nothing in a poll that brings it no timer, datagram or unreachable
  // address, except after the application's own calls into it. So done()
  // may poll, post and read; what else it does to a node (a QP destroyed,
  // which returns the device's in-flight budget to QPs waiting for it) is
  // taken up at that node's next event.
  void settle();
  bool idle() const { return fabric_->next_event() == Nanos::max(); }
  bool run_until(const std::function<bool()>& done, Nanos deadline);

 private:
  // Until nothing moves; `all_first`: the first round polls every node.
  void settle(bool all_first);

  Net net_;
  std::unique_ptr<emu::SimFabric> fabric_;
  std::vector<TestbedNode> nodes_;
  std::vector<const emu::Transport*> ports_;  // nodes_[i]'s port on the fabric (under its faults)
  const emu::Transport* last_port_ = nullptr;  // the port make_transport attached last
};

}  // namespace rocelab::testbed
