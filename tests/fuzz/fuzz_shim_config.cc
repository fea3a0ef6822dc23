// Fuzz target: the shim's environment configuration (src/verbs_shim/config.*),
// which a preloaded program's environment hands to us unchecked.
//
// Input: up to nine lines, the values of ROCELAB_DEVICES, _IP, _MTU, _PCAP,
// _EVENTS, _SHIM_DEBUG, _EXPLAIN, _RETRY_FOREVER, _COUNTERS in that order (a
// line "!" leaves the variable unset). Invariants: accepted means 1 to 8
// distinct device names, an address for every device or for none, an MTU
// of 0 or an IBTA path MTU; refused means a message naming the variable.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_check.h"
#include "verbs_shim/config.h"

namespace {

using namespace rocelab::verbs_shim;

constexpr const char* kVars[] = {"ROCELAB_DEVICES", "ROCELAB_IP",      "ROCELAB_MTU",
                                 "ROCELAB_PCAP",    "ROCELAB_EVENTS",  "ROCELAB_SHIM_DEBUG",
                                 "ROCELAB_EXPLAIN", "ROCELAB_RETRY_FOREVER", "ROCELAB_COUNTERS"};
std::array<std::optional<std::string>, std::size(kVars)> g_env;

const char* lookup(const char* name) {
  for (size_t i = 0; i < std::size(kVars); ++i)
    if (std::strcmp(name, kVars[i]) == 0) return g_env[i] ? g_env[i]->c_str() : nullptr;
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.find('\0') != std::string_view::npos) return 0;  // not representable in an environment
  for (auto& v : g_env) v.reset();
  for (size_t i = 0; i < std::size(kVars); ++i) {
    const size_t nl = text.find('\n');
    const std::string line(text.substr(0, nl));
    if (line != "!") g_env[i] = line;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  std::string error;
  const std::optional<ShimConfig> cfg = parse_config(lookup, error);
  if (!cfg) {
    ROCELAB_FUZZ_CHECK(error.find("ROCELAB_") == 0, "a refusal that does not name the variable");
    return 0;
  }
  ROCELAB_FUZZ_CHECK(!cfg->devices.empty() && cfg->devices.size() <= kMaxDevices,
                     "accepted a device count outside 1..8");
  const bool any_ip = cfg->devices.front().ip.has_value();
  for (size_t i = 0; i < cfg->devices.size(); ++i) {
    ROCELAB_FUZZ_CHECK(!cfg->devices[i].name.empty(), "accepted an empty device name");
    ROCELAB_FUZZ_CHECK(cfg->devices[i].ip.has_value() == any_ip, "addresses for some devices only");
    for (size_t j = 0; j < i; ++j)
      ROCELAB_FUZZ_CHECK(cfg->devices[i].name != cfg->devices[j].name, "accepted a duplicate name");
  }
  const uint32_t m = cfg->mtu;
  ROCELAB_FUZZ_CHECK(m == 0 || m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096,
                     "accepted an MTU that is no IBTA path MTU");
  return 0;
}
