#include "emu/transport/fault_config.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace rocelab::emu {

std::string_view to_string(FaultAction a) {
  switch (a) {
    case FaultAction::kDrop: return "drop";
    case FaultAction::kDuplicate: return "duplicate";
    case FaultAction::kCorrupt: return "corrupt";
    case FaultAction::kDelay: return "delay";
    case FaultAction::kReorder: return "reorder";
  }
  return "?";
}

std::string_view to_string(FaultDir d) {
  switch (d) {
    case FaultDir::kTx: return "tx";
    case FaultDir::kRx: return "rx";
    case FaultDir::kBoth: return "both";
  }
  return "?";
}

bool FaultConfig::active() const {
  return loss > 0 || reorder > 0 || duplicate > 0 || corrupt > 0 || delay_us > 0 || jitter_us > 0 ||
         !schedule.empty();
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// An unsigned integer, decimal or 0x hex, at most `max`.
std::optional<uint64_t> parse_uint(std::string_view s, uint64_t max) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

// A probability: a decimal number in [0, 1].
std::optional<double> parse_probability(std::string_view s) {
  std::string text(s);
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(v >= 0.0 && v <= 1.0)) return std::nullopt;
  return v;
}

// A duration: "0", or an integer followed by ns, us, ms or s.
std::optional<Nanos> parse_duration(std::string_view s) {
  if (s == "0") return Nanos(0);
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  auto n = parse_uint(s.substr(0, digits), UINT64_MAX);
  if (!n) return std::nullopt;
  const std::string_view unit = s.substr(digits);
  uint64_t scale;
  if (unit == "ns") scale = 1;
  else if (unit == "us") scale = 1'000;
  else if (unit == "ms") scale = 1'000'000;
  else if (unit == "s") scale = 1'000'000'000;
  else return std::nullopt;
  if (*n > static_cast<uint64_t>(INT64_MAX) / scale) return std::nullopt;
  return Nanos(static_cast<int64_t>(*n * scale));
}

std::optional<wire::OpClass> parse_class(std::string_view s) {
  using wire::OpClass;
  if (s == "any") return OpClass::kNone;
  if (s == "send") return OpClass::kSend;
  if (s == "write") return OpClass::kWrite;
  if (s == "read") return OpClass::kRead;
  if (s == "atomic") return OpClass::kAtomic;
  if (s == "ack") return OpClass::kAck;
  if (s == "cnp") return OpClass::kCnp;
  if (s == "request" || s == "req") return OpClass::kRequest;
  if (s == "response" || s == "resp") return OpClass::kResponse;
  return std::nullopt;
}

std::optional<FaultAction> parse_action(std::string_view s) {
  if (s == "drop") return FaultAction::kDrop;
  if (s == "dup" || s == "duplicate") return FaultAction::kDuplicate;
  if (s == "corrupt") return FaultAction::kCorrupt;
  if (s == "delay") return FaultAction::kDelay;
  if (s == "reorder") return FaultAction::kReorder;
  return std::nullopt;
}

