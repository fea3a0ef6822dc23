#include "verbs_shim/transport_factory.h"

#include <cerrno>

namespace rocelab::verbs_shim {

// TODO(shim): the UDP transport, fault injector, pcap tap and event log land
// from branch `transport`/`emu`; until then no emulated device can open.
wire::Result<std::unique_ptr<emu::Transport>> make_transport(const DeviceConfig&, const ShimConfig&) {
  return std::error_code(ENODEV, std::generic_category());
}

wire::Result<DeviceTaps> make_taps(const DeviceConfig&, const ShimConfig&) {
  return DeviceTaps{};
}

}  // namespace rocelab::verbs_shim
