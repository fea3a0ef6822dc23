#include "verbs_shim/device_runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "emu/transport/link_mtu.h"
#include "verbs_shim/record_signals.h"
#include "verbs_shim/stat_entry.h"
#include "verbs_shim/transport_factory.h"

namespace rocelab::verbs_shim {
namespace {

thread_local int t_busy = 0;  // DeviceRuntime calls on this thread that hold a lock

struct Busy {
  Busy() { ++t_busy; }
  ~Busy() { --t_busy; }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
};

}  // namespace

DeviceRuntime::DeviceRuntime() = default;

bool DeviceRuntime::busy_on_this_thread() noexcept { return t_busy > 0; }

std::error_code DeviceRuntime::ensure_transport(const DeviceConfig& dev, const ShimConfig& cfg) {
  if (parked_ || engine_) return {};
  auto t = make_transport(dev, cfg, &group_);
  if (!t) return t.error();
  parked_ = std::move(*t);
  address_ = parked_->local_address();
  have_address_ = true;
  return {};
}

wire::Result<emu::Device*> DeviceRuntime::acquire(const DeviceConfig& dev,
                                                  const ShimConfig& cfg) noexcept {
  Busy busy;
  std::lock_guard lock(mu_);
  if (engine_) {
    ++users_;
    return engine_.get();
  }
  if (std::error_code ec = ensure_transport(dev, cfg)) return ec;
  if (!cfg.pcap_path.empty() || !cfg.events_path.empty()) guard_records_against_signals();
  if (!taps_) {
    auto wall = std::chrono::duration_cast<emu::Nanos>(
        std::chrono::system_clock::now().time_since_epoch());
    auto taps = make_taps(dev, cfg, wall - parked_->now());
    if (!taps) return taps.error();
    taps_ = std::move(*taps);
  }
  emu::DeviceConfig dc;
  dc.name = dev.name;
  if (cfg.mtu != 0) {
    emu::mtu_from_bytes(cfg.mtu, &dc.active_mtu);
  } else if (auto link = emu::link_mtu(parked_->local_address())) {
    dc.active_mtu = emu::mtu_for_link(*link);
  }  // else: an address on no interface keeps the engine's default (1024)
  dc.helper_thread = true;
  dc.retry_forever = cfg.retry_forever;
  dc.cc = cfg.cc;
  dc.line_rate_bps = cfg.line_rate_bps;
  if (cfg.cnp_interval_us) dc.min_time_between_cnps = std::chrono::microseconds(*cfg.cnp_interval_us);
  // Real sockets: the helper's timers wake tens to hundreds of microseconds
  // late on a busy machine, so a QP may run up to 8 KiB or 200 us at its rate
  // ahead and catch up (more bytes let its bursts overflow a shallow
  // bottleneck: tests/shim/cc_ecn_wire.sh).
  dc.pacing_burst_bytes = 8 * 1024;
  dc.pacing_burst_time = std::chrono::microseconds(200);
  // A ping-pong's ACK rides with the reply, received by the peer's own
  // poll_cq: no helper thread woken on the critical path (docs/performance.md).
  dc.ack_hold = std::chrono::microseconds(20);
  // 512 KiB in flight per QP: 128 PSNs at MTU 4096 (loopback), 512 at the
  // 1024 of a 1500-byte link (docs/performance.md). Not under congestion
  // control: before the first CNP comes back a QP sends its whole window at
  // line rate, and 512 KiB overflows a shallow bottleneck that 128 PSNs do
  // not (tests/shim/cc_ecn_wire.sh, 96 KB of buffer: nothing may be lost).
  if (dc.cc == cc::Algorithm::kNone) dc.window_bytes = 512 * 1024;
  dc.warn = [](const std::string& line) { std::fprintf(stderr, "rocelab: %s\n", line.c_str()); };
  dc.tap = taps_->pcap.get();
  dc.events = taps_->events;
  dc.qpn_block = group_ ? group_->slot() : -1;
  auto d = emu::Device::create(std::move(parked_), std::move(dc));
  if (!d) return d.error();
  engine_ = std::move(*d);
  if (group_) {
    std::string why;
    if (std::error_code ec = group_->activate(&why))
      std::fprintf(stderr, "rocelab shim: %s: sharing %s with other processes: %s\n",
                   dev.name.c_str(), group_->address().to_string().c_str(),
                   why.empty() ? ec.message().c_str() : why.c_str());
  }
  users_ = 1;
  print_counters_ = cfg.counters;
  {
    std::lock_guard live_lock(live_mu());
    live().push_back(this);
  }
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(at_exit); });
  ensure_stat_entry();
  return engine_.get();
}

