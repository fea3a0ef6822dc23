#include "testbed/testbed.h"

#include <thread>

#include "emu/transport/udp_transport.h"

namespace rocelab::testbed {

std::optional<NodeFaults> NodeFaults::from(const emu::FaultConfig& cfg, uint64_t seed, std::string* error) {
  error->clear();
  if (!cfg.active()) return std::nullopt;
  emu::FaultConfig seeded = cfg;
  seeded.seed = seed;
  emu::FaultRules rules = emu::fault_rules(seeded);
  if (!rules.ok()) {
    *error = rules.error;
    return std::nullopt;
  }
  return NodeFaults{seed, std::move(rules.rules)};
}


Testbed::Testbed(Net net, emu::SimFabricConfig cfg) : net_(net) {
  if (net == Net::kSim) fabric_ = std::make_unique<emu::SimFabric>(cfg);
}

std::unique_ptr<emu::Transport> Testbed::make_transport(const wire::IpAddr& sim_addr, uint8_t udp_first,
                                                        const NodeFaults* faults, emu::FaultInjector** injector,
                                                        std::string* error) {
  std::unique_ptr<emu::Transport> t;
  last_port_ = nullptr;
  if (net_ == Net::kSim) {
    t = fabric_->attach(sim_addr);
    if (!t) {
      *error = "address " + sim_addr.to_string() + " is taken on the fabric";
      return nullptr;
    }
    last_port_ = t.get();
  } else {
    auto rx = emu::allocate_loopback_address(udp_first);
    if (!rx) {
      *error = "no free 127.0.0.x with UDP port 4791: " + rx.error().message();
      return nullptr;
    }
    auto u = emu::UdpTransport::open(std::move(*rx));
    if (!u) {
      *error = "UDP transport: " + u.error().message();
      return nullptr;
    }
    t = std::move(*u);
  }
  if (injector) *injector = nullptr;
  if (!faults) return t;
  auto fi = std::make_unique<emu::FaultInjector>(std::move(t), faults->seed, faults->rules);
  if (injector) *injector = fi.get();
  return fi;
}

std::unique_ptr<emu::Device> Testbed::make_device(const wire::IpAddr& sim_addr, uint8_t udp_first,
                                                  emu::DeviceConfig cfg, const NodeFaults* faults,
                                                  emu::FaultInjector** injector, std::string* error) {
  auto t = make_transport(sim_addr, udp_first, faults, injector, error);
  if (!t) return nullptr;
  cfg.helper_thread = net_ == Net::kUdp;
  auto dev = emu::Device::create(std::move(t), std::move(cfg));
  if (!dev) {
    *error = "device: " + dev.error().message();
    return nullptr;
  }
  return std::move(*dev);
}

int Testbed::add_node(const std::string& name, const wire::IpAddr& sim_addr, emu::DeviceConfig cfg,
                      const NodeFaults* faults, std::string* error) {
  emu::FaultInjector* fi = nullptr;
  auto dev = make_device(sim_addr, 1, std::move(cfg), faults, &fi, error);
  if (!dev) {
    *error = "node " + name + ": " + *error;
    return -1;
  }
  const wire::IpAddr addr = dev->address();
  ports_.push_back(last_port_);
  nodes_.push_back({name, addr, std::move(dev), fi});
  return static_cast<int>(nodes_.size()) - 1;
}

Nanos Testbed::now() const {
  if (fabric_) return fabric_->now();
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}

size_t Testbed::step(const std::vector<emu::Device*>& devs) {
  size_t moved = 0;
  if (devs.empty()) {
    for (auto& n : nodes_) moved += n.dev->progress();
  } else {
    for (emu::Device* d : devs) moved += d->progress();
  }
  if (moved != 0) return moved;
  if (fabric_) {
    // To the next event; with none pending the clock stays (advancing to
    // Nanos::max() would leave no room for a timer armed later).
    if (fabric_->next_event() != Nanos::max()) fabric_->advance(Nanos::max());
  } else {
    // The devices' helper threads wait in Transport::wait() (one waiter at a
    // time, udp_transport.h): this thread only gives them the CPU.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return 0;
}

void Testbed::settle() { settle(true); }

void Testbed::settle(bool all_first) {
  for (bool all = all_first;; all = false) {
    size_t moved = 0;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (all || !fabric_ || fabric_->has_work(*ports_[i])) moved += nodes_[i].dev->progress();
    if (moved == 0) return;
  }
}

bool Testbed::run_until(const std::function<bool()>& done, Nanos deadline) {
  for (bool first = true;; first = false) {
    settle(first);
    if (done()) return true;
    const Nanos next = fabric_->next_event();
    if (next == Nanos::max() || next > deadline) {
      if (deadline != Nanos::max() && deadline > fabric_->now()) fabric_->advance(deadline);
      settle(false);
      return done();
    }
    fabric_->advance(next);
  }
}

}  // namespace rocelab::testbed
