#include "verbs_shim/transport_factory.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "emu/transport/fault_config.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/udp_transport.h"
#include "verbs_shim/events_plugin.h"
#include "verbs_shim/record_signals.h"
#include "wire/host_probe.h"

namespace rocelab::verbs_shim {
namespace {

struct EventsPlugin {
  decltype(&rocelab_events_open) open;
  decltype(&rocelab_events_close) close;
  decltype(&rocelab_events_quiesce) quiesce;
};

// librocelab_verbs_events.so from the shim's own directory, loaded once.
wire::Result<EventsPlugin> events_plugin() {
  static EventsPlugin plugin{};
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&rocelab_events_plugin_anchor), &info) || !info.dli_fname) return;
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.rfind('/') + 1);
    void* h = dlopen((dir + "librocelab_verbs_events.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "rocelab shim: ROCELAB_EVENTS: %s\n", dlerror());
      return;
    }
    plugin.open = reinterpret_cast<decltype(&rocelab_events_open)>(dlsym(h, "rocelab_events_open"));
    plugin.close = reinterpret_cast<decltype(&rocelab_events_close)>(dlsym(h, "rocelab_events_close"));
    plugin.quiesce = reinterpret_cast<decltype(&rocelab_events_quiesce)>(dlsym(h, "rocelab_events_quiesce"));
    // The log's writes have a barrier of their own, in the module.
    if (plugin.quiesce) also_quiesce_on_signal(plugin.quiesce);
  });
  if (!plugin.open || !plugin.close || !plugin.quiesce) return std::error_code(ENOENT, std::generic_category());
  return plugin;
}

}  // namespace

// An address inside the shim, for dladdr.
void rocelab_events_plugin_anchor() {}

wire::Result<std::unique_ptr<emu::Transport>> make_transport(
    const DeviceConfig& dev, const ShimConfig& cfg, std::unique_ptr<host::AddressGroup>* group) {
  std::unique_ptr<emu::Transport> t;
  emu::UdpTransportConfig ucfg = cfg.wire_exact ? emu::UdpTransportConfig::wire_exact()
                                                : emu::UdpTransportConfig{};
  std::string why;
  if (!cfg.shared_address) {
    // Each process on an address of its own (the default): a plain bind.
    auto rx = dev.ip ? emu::bind_rx_socket(*dev.ip, dev.scope_id) : emu::allocate_loopback_address();
    if (!rx) {
      std::fprintf(stderr, "rocelab shim: %s: cannot bind %s:4791: %s\n", dev.name.c_str(),
                   dev.ip ? dev.ip->to_string().c_str() : "a free 127.0.0.x",
                   rx.error().message().c_str());
      return rx.error();
    }
    ucfg.scope_id = dev.scope_id;
    auto udp = emu::UdpTransport::open(std::move(*rx), ucfg);
    if (!udp) return udp.error();
    t = std::move(*udp);
  } else if (dev.ip) {
    ucfg.scope_id = dev.scope_id;  // a link-local address's interface
    host::JoinOptions opt;
    opt.scope_id = dev.scope_id;
    auto g = host::AddressGroup::join(*dev.ip, opt, &why);
    if (!g) {
      std::fprintf(stderr, "rocelab shim: %s: cannot use %s%s%s:4791: %s\n", dev.name.c_str(),
                   dev.ip->to_string().c_str(), dev.scope.empty() ? "" : "%", dev.scope.c_str(),
                   why.empty() ? g.error().message().c_str() : why.c_str());
      return g.error();
    }
    *group = std::move(*g);
  } else {
    // A host of its own: the first 127.0.0.x with no rocelab process (nor
    // any other socket) on port 4791.
    host::JoinOptions opt;
    opt.alone = true;
    for (unsigned x = 1; x <= 254 && !*group; ++x) {
      auto g = host::AddressGroup::join(wire::IpAddr::v4(127, 0, 0, static_cast<uint8_t>(x)), opt, &why);
      if (g) {
        *group = std::move(*g);
      } else if (g.error() != std::errc::address_in_use) {
        std::fprintf(stderr, "rocelab shim: %s: %s\n", dev.name.c_str(),
                     why.empty() ? g.error().message().c_str() : why.c_str());
        return g.error();
      }
    }
    if (!*group) {
      std::fprintf(stderr, "rocelab shim: %s: no free 127.0.0.x address\n", dev.name.c_str());
      return std::make_error_code(std::errc::address_in_use);
    }
  }
  if (host::AddressGroup* g = group->get()) {
    auto udp = emu::UdpTransport::open(emu::RxSocket(g->take_socket(), g->address()), ucfg);
    if (!udp) return udp.error();
    (*udp)->set_control_handler(wire::kHostProbeMagic,
                                [g](const emu::Datagram& d) { g->on_probe(d.payload); });
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

wire::Result<std::unique_ptr<DeviceTaps>> make_taps(const DeviceConfig& dev, const ShimConfig& cfg,
                                                    emu::Nanos clock_offset) {
  auto taps = std::make_unique<DeviceTaps>();
  // Several devices: <path> for the first, <path>.<name> for the others.
  auto path_for = [&](const std::string& base) {
    bool first = cfg.devices.empty() || cfg.devices.front().name == dev.name;
    return first ? base : base + "." + dev.name;
  };
  if (!cfg.pcap_path.empty()) {
    std::string path = path_for(cfg.pcap_path), detail;
    auto w = capture::PcapWriter::open(path, capture::PcapWriter::Options{}, &detail);
    if (!w) {
      std::fprintf(stderr, "rocelab shim: cannot write %s: %s\n", path.c_str(),
                   detail.empty() ? w.error().message().c_str() : detail.c_str());
      return w.error();
    }
    taps->pcap_file = std::make_unique<capture::PcapWriter>(std::move(*w));
    taps->pcap = std::make_unique<emu::PcapTap>(*taps->pcap_file, emu::PcapTap::Dirs::kBoth,
                                                clock_offset);
  }
  if (!cfg.events_path.empty()) {
    std::string path = path_for(cfg.events_path);
    auto plugin = events_plugin();
    if (!plugin) return plugin.error();
    int err = 0;
    emu::EventSink* sink = nullptr;
    void* log = plugin->open(path.c_str(), dev.name.c_str(), &sink, &err);
    if (!log) {
      std::fprintf(stderr, "rocelab shim: cannot write %s: %s\n", path.c_str(), std::strerror(err));
      return std::error_code(err, std::generic_category());
    }
    taps->log = std::unique_ptr<void, EventLogCloser>(log, {plugin->close});
    taps->events = sink;
  }
  return taps;
}

}  // namespace rocelab::verbs_shim
