#include "tools/fault_options.h"

#include <string>

namespace rocelab::tools {

void add_fault_options(CLI::App& app, emu::FaultConfig& cfg) {
  CLI::Option_group* g = app.add_option_group("Fault injection", "Seeded, reproducible faults on the packets this device sends");
  const auto probability = CLI::Range(0.0, 1.0);
  g->add_option("--loss", cfg.loss, "Drop each packet with probability P")->check(probability);
  g->add_option("--reorder", cfg.reorder, "Let the next packet overtake this one with probability P")
      ->check(probability);
  g->add_option("--duplicate", cfg.duplicate, "Send each packet twice with probability P")
      ->check(probability);
  g->add_option("--corrupt", cfg.corrupt, "Flip one bit (bad ICRC) with probability P")
      ->check(probability);
  g->add_option("--delay-us", cfg.delay_us, "Delay every packet by N microseconds")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1'000'000'000}));
  g->add_option("--jitter-us", cfg.jitter_us, "Add a uniform 0..N microseconds to the delay")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1'000'000'000}));
  g->add_option("--seed", cfg.seed, "Seed of the fault PRNG (same seed, same faults)");
  g->add_option("--drop-schedule", cfg.schedule,
                "Scripted faults, e.g. 'drop:psn=17:nth=2;drop:class=ack:for=5ms' "
                "(see docs/fault-injection.md)")
      ->check(CLI::Validator(
          [](std::string& spec) {
            emu::FaultRules r = emu::parse_fault_schedule(spec);
            return r.ok() ? std::string() : r.error;
          },
          "SPEC"));
}

}  // namespace rocelab::tools
