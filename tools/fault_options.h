// The fault-injection flags shared by `rocelab loopback` and `rocelab run`:
//   --loss P --reorder P --duplicate P --corrupt P   probabilities in [0,1]
//   --delay-us N --jitter-us N                       extra one-way delay
//   --seed N                                         PRNG seed (reproducible runs)
//   --drop-schedule SPEC                             rules, see docs/fault-injection.md
// CLI11 validates them (a bad value is a usage error naming the flag). `run`
// hands the result to the preload shim with emu::to_env().
#pragma once
#include <CLI/CLI.hpp>

#include "emu/transport/fault_config.h"

namespace rocelab::tools {

void add_fault_options(CLI::App& app, emu::FaultConfig& cfg);

}  // namespace rocelab::tools
