#include "verbs_shim/stat_entry.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "host/runtime_dir.h"
#include "stat/registry.h"
#include "verbs_shim/device_runtime.h"

namespace rocelab::verbs_shim {
namespace {

std::mutex& entry_mu() {
  static auto* m = new std::mutex;  // never destroyed: the atexit handler takes it
  return *m;
}

// Never destroyed by a static destructor: at_exit withdraws it before those run.
stat::Publisher*& entry() {
  static stat::Publisher* p = nullptr;
  return p;
}

void withdraw_at_exit() {
  std::lock_guard lock(entry_mu());
  stat::Publisher* p = entry();
  entry() = nullptr;
  delete p;  // in a fork()ed child: the parent's entry is left alone (Publisher::~Publisher)
}

}  // namespace

void ensure_stat_entry() noexcept {
  std::lock_guard lock(entry_mu());
  const auto self = static_cast<uint32_t>(::getpid());
  if (entry() && entry()->pid() == self) return;
  // A child made by fork() inherited its parent's publisher: forget it
  // (its destructor leaves the parent's entry and thread alone).
  delete entry();
  entry() = nullptr;
  static bool warned = false;
  auto net = host::net_dir();
  wire::Result<std::unique_ptr<stat::Publisher>> p =
      net ? stat::Publisher::start(stat::registry_dir(*net), [] { return DeviceRuntime::snapshots(); })
          : wire::Result<std::unique_ptr<stat::Publisher>>(net.error());
  if (!p) {
    if (!warned)
      std::fprintf(stderr, "rocelab shim: not listed by `rocelab stat`: %s\n", p.error().message().c_str());
    warned = true;
    return;
  }
  entry() = p->release();
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(withdraw_at_exit); });
}

}  // namespace rocelab::verbs_shim
