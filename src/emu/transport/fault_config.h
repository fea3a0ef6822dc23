// What the fault injector (fault_injector.h) does: a FaultConfig (the command
// line's --loss/--reorder/... flags, also carried in ROCELAB_* environment
// variables to the preload shim) and the rules it expands to.
//
// Schedule SPEC grammar (--drop-schedule, ROCELAB_DROP_SCHEDULE; see also
// docs/fault-injection.md):
//   SPEC   := RULE ( (';' | ',') RULE )*          empty rules are ignored
//   RULE   := ACTION ( ':' KEY '=' VALUE )*
//   ACTION := drop | dup | duplicate | corrupt | delay | reorder
// Which packets a rule looks at (all given filters must hold; default: every
// packet sent):
//   dir=tx|rx|both            direction (default tx: what this device sends)
//   class=any|send|write|read|atomic|ack|cnp|request|response
//                             the opcode class (wire::op_info(opcode).cls)
//   opcode=N  psn=N  qpn=N    BTH fields (decimal or 0x hex; PSN/QPN 24-bit)
//   from=T  for=T             active window, T after the injector started
//                             (durations: 0 or N with ns|us|ms|s)
// When it fires, among the packets it looks at (its "matches"):
//   nth=K                     only the K-th match (1-based)
//   every=K                   every K-th match (K, 2K, ...)
//   count=K                   at most K times in all
//   p=P                       with probability P in [0,1] (default 1), drawn
//                             after the filters above
// Action parameters:
//   delay:  delay=T (required), jitter=T (uniform extra in [0, T])
//   reorder: by=K (let K later packets overtake it, default 1),
//            max=T (release anyway after T, default 1ms)
// Examples:
//   drop:psn=17:nth=2              drop the 2nd packet carrying PSN 17
//   drop:class=ack:from=0ms:for=5ms   drop every ACK sent in the first 5 ms
//   dup:class=read:dir=rx:p=0.5    duplicate half the READ packets received
//   delay:delay=200us:jitter=50us;corrupt:opcode=0x04:count=1
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emu/transport/transport.h"
#include "wire/opcode_table.h"

namespace rocelab::emu {

enum class FaultAction : uint8_t { kDrop, kDuplicate, kCorrupt, kDelay, kReorder };
enum class FaultDir : uint8_t { kTx = 1, kRx = 2, kBoth = 3 };
std::string_view to_string(FaultAction a);
std::string_view to_string(FaultDir d);

struct FaultRule {
  FaultAction action = FaultAction::kDrop;
  FaultDir dir = FaultDir::kTx;
  wire::OpClass cls = wire::OpClass::kNone;  // kNone: any packet
  std::optional<uint8_t> opcode;
  std::optional<uint32_t> psn, qpn;
  Nanos from{0};
  Nanos duration = Nanos::max();  // "for"
  uint64_t nth = 0, every = 0, count = 0;  // 0: not given
  double p = 1.0;
  Nanos delay{0}, jitter{0};      // delay
  uint32_t by = 1;                // reorder
  Nanos max_hold{1'000'000};      // reorder
  bool operator==(const FaultRule&) const = default;
};

// The flags `rocelab loopback` and `rocelab run` share (tools/fault_options.h).
// The probabilities and the delay apply to every packet a device sends; use
// the schedule for other directions and opcode classes.
struct FaultConfig {
  double loss = 0, reorder = 0, duplicate = 0, corrupt = 0;  // probabilities, [0,1]
  uint64_t delay_us = 0, jitter_us = 0;
  uint64_t seed = 1;
  std::string schedule;  // SPEC above
  bool operator==(const FaultConfig&) const = default;
  bool active() const;   // anything to inject at all
};

// A parse result with a message a user can act on.
struct FaultRules {
  std::vector<FaultRule> rules;
  std::string error;  // empty when ok
  bool ok() const { return error.empty(); }
};

// Parses a schedule SPEC.
FaultRules parse_fault_schedule(std::string_view spec);
// The rules of a whole config: one per flag that is set (in the order loss,
// duplicate, corrupt, reorder, delay), then the schedule's. Also checks the
// probabilities.
FaultRules fault_rules(const FaultConfig& cfg);

// ROCELAB_LOSS, ROCELAB_REORDER, ROCELAB_DUPLICATE, ROCELAB_CORRUPT,
// ROCELAB_DELAY_US, ROCELAB_JITTER_US, ROCELAB_SEED, ROCELAB_DROP_SCHEDULE.
// from_env reads those that are set; a malformed value is an error (message in
// *error, the field keeps its default). to_env gives every variable with its
// value (exact round trip).
FaultConfig from_env(std::string* error = nullptr);
// The same over `lookup` (a variable's value, nullptr when unset) instead of
// the process environment: for callers that must not setenv per call (glibc
// keeps every value setenv was ever given; the fuzz harness).
using EnvLookup = std::function<const char*(const char* name)>;
FaultConfig from_env(const EnvLookup& lookup, std::string* error = nullptr);
std::vector<std::pair<std::string, std::string>> to_env(const FaultConfig& cfg);

}  // namespace rocelab::emu
