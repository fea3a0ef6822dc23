// The engine behind one emulated device: created when the first context
// opens (or when its address is first needed), destroyed when the last
// context closes, so pcap and event-log files are complete when a program
// closes its device. A device still open at exit is not destroyed (other
// threads of the program may still call into it): its record files are
// closed and the engine lives on until the process is gone.
#pragma once
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

#include "emu/device.h"
#include "emu/transport/transport.h"
#include "host/address_group.h"
#include "verbs_shim/config.h"
#include "verbs_shim/transport_factory.h"
#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::verbs_shim {

class DeviceRuntime {
 public:
  DeviceRuntime();  // lives in DeviceTable, which is never destroyed
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  // The engine, created on the first call; every call must be matched by release().
  wire::Result<emu::Device*> acquire(const DeviceConfig& dev, const ShimConfig& cfg) noexcept;
  void release() noexcept;

  // The device's address: the configured one, or the one its transport got
  // (which binds the transport's socket now if nothing has yet).
  wire::Result<wire::IpAddr> address(const DeviceConfig& dev, const ShimConfig& cfg) noexcept;

  // True while this thread is in a call above that holds a device's lock.
  // What such a call reaches of libc (getifaddrs, through netdev_of) is
  // interposed by the shim too, and must not ask a device for its address.
  static bool busy_on_this_thread() noexcept;

  // The CM Service IDs a process listens on at engine's address, for the
  // processes that share it (rdma_cm shim, through sibling.h).
  static void set_services(const emu::Device* engine, std::vector<uint64_t> service_ids) noexcept;
  // Whether another process sharing engine's address listens on service_id.
  static bool service_taken(const emu::Device* engine, uint64_t service_id) noexcept;

  // Every device open now, as `rocelab stat` shows it (stat_entry.h).
  static std::vector<emu::DeviceSnapshot> snapshots() noexcept;

 private:
  std::error_code ensure_transport(const DeviceConfig& dev, const ShimConfig& cfg);
  // rocelab run --counters: each device's counters on stderr when it closes,
  // or at exit for those still open.
  static void print_counters(const emu::Device& d);
  // At exit, for each device still open: its counters (if asked for), then
  // the engine stops recording and the pcap and event log are closed.
  static void at_exit();
  static std::vector<DeviceRuntime*>& live();  // those with an engine, under live_mu()
  static std::mutex& live_mu();
  // A copy of live(), taken under live_mu() and walked without it: release()
  // takes live_mu() inside mu_, so mu_ is never taken while live_mu() is
  // held. Runtimes are never destroyed, so the pointers stay valid.
  static std::vector<DeviceRuntime*> live_copy();
  bool print_counters_ = false;

  std::mutex mu_;
  int users_ = 0;
  std::unique_ptr<host::AddressGroup> group_;  // outlives the transport (destroyed after it)
  std::unique_ptr<emu::Transport> parked_;  // bound, not yet handed to an engine
  std::unique_ptr<emu::Device> engine_;
  wire::IpAddr address_{};
  bool have_address_ = false;
  std::unique_ptr<DeviceTaps> taps_;  // pcap and event log, outlive the engine
};

}  // namespace rocelab::verbs_shim