std::vector<DeviceRuntime*>& DeviceRuntime::live() {
  // Never destroyed: the atexit handler that reads it may run after the
  // static destructors registered before it.
  static auto* v = new std::vector<DeviceRuntime*>;
  return *v;
}

std::vector<DeviceRuntime*> DeviceRuntime::live_copy() {
  std::lock_guard live_lock(live_mu());
  return live();
}

std::mutex& DeviceRuntime::live_mu() {
  static auto* m = new std::mutex;
  return *m;
}

void DeviceRuntime::print_counters(const emu::Device& d) {
  std::string line = "rocelab: " + d.name() + " counters:";
  d.counters().for_each([&](std::string_view name, uint64_t v) {
    if (v) line += " " + std::string(name) + "=" + std::to_string(v);
  });
  std::fprintf(stderr, "%s\n", line.c_str());
}

void DeviceRuntime::at_exit() {
  // A program that exits with its device open (ibv_rc_pingpong after a retry
  // error; rping, whose CM thread calls exit() while main() still tears
  // down). The engine goes on serving whichever thread is still in a verb;
  // only its records end here, complete, and what it sends from now on is
  // not recorded.
  // Another thread may close a device meanwhile: a copy (live_copy).
  const std::vector<DeviceRuntime*> open = live_copy();
  for (DeviceRuntime* r : open) {
    Busy busy;
    std::lock_guard lock(r->mu_);
    if (!r->engine_) continue;
    if (r->print_counters_) print_counters(*r->engine_);
    r->engine_->set_tap(nullptr);
    r->engine_->set_event_sink(nullptr);
    r->taps_.reset();
  }
}

void DeviceRuntime::release() noexcept {
  std::unique_ptr<emu::Device> dying;
  std::unique_ptr<DeviceTaps> dying_taps;
  std::unique_ptr<host::AddressGroup> dying_group;
  {
    Busy busy;
    std::lock_guard lock(mu_);
    if (--users_ > 0) return;
    if (print_counters_ && engine_) print_counters(*engine_);
    {
      std::lock_guard live_lock(live_mu());
      std::erase(live(), this);
    }
    dying = std::move(engine_);
    dying_taps = std::move(taps_);
    dying_group = std::move(group_);
    have_address_ = false;  // a later open may bind another free address
  }
  if (dying_group) dying_group->begin_leave();  // the others stop waiting for our probe answers
  dying.reset();  // engine first: it writes to the taps until it stops
  dying_group.reset();  // then the group: the transport's socket is closed
}

void DeviceRuntime::set_services(const emu::Device* engine,
                                 std::vector<uint64_t> service_ids) noexcept {
  const std::vector<DeviceRuntime*> open = live_copy();
  for (DeviceRuntime* r : open) {
    std::lock_guard lock(r->mu_);
    if (r->engine_.get() == engine && r->group_) r->group_->set_services(std::move(service_ids));
  }
}

bool DeviceRuntime::service_taken(const emu::Device* engine, uint64_t service_id) noexcept {
  const std::vector<DeviceRuntime*> open = live_copy();
  for (DeviceRuntime* r : open) {
    std::lock_guard lock(r->mu_);
    if (r->engine_.get() == engine && r->group_) return r->group_->listened_by_another(service_id);
  }
  return false;
}

std::vector<emu::DeviceSnapshot> DeviceRuntime::snapshots() noexcept {
  const std::vector<DeviceRuntime*> open = live_copy();
  std::vector<emu::DeviceSnapshot> out;
  try {
    for (DeviceRuntime* r : open) {
      std::lock_guard lock(r->mu_);
      if (r->engine_) out.push_back(r->engine_->snapshot());
    }
  } catch (const std::bad_alloc&) {
    // What was copied so far: the reader sees fewer devices, never a crash.
  }
  return out;
}

wire::Result<wire::IpAddr> DeviceRuntime::address(const DeviceConfig& dev,
                                                  const ShimConfig& cfg) noexcept {
  if (dev.ip) return *dev.ip;
  Busy busy;
  std::lock_guard lock(mu_);
  if (engine_) return engine_->address();
  if (std::error_code ec = ensure_transport(dev, cfg)) return ec;
  return address_;
}

}  // namespace rocelab::verbs_shim
