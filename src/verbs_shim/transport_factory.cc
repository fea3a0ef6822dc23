#include "verbs_shim/transport_factory.h"

#include <cerrno>
#include <cstdio>

#include "emu/transport/fault_config.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/udp_transport.h"
#include "verbs_shim/pcap_tap.h"

namespace rocelab::verbs_shim {

wire::Result<std::unique_ptr<emu::Transport>> make_transport(const DeviceConfig& dev,
                                                             const ShimConfig&) {
  std::unique_ptr<emu::Transport> t;
  if (dev.ip) {
    auto udp = emu::UdpTransport::open(*dev.ip);
    if (!udp) {
      std::fprintf(stderr, "rocelab shim: %s: cannot bind %s:4791: %s\n", dev.name.c_str(),
                   dev.ip->to_string().c_str(), udp.error().message().c_str());
      return udp.error();
    }
    t = std::move(*udp);
  } else {
    auto rx = emu::allocate_loopback_address();
    if (!rx) {
      std::fprintf(stderr, "rocelab shim: %s: no free 127.0.0.x address: %s\n", dev.name.c_str(),
                   rx.error().message().c_str());
      return rx.error();
    }
    auto udp = emu::UdpTransport::open(std::move(*rx));
    if (!udp) return udp.error();
    t = std::move(*udp);
  }
  std::string error;
  emu::FaultConfig faults = emu::from_env(&error);
  if (!error.empty()) {
    std::fprintf(stderr, "rocelab shim: %s\n", error.c_str());
    return std::error_code(EINVAL, std::generic_category());
  }
  if (faults.active()) {
    auto inj = emu::FaultInjector::wrap(std::move(t), faults, &error);
    if (!inj) {
      std::fprintf(stderr, "rocelab shim: faults: %s\n", error.c_str());
      return std::error_code(EINVAL, std::generic_category());
    }
    t = std::move(inj);
  }
  return t;
}

wire::Result<DeviceTaps> make_taps(const DeviceConfig& dev, const ShimConfig& cfg) {
  DeviceTaps taps;
  if (!cfg.pcap_path.empty()) {
    // One file per device when there are several: <path> for the first, <path>.<name> after.
    std::string path = cfg.pcap_path;
    if (!cfg.devices.empty() && cfg.devices.front().name != dev.name) path += "." + dev.name;
    std::string error;
    auto tap = PcapTap::open(path, &error);
    if (!tap) {
      std::fprintf(stderr, "rocelab shim: cannot write %s: %s\n", path.c_str(), error.c_str());
      return tap.error();
    }
    taps.pcap = std::move(*tap);
  }
  if (!cfg.events_path.empty()) {
    // TODO(shim): the engine's Protobuf event log writer has not landed.
    static bool warned = false;
    if (!warned) std::fprintf(stderr, "rocelab shim: ROCELAB_EVENTS: no event log writer yet; ignored\n");
    warned = true;
  }
  return taps;
}

}  // namespace rocelab::verbs_shim
