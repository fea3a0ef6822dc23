#include "verbs_shim/config.h"

#include <net/if.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace rocelab::verbs_shim {
namespace {

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::optional<uint32_t> parse_u32(std::string_view text) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

bool valid_device_name(const std::string& name) {
  // Fits ibv_device::name (IBV_SYSFS_NAME_MAX = 64, NUL included) and prints cleanly.
  if (name.empty() || name.size() >= 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// "10G", "2500M", "1000000": bits/s with an optional decimal K, M or G.
std::optional<uint64_t> parse_rate(std::string_view text) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': scale = 1'000; break;
      case 'M': case 'm': scale = 1'000'000; break;
      case 'G': case 'g': scale = 1'000'000'000; break;
      default: break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || v == 0) return std::nullopt;
  if (v > UINT64_MAX / scale) return std::nullopt;
  return v * scale;
}

std::string bad(const char* var, const char* value, const std::string& why) {
  return std::string(var) + "=\"" + value + "\": " + why;
}

}  // namespace

std::optional<ShimConfig> parse_config(EnvLookup lookup, std::string& error) {
  ShimConfig cfg;
  const char* v = lookup("ROCELAB_DEVICES");
  std::vector<std::string> names = v ? split_commas(v) : std::vector<std::string>{"rocelab0"};
  if (names.empty() || names.size() > kMaxDevices) {
    error = bad("ROCELAB_DEVICES", v, "need 1 to 8 comma-separated names");
    return std::nullopt;
  }
  for (const std::string& n : names) {
    if (!valid_device_name(n)) {
      error = bad("ROCELAB_DEVICES", v, "a name is empty, too long or has characters other than [A-Za-z0-9_.-]");
      return std::nullopt;
    }
    for (const DeviceConfig& d : cfg.devices) {
      if (d.name == n) {
        error = bad("ROCELAB_DEVICES", v, "duplicate device name");
        return std::nullopt;
      }
    }
    cfg.devices.push_back(DeviceConfig{n, std::nullopt});
  }

  if ((v = lookup("ROCELAB_IP")) != nullptr && *v != '\0') {
    std::vector<std::string> ips = split_commas(v);
    if (ips.size() != cfg.devices.size()) {
      error = bad("ROCELAB_IP", v, "need one address per device in ROCELAB_DEVICES");
      return std::nullopt;
    }
    for (size_t i = 0; i < ips.size(); ++i) {
      // "fe80::1%eth0": an IPv6 link-local address and its interface.
      std::string scope;
      if (const size_t pct = ips[i].find('%'); pct != std::string::npos) {
        scope = ips[i].substr(pct + 1);
        ips[i].resize(pct);
      }
      auto ip = wire::IpAddr::parse(ips[i]);
      if (!ip) {
        error = bad("ROCELAB_IP", v,
                    ips[i].find('/') != std::string::npos
                        ? "an address, not a prefix: give the interface's address without /length"
                        : "not an IPv4 or IPv6 address");
        return std::nullopt;
      }
      const bool link_local = ip->v6 && ip->b[0] == 0xfe && (ip->b[1] & 0xc0) == 0x80;
      if (!scope.empty() && !link_local) {
        error = bad("ROCELAB_IP", v, "only an IPv6 link-local address (fe80::/10) takes %interface");
        return std::nullopt;
      }
      if (link_local && scope.empty()) {
        error = bad("ROCELAB_IP", v, "an IPv6 link-local address needs its interface: fe80::...%eth0");
        return std::nullopt;
      }
      if (!scope.empty()) {
        const unsigned idx = ::if_nametoindex(scope.c_str());
        if (idx == 0) {
          error = bad("ROCELAB_IP", v, "no network interface named \"" + scope + "\" here");
          return std::nullopt;
        }
        cfg.devices[i].scope_id = idx;
        cfg.devices[i].scope = scope;
      }
      cfg.devices[i].ip = *ip;
    }
  }

  if ((v = lookup("ROCELAB_MTU")) != nullptr && *v != '\0') {
    auto mtu = parse_u32(v);
    if (!mtu || (*mtu != 256 && *mtu != 512 && *mtu != 1024 && *mtu != 2048 && *mtu != 4096)) {
      error = bad("ROCELAB_MTU", v, "need 256, 512, 1024, 2048 or 4096");
      return std::nullopt;
    }
    cfg.mtu = *mtu;
  }

  if ((v = lookup("ROCELAB_PCAP")) != nullptr) cfg.pcap_path = v;
  if ((v = lookup("ROCELAB_EVENTS")) != nullptr) cfg.events_path = v;
  if ((v = lookup("ROCELAB_SHIM_DEBUG")) != nullptr) cfg.debug = std::string_view(v) == "1";
  if ((v = lookup("ROCELAB_EXPLAIN")) != nullptr) cfg.explain = std::string_view(v) == "1";
  if ((v = lookup("ROCELAB_RETRY_FOREVER")) != nullptr) cfg.retry_forever = std::string_view(v) == "1";
  if ((v = lookup("ROCELAB_COUNTERS")) != nullptr) cfg.counters = std::string_view(v) == "1";
  if ((v = lookup("ROCELAB_WIRE_EXACT")) != nullptr) cfg.wire_exact = std::string_view(v) == "1";
  if ((v = lookup("ROCELAB_SHARED_ADDRESS")) != nullptr) cfg.shared_address = std::string_view(v) == "1";
  if ((v = lookup("ROCELAB_CC")) != nullptr && *v != '\0') {
    std::string why;
    auto alg = cc::parse_algorithm(v, &why);
    if (!alg) {
      error = bad("ROCELAB_CC", v, why);
      return std::nullopt;
    }
    cfg.cc = *alg;
  }
  if ((v = lookup("ROCELAB_LINE_RATE")) != nullptr && *v != '\0') {
    auto rate = parse_rate(v);
    if (!rate || *rate < 1'000'000) {
      error = bad("ROCELAB_LINE_RATE", v, "need a rate in bits/s of at least 1M, with an optional K, M or G: 10G");
      return std::nullopt;
    }
    cfg.line_rate_bps = *rate;
  }
  if ((v = lookup("ROCELAB_CNP_INTERVAL_US")) != nullptr && *v != '\0') {
    auto us = parse_u32(v);
    if (!us || *us > 1'000'000) {
      error = bad("ROCELAB_CNP_INTERVAL_US", v, "need microseconds, 0..1000000");
      return std::nullopt;
    }
    cfg.cnp_interval_us = *us;
  }
  return cfg;
}

std::optional<ShimConfig> config_from_env(std::string& error) {
  return parse_config([](const char* name) -> const char* { return std::getenv(name); }, error);
}

}  // namespace rocelab::verbs_shim