// Parses one RULE; returns an error message or "".
std::string parse_rule(std::string_view text, FaultRule& r) {
  size_t colon = text.find(':');
  const std::string_view action = trim(text.substr(0, colon));
  auto a = parse_action(action);
  if (!a) {
    return "unknown action '" + std::string(action) +
           "' (expected drop, dup, corrupt, delay or reorder)";
  }
  r.action = *a;
  std::vector<std::string_view> seen;
  bool has_delay = false;
  while (colon != std::string_view::npos) {
    text.remove_prefix(colon + 1);
    colon = text.find(':');
    const std::string_view field = trim(text.substr(0, colon));
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos) return "'" + std::string(field) + "' is not KEY=VALUE";
    const std::string_view key = trim(field.substr(0, eq)), value = trim(field.substr(eq + 1));
    for (auto k : seen) {
      if (k == key) return "key '" + std::string(key) + "' given twice";
    }
    seen.push_back(key);
    auto bad = [&](std::string_view want) {
      return std::string(key) + "=" + std::string(value) + ": expected " + std::string(want);
    };
    auto only_for = [&](FaultAction act) -> std::string {
      if (r.action == act) return "";
      return "key '" + std::string(key) + "' applies only to " + std::string(to_string(act));
    };
    if (key == "dir") {
      if (value == "tx") r.dir = FaultDir::kTx;
      else if (value == "rx") r.dir = FaultDir::kRx;
      else if (value == "both") r.dir = FaultDir::kBoth;
      else return bad("tx, rx or both");
    } else if (key == "class") {
      auto c = parse_class(value);
      if (!c) return bad("any, send, write, read, atomic, ack, cnp, request or response");
      r.cls = *c;
    } else if (key == "opcode") {
      auto v = parse_uint(value, 255);
      if (!v) return bad("an opcode 0..255");
      if (!wire::op_info(static_cast<uint8_t>(*v)).valid) return bad("an opcode of the IBTA table");
      r.opcode = static_cast<uint8_t>(*v);
    } else if (key == "psn" || key == "qpn") {
      auto v = parse_uint(value, 0xFFFFFF);
      if (!v) return bad("a 24-bit number");
      (key == "psn" ? r.psn : r.qpn) = static_cast<uint32_t>(*v);
    } else if (key == "from" || key == "for") {
      auto v = parse_duration(value);
      if (!v) return bad("a duration such as 0, 500us, 5ms or 2s");
      (key == "from" ? r.from : r.duration) = *v;
    } else if (key == "nth" || key == "every" || key == "count") {
      auto v = parse_uint(value, UINT64_MAX);
      if (!v || *v == 0) return bad("a count >= 1");
      (key == "nth" ? r.nth : key == "every" ? r.every : r.count) = *v;
    } else if (key == "p") {
      auto v = parse_probability(value);
      if (!v) return bad("a probability in [0,1]");
      r.p = *v;
    } else if (key == "delay" || key == "jitter") {
      if (auto e = only_for(FaultAction::kDelay); !e.empty()) return e;
      auto v = parse_duration(value);
      if (!v) return bad("a duration such as 0, 500us, 5ms or 2s");
      (key == "delay" ? r.delay : r.jitter) = *v;
      has_delay |= key == "delay";
    } else if (key == "by") {
      if (auto e = only_for(FaultAction::kReorder); !e.empty()) return e;
      auto v = parse_uint(value, 1'000'000);
      if (!v || *v == 0) return bad("a packet count >= 1");
      r.by = static_cast<uint32_t>(*v);
    } else if (key == "max") {
      if (auto e = only_for(FaultAction::kReorder); !e.empty()) return e;
      auto v = parse_duration(value);
      if (!v) return bad("a duration such as 0, 500us, 5ms or 2s");
      r.max_hold = *v;
    } else {
      return "unknown key '" + std::string(key) +
             "' (dir, class, opcode, psn, qpn, from, for, nth, every, count, p, delay, jitter, "
             "by, max)";
    }
  }
  if (r.nth != 0 && r.every != 0) return "nth and every exclude each other";
  if (r.action == FaultAction::kDelay && !has_delay) return "delay needs delay=T";
  return "";
}

}  // namespace

FaultRules parse_fault_schedule(std::string_view spec) {
  FaultRules out;
  size_t index = 0;
  while (!spec.empty()) {
    const size_t sep = spec.find_first_of(";,");
    const std::string_view text = trim(spec.substr(0, sep));
    spec = sep == std::string_view::npos ? std::string_view{} : spec.substr(sep + 1);
    if (text.empty()) continue;
    ++index;
    FaultRule r;
    std::string e = parse_rule(text, r);
    if (!e.empty()) {
      out.rules.clear();
      out.error = "fault schedule rule " + std::to_string(index) + " '" + std::string(text) + "': " + e;
      return out;
    }
    out.rules.push_back(r);
  }
  return out;
}

