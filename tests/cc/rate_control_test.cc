// The RateControl interface (src/cc/rate_control.h): the factory, the
// algorithm names of the command line, and kNone.
#include "cc/rate_control.h"

#include <gtest/gtest.h>

namespace rocelab::cc::test {
namespace {

constexpr uint64_t kLine = 100'000'000'000;

TEST(RateControl, NoneStaysAtLineRate) {
  std::string error;
  auto rc = make_rate_control(Algorithm::kNone, kDcqcnMlx5Defaults, kLine, &error);
  ASSERT_TRUE(rc) << error;
  EXPECT_EQ(rc->name(), "none");
  for (int i = 0; i < 100; ++i) {
    rc->on_cnp(std::chrono::microseconds(i));
    rc->on_sent(std::chrono::microseconds(i), 4096);
    rc->on_timer(std::chrono::microseconds(i));
  }
  EXPECT_EQ(rc->rate_bps(), kLine);
  EXPECT_EQ(rc->next_timer(), Nanos::max());
  EXPECT_EQ(rc->counters().rp_cnp_ignored, 100u);
  EXPECT_EQ(rc->counters().rp_cnp_handled, 0u);
}

TEST(RateControl, FactoryMakesDcqcnAtLineRate) {
  std::string error;
  auto rc = make_rate_control(Algorithm::kDcqcn, kDcqcnPaperDefaults, kLine, &error);
  ASSERT_TRUE(rc) << error;
  EXPECT_EQ(rc->name(), "dcqcn");
  EXPECT_EQ(rc->rate_bps(), kLine);
  rc->on_cnp(std::chrono::milliseconds(1));
  EXPECT_EQ(rc->rate_bps(), kLine / 2);
  EXPECT_EQ(rc->counters().rp_cnp_handled, 1u);
}

// Each refusal names what is wrong; a zero period would leave a timer that never advances.
TEST(RateControl, FactoryRefusesParametersThatCannotWork) {
  struct Case {
    const char* what;
    void (*spoil)(DcqcnParams&);
    const char* says;
  };
  const Case cases[] = {
      {"alpha period 0", [](DcqcnParams& p) { p.dce_tcp_rtt = 0; }, "dce_tcp_rtt"},
      {"timer 0", [](DcqcnParams& p) { p.rpg_time_reset = 0; }, "rpg_time_reset"},
      {"g out of range", [](DcqcnParams& p) { p.dce_tcp_g = 1024; }, "dce_tcp_g"},
      {"alpha above 1", [](DcqcnParams& p) { p.initial_alpha_value = 1025; }, "initial_alpha_value"},
      {"percentage over 100", [](DcqcnParams& p) { p.rpg_min_dec_fac = 101; }, "rpg_min_dec_fac"},
      {"no floor", [](DcqcnParams& p) { p.rpg_min_rate = 0; }, "rpg_min_rate"},
      {"floor above the line", [](DcqcnParams& p) { p.rpg_min_rate = 200'000; }, "rpg_min_rate"},
  };
  for (const Case& c : cases) {
    DcqcnParams p = kDcqcnMlx5Defaults;
    c.spoil(p);
    std::string error;
    EXPECT_EQ(make_rate_control(Algorithm::kDcqcn, p, kLine, &error), nullptr) << c.what;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.what << ": " << error;
  }
  std::string error;
  EXPECT_EQ(make_rate_control(Algorithm::kNone, kDcqcnMlx5Defaults, 0, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST(RateControl, ParsesTheAlgorithmNames) {
  std::string error;
  EXPECT_EQ(parse_algorithm("none", &error), Algorithm::kNone);
  EXPECT_EQ(parse_algorithm("dcqcn", &error), Algorithm::kDcqcn);
  for (Algorithm a : {Algorithm::kNone, Algorithm::kDcqcn})
    EXPECT_EQ(parse_algorithm(algorithm_name(a), &error), a);
  EXPECT_TRUE(error.empty());
}

TEST(RateControl, RefusesOtherTextNamingTheChoices) {
  for (const char* text : {"", "DCQCN", "dcqcn ", "timely", "hpcc"}) {
    std::string error;
    EXPECT_EQ(parse_algorithm(text, &error), std::nullopt) << text;
    EXPECT_NE(error.find("none, dcqcn"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace rocelab::cc::test
