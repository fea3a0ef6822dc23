#include "sim/testbed.h"

namespace rocelab::sim {

int Testbed::add_node(const std::string& name, const wire::IpAddr& addr, emu::DeviceConfig cfg,
                      uint64_t fault_seed, const std::vector<emu::FaultRule>& rules, std::string* error) {
  auto t = fabric_.attach(addr);
  if (!t) {
    *error = "node " + name + ": address " + addr.to_string() + " is taken";
    return -1;
  }
  auto fi = std::make_unique<emu::FaultInjector>(std::move(t), fault_seed, rules);
  emu::FaultInjector* faults = fi.get();
  cfg.helper_thread = false;
  auto dev = emu::Device::create(std::move(fi), std::move(cfg));
  if (!dev) {
    *error = "node " + name + ": " + dev.error().message();
    return -1;
  }
  nodes_.push_back({name, addr, std::move(*dev), faults});
  return static_cast<int>(nodes_.size()) - 1;
}

void Testbed::settle() {
  for (;;) {
    size_t moved = 0;
    for (auto& n : nodes_) moved += n.dev->progress();
    if (moved == 0) return;
  }
}

bool Testbed::run_until(const std::function<bool()>& done, Nanos deadline) {
  for (;;) {
    settle();
    if (done()) return true;
    const Nanos next = fabric_.next_event();
    if (next == Nanos::max() || next > deadline) {
      if (deadline != Nanos::max() && deadline > fabric_.now()) fabric_.advance(deadline);
      settle();
      return done();
    }
    fabric_.advance(next);
  }
}

}  // namespace rocelab::sim
