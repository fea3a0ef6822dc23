// Fuzz target: the fault injector's text configuration (src/emu/transport/
// fault_config.*): the schedule grammar (--drop-schedule, ROCELAB_DROP_SCHEDULE)
// and the ROCELAB_* variables that carry a FaultConfig to the shim.
//
// Input: one byte choosing the mode, then text.
//   even: the text is a schedule SPEC. A spec that parses yields rules whose
//         values are in range (p in [0,1], a delay rule has a delay, PSN/QPN
//         24-bit), and a FaultConfig carrying it expands without error.
//   odd:  the text is up to eight lines, the values of ROCELAB_LOSS, _REORDER,
//         _DUPLICATE, _CORRUPT, _DELAY_US, _JITTER_US, _SEED, _DROP_SCHEDULE
//         (a line "!" leaves the variable unset). from_env reads them; what it
//         accepted goes through to_env and from_env again unchanged (the
//         round trip `rocelab run` relies on), and an error names a variable.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "emu/transport/fault_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace rocelab::emu;

constexpr const char* kVars[] = {"ROCELAB_LOSS",     "ROCELAB_REORDER",   "ROCELAB_DUPLICATE",
                                 "ROCELAB_CORRUPT",  "ROCELAB_DELAY_US",  "ROCELAB_JITTER_US",
                                 "ROCELAB_SEED",     "ROCELAB_DROP_SCHEDULE"};

void check_rules(const FaultRules& r) {
  if (!r.ok()) return;
  for (const FaultRule& x : r.rules) {
    ROCELAB_FUZZ_CHECK(x.p >= 0.0 && x.p <= 1.0, "a probability outside [0,1] accepted");
    ROCELAB_FUZZ_CHECK(!x.psn || *x.psn < (1u << 24), "a PSN wider than 24 bits accepted");
    ROCELAB_FUZZ_CHECK(!x.qpn || *x.qpn < (1u << 24), "a QPN wider than 24 bits accepted");
    ROCELAB_FUZZ_CHECK(x.delay.count() >= 0 && x.jitter.count() >= 0 && x.from.count() >= 0,
                       "a negative duration accepted");
  }
}

// The variables of one input, read through from_env's lookup rather than
// setenv: glibc keeps every value setenv was ever given, so setting a fresh
// one per input would grow without bound (docs/security.md, findings).
std::map<std::string, std::string> g_env;
const char* lookup(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

void from_env_mode(std::string_view text) {
  g_env.clear();
  size_t i = 0;
  while (i < std::size(kVars)) {
    const size_t nl = text.find('\n');
    const std::string line(text.substr(0, nl));
    if (line != "!") g_env[kVars[i]] = line;
    ++i;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  std::string error;
  const FaultConfig cfg = from_env(lookup, &error);
  if (!error.empty()) {
    ROCELAB_FUZZ_CHECK(error.find("ROCELAB_") != std::string::npos, "an error that names no variable");
  }
  const FaultRules rules = fault_rules(cfg);
  check_rules(rules);
  ROCELAB_FUZZ_CHECK(rules.ok(), "from_env accepted what fault_rules refuses");
  g_env.clear();
  for (const auto& [name, value] : to_env(cfg)) g_env[name] = value;
  std::string error2;
  const FaultConfig again = from_env(lookup, &error2);
  ROCELAB_FUZZ_CHECK(error2.empty(), "from_env refuses what to_env wrote");
  ROCELAB_FUZZ_CHECK(again == cfg, "to_env/from_env round trip changed the configuration");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (text.find('\0') != std::string_view::npos) return 0;  // not representable in an environment
  if (data[0] % 2 == 0) {
    const FaultRules r = parse_fault_schedule(text);
    check_rules(r);
    FaultConfig cfg;
    cfg.schedule = std::string(text);
    const FaultRules all = fault_rules(cfg);
    ROCELAB_FUZZ_CHECK(all.ok() == r.ok(), "fault_rules and parse_fault_schedule disagree");
  } else {
    from_env_mode(text);
  }
  return 0;
}
