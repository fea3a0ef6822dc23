// The shim's configuration: environment variables only, since it is loaded
// into programs we do not control (`rocelab run` sets them). docs/shim.md
// has the table; keep it and kEnvVars in step.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cc/rate_control.h"
#include "wire/ip_udp.h"

namespace rocelab::verbs_shim {

struct EnvVar {
  const char* name;
  const char* meaning;
};

// Every variable the shim reads (the fault injector's are listed by it).
inline constexpr EnvVar kEnvVars[] = {
    {"ROCELAB_DEVICES", "comma-separated emulated device names (default rocelab0)"},
    {"ROCELAB_IP", "comma-separated IPv4 addresses, one per device (default: first free 127.0.0.x)"},
    {"ROCELAB_MTU", "path MTU of the emulated port: 256, 512, 1024, 2048 or 4096 (default 1024)"},
    {"ROCELAB_PCAP", "write every RoCEv2 packet sent and received to this pcap file"},
    {"ROCELAB_EVENTS", "write the engine's event log (protobuf) to this file"},
    {"ROCELAB_SHIM_DEBUG", "1: print the shim's decisions to stderr"},
    {"ROCELAB_WIRE_EXACT", "1: one UDP datagram per RoCEv2 packet (no GSO super-datagrams on lo)"},
    {"ROCELAB_SHARED_ADDRESS", "1: share the device's address with other rocelab processes (experimental, docs/host.md)"},
};

inline constexpr size_t kMaxDevices = 8;

struct DeviceConfig {
  std::string name;
  std::optional<wire::IpAddr> ip;  // nullopt: the transport picks a free 127.0.0.x
  // An IPv6 link-local address (fe80::/10) comes with its interface
  // ("fe80::1%eth0"): its index, for the sockets (sin6_scope_id). 0: none.
  uint32_t scope_id = 0;
  std::string scope;  // the interface's name as given
};

struct ShimConfig {
  std::vector<DeviceConfig> devices;
  // The port's active MTU in bytes (one of the IBTA path MTUs); 0: derived from
  // the MTU of the interface holding the device's address, as Soft-RoCE does.
  uint32_t mtu = 0;
  std::string pcap_path;
  std::string events_path;
  bool debug = false;
  bool explain = false;        // a refused verb prints the engine's reason on stderr (errno unchanged)
  bool retry_forever = false;  // retry_cnt 7 as rxe reads it (DeviceConfig::retry_forever)
  bool counters = false;       // print each device's counters on stderr when it closes / at exit
  bool wire_exact = false;     // no UDP GSO: one datagram per packet (UdpTransportConfig::wire_exact)
  bool shared_address = false; // join the address's group of processes (host::AddressGroup)
  // Congestion control (emu::DeviceConfig::cc): ROCELAB_CC none|dcqcn,
  // ROCELAB_LINE_RATE the port's rate in bits/s (suffix K, M or G: 10G),
  // ROCELAB_CNP_INTERVAL_US the notification point's min_time_between_cnps.
  cc::Algorithm cc = cc::Algorithm::kNone;
  uint64_t line_rate_bps = 100'000'000'000;
  std::optional<uint32_t> cnp_interval_us;  // unset: mlx5's
};

// Parses the ROCELAB_* variables as `lookup` returns them (nullptr: unset).
// On bad input returns nullopt and sets `error` to a message naming the
// variable and its value.
using EnvLookup = const char* (*)(const char* name);
std::optional<ShimConfig> parse_config(EnvLookup lookup, std::string& error);

// parse_config over the process environment.
std::optional<ShimConfig> config_from_env(std::string& error);

}  // namespace rocelab::verbs_shim
