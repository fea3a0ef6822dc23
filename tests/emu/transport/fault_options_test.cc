// The shared fault flags (tools/fault_options.h), parsed by CLI11.
#include "tools/fault_options.h"

#include <gtest/gtest.h>

#include <vector>

namespace rocelab::tools {
namespace {

// Parses args (after the program name) into a FaultConfig; "" when it parsed,
// otherwise CLI11's message.
std::string parse(std::vector<std::string> args, emu::FaultConfig& cfg) {
  CLI::App app{"test"};
  add_fault_options(app, cfg);
  std::vector<const char*> argv = {"test"};
  for (auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(FaultOptions, EveryFlagLandsInTheConfig) {
  emu::FaultConfig cfg;
  ASSERT_EQ(parse({"--loss", "0.1", "--reorder", "0.2", "--duplicate", "0.05", "--corrupt", "0.01",
                   "--delay-us", "250", "--jitter-us", "40", "--seed", "42", "--drop-schedule",
                   "drop:psn=17:nth=2;drop:class=ack:from=0ms:for=5ms"},
                  cfg),
            "");
  EXPECT_EQ(cfg.loss, 0.1);
  EXPECT_EQ(cfg.reorder, 0.2);
  EXPECT_EQ(cfg.duplicate, 0.05);
  EXPECT_EQ(cfg.corrupt, 0.01);
  EXPECT_EQ(cfg.delay_us, 250u);
  EXPECT_EQ(cfg.jitter_us, 40u);
  EXPECT_EQ(cfg.seed, 42u);
  EXPECT_EQ(cfg.schedule, "drop:psn=17:nth=2;drop:class=ack:from=0ms:for=5ms");
  EXPECT_TRUE(cfg.active());
  EXPECT_EQ(emu::fault_rules(cfg).rules.size(), 7u);  // 4 probabilities, delay, 2 scheduled
}

TEST(FaultOptions, DefaultsInjectNothing) {
  emu::FaultConfig cfg;
  ASSERT_EQ(parse({}, cfg), "");
  EXPECT_EQ(cfg, emu::FaultConfig{});
  EXPECT_FALSE(cfg.active());
}

TEST(FaultOptions, BadValuesAreUsageErrorsNamingTheProblem) {
  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"--loss", "1.5"}, "--loss"},
      {{"--corrupt", "-0.1"}, "--corrupt"},
      {{"--reorder", "often"}, "--reorder"},
      {{"--delay-us", "-3"}, "--delay-us"},
      {{"--seed", "x"}, "--seed"},
      {{"--drop-schedule", "drop:psn=x"}, "psn=x: expected a 24-bit number"},
      {{"--drop-schedule", "explode"}, "unknown action 'explode'"},
  };
  for (const auto& [args, want] : bad) {
    emu::FaultConfig cfg;
    std::string err = parse(args, cfg);
    EXPECT_NE(err.find(want), std::string::npos) << args[0] << " " << args[1] << " -> " << err;
  }
}

}  // namespace
}  // namespace rocelab::tools