FaultRules fault_rules(const FaultConfig& cfg) {
  FaultRules out;
  const std::pair<const char*, double> probs[] = {{"loss", cfg.loss},
                                                  {"duplicate", cfg.duplicate},
                                                  {"corrupt", cfg.corrupt},
                                                  {"reorder", cfg.reorder}};
  const FaultAction actions[] = {FaultAction::kDrop, FaultAction::kDuplicate, FaultAction::kCorrupt,
                                 FaultAction::kReorder};
  for (size_t i = 0; i < 4; ++i) {
    const double p = probs[i].second;
    if (!(p >= 0.0 && p <= 1.0)) {
      out.error = std::string(probs[i].first) + " probability " + std::to_string(p) +
                  " is not in [0,1]";
      return out;
    }
    if (p > 0) {
      FaultRule r;
      r.action = actions[i];
      r.p = p;
      out.rules.push_back(r);
    }
  }
  if (cfg.delay_us > 0 || cfg.jitter_us > 0) {
    if (cfg.delay_us > 1'000'000'000 || cfg.jitter_us > 1'000'000'000) {
      out.error = "delay and jitter must be at most 1000 s";
      return out;
    }
    FaultRule r;
    r.action = FaultAction::kDelay;
    r.delay = Nanos(static_cast<int64_t>(cfg.delay_us) * 1000);
    r.jitter = Nanos(static_cast<int64_t>(cfg.jitter_us) * 1000);
    out.rules.push_back(r);
  }
  FaultRules sched = parse_fault_schedule(cfg.schedule);
  if (!sched.ok()) {
    out.rules.clear();
    out.error = sched.error;
    return out;
  }
  out.rules.insert(out.rules.end(), sched.rules.begin(), sched.rules.end());
  return out;
}

namespace {

constexpr const char* kEnvLoss = "ROCELAB_LOSS";
constexpr const char* kEnvReorder = "ROCELAB_REORDER";
constexpr const char* kEnvDuplicate = "ROCELAB_DUPLICATE";
constexpr const char* kEnvCorrupt = "ROCELAB_CORRUPT";
constexpr const char* kEnvDelay = "ROCELAB_DELAY_US";
constexpr const char* kEnvJitter = "ROCELAB_JITTER_US";
constexpr const char* kEnvSeed = "ROCELAB_SEED";
constexpr const char* kEnvSchedule = "ROCELAB_DROP_SCHEDULE";

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

FaultConfig from_env(std::string* error) {
  return from_env([](const char* name) -> const char* { return std::getenv(name); }, error);
}

FaultConfig from_env(const EnvLookup& lookup, std::string* error) {
  FaultConfig cfg;
  std::string errors;
  auto note = [&](const char* name, const char* value, const char* want) {
    if (!errors.empty()) errors += "; ";
    errors += std::string(name) + "='" + value + "': expected " + want;
  };
  auto prob = [&](const char* name, double& field) {
    const char* v = lookup(name);
    if (v == nullptr) return;
    if (auto p = parse_probability(v)) field = *p;
    else note(name, v, "a probability in [0,1]");
  };
  auto count = [&](const char* name, uint64_t& field, uint64_t max) {
    const char* v = lookup(name);
    if (v == nullptr) return;
    if (auto n = parse_uint(v, max)) field = *n;
    else note(name, v, "a non-negative integer");
  };
  prob(kEnvLoss, cfg.loss);
  prob(kEnvReorder, cfg.reorder);
  prob(kEnvDuplicate, cfg.duplicate);
  prob(kEnvCorrupt, cfg.corrupt);
  count(kEnvDelay, cfg.delay_us, 1'000'000'000);
  count(kEnvJitter, cfg.jitter_us, 1'000'000'000);
  count(kEnvSeed, cfg.seed, UINT64_MAX);
  if (const char* v = lookup(kEnvSchedule)) {
    FaultRules r = parse_fault_schedule(v);
    if (r.ok()) cfg.schedule = v;
    else note(kEnvSchedule, v, ("a valid schedule (" + r.error + ")").c_str());
  }
  if (error != nullptr) *error = errors;
  return cfg;
}

std::vector<std::pair<std::string, std::string>> to_env(const FaultConfig& cfg) {
  return {{kEnvLoss, format_double(cfg.loss)},
          {kEnvReorder, format_double(cfg.reorder)},
          {kEnvDuplicate, format_double(cfg.duplicate)},
          {kEnvCorrupt, format_double(cfg.corrupt)},
          {kEnvDelay, std::to_string(cfg.delay_us)},
          {kEnvJitter, std::to_string(cfg.jitter_us)},
          {kEnvSeed, std::to_string(cfg.seed)},
          {kEnvSchedule, cfg.schedule}};
}

}  // namespace rocelab::emu
