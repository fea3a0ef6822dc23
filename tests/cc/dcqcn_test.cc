// DCQCN's reaction point (src/cc/dcqcn.h), one rule at a time: the cut on a
// CNP, alpha's updates, fast recovery, additive and hyper increase, the byte
// counter, mlx5's monitor period, decrease bound, first-CNP rate, clamp rules
// and max rate, and the bounds of the rate. Every expected number is worked
// out by hand from the rules in dcqcn.h; each test's comments show the steps.
// The line rate is 40 Gb/s (the paper's testbed) and t0 = 1 ms throughout.
#include "cc/dcqcn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>

namespace rocelab::cc::test {
namespace {

constexpr uint64_t kLine = 40'000'000'000;
constexpr Nanos kNever = Nanos::max();

Nanos us(int64_t v) { return std::chrono::microseconds(v); }
const Nanos t0 = std::chrono::milliseconds(1);

// The paper's parameters with the rate-increase timer pushed out of the way (10 ms) and no
// byte counter: only what a test drives happens.
DcqcnParams paper_quiet() {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rpg_time_reset = 10'000;
  p.rpg_byte_reset = 0;
  return p;
}

// g = 1/256 in the paper: alpha decays by 255/256 per 55 us period.
constexpr double kDecay = 255.0 / 256.0;

TEST(Dcqcn, SendsAtLineRateUntilTheFirstCnp) {
  Dcqcn d(kDcqcnPaperDefaults, kLine);
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.next_timer(), kNever);
  d.on_sent(t0, 100'000'000);
  d.on_timer(t0 + us(1000));
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.next_timer(), kNever);
  EXPECT_EQ(d.counters().byte_counter_expiries, 0u);
}

// Paper: alpha starts at 1, so R_C = 40 G x (1 - 1/2) = 20 G; R_T = the old R_C = 40 G; the
// rate-increase timer runs from the cut: first expiry at t0 + T = t0 + 55 us.
TEST(Dcqcn, FirstCnpHalvesTheRate) {
  Dcqcn d(kDcqcnPaperDefaults, kLine);
  d.on_cnp(t0);
  EXPECT_EQ(d.rate_bps(), 20'000'000'000u);
  EXPECT_EQ(d.target_rate_bps(), 40e9);
  EXPECT_EQ(d.alpha(), 1.0);
  EXPECT_EQ(d.next_timer(), t0 + us(55));
  EXPECT_EQ(d.counters().rp_cnp_handled, 1u);
  EXPECT_EQ(d.counters().rate_cuts, 1u);
}

// mlx5: alpha starts at initial_alpha_value = 1023/1024, rpg_gd 11 makes the cut alpha/2:
// R_C = 40 G x (1 - 1023/2048) = 40 G x 1025/2048 = 20 019 531 250 b/s. The cut falls on the
// monitor grid's first boundary, the first CNP itself; next is the timer, t0 + 300 us.
TEST(Dcqcn, Mlx5FirstCnpCutsByHalfItsInitialAlpha) {
  Dcqcn d(kDcqcnMlx5Defaults, kLine);
  d.on_cnp(t0);
  EXPECT_EQ(d.rate_bps(), 20'019'531'250u);
  EXPECT_EQ(d.target_rate_bps(), 40e9);
  EXPECT_EQ(d.alpha(), 1023.0 / 1024.0);
  EXPECT_EQ(d.next_timer(), t0 + us(300));
}

// Alpha's period K = 55 us starts at the first CNP; each boundary without a CNP multiplies
// alpha by (1 - g) = 255/256. A call long after applies every boundary it missed.
TEST(Dcqcn, AlphaDecaysWithoutCnps) {
  Dcqcn d(paper_quiet(), kLine);
  d.on_cnp(t0);
  d.on_timer(t0 + us(54));
  EXPECT_EQ(d.alpha(), 1.0);
  d.on_timer(t0 + us(55));
  EXPECT_DOUBLE_EQ(d.alpha(), kDecay);
  d.on_timer(t0 + us(109));
  EXPECT_DOUBLE_EQ(d.alpha(), kDecay);
  d.on_timer(t0 + us(110));
  EXPECT_DOUBLE_EQ(d.alpha(), kDecay * kDecay);
  d.on_timer(t0 + us(550));  // boundaries 3..10 at once
  EXPECT_NEAR(d.alpha(), std::pow(kDecay, 10), 1e-15);
  EXPECT_EQ(d.rate_bps(), 20'000'000'000u);  // alpha alone never moves the rate
}

// Paper, every CNP cuts at once with the alpha of the moment, then marks its alpha period:
//   t0        R_C = 20 G (alpha 1)
//   t0+50us   R_T = 20 G, R_C = 20 G (1 - 1/2) = 10 G
//   t0+55us   a CNP in the period: alpha = (1-g) 1 + g = 1
//   t0+110us  none: alpha = 255/256;  t0+165us: alpha = (255/256)^2 = 65025/65536
//   t0+170us  R_T = 10 G, R_C = 10 G (1 - 65025/131072) = 10 G x 66047/131072
//   t0+220us  a CNP in the period: alpha = (255/256)^3 + 1/256
TEST(Dcqcn, SuccessiveCnpsCutWithTheAlphaOfTheMoment) {
  Dcqcn d(paper_quiet(), kLine);
  d.on_cnp(t0);
  d.on_cnp(t0 + us(50));
  EXPECT_EQ(d.rate_bps(), 10'000'000'000u);
  EXPECT_EQ(d.target_rate_bps(), 20e9);
  d.on_timer(t0 + us(55));
  EXPECT_DOUBLE_EQ(d.alpha(), 1.0);
  d.on_timer(t0 + us(165));
  EXPECT_DOUBLE_EQ(d.alpha(), 65025.0 / 65536.0);
  d.on_cnp(t0 + us(170));
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 10e9 * 66047.0 / 131072.0);
  EXPECT_EQ(d.target_rate_bps(), 10e9);
  d.on_timer(t0 + us(220));
  EXPECT_DOUBLE_EQ(d.alpha(), kDecay * kDecay * kDecay + 1.0 / 256.0);
  EXPECT_EQ(d.counters().rate_cuts, 3u);
}

// Two CNPs 50 us apart leave R_C = 10 G below R_T = 20 G (as in the test above), with the
// timer restarted at t0 + 50 us: its expiries fall at t0 + 50 + 55k us.
Dcqcn cut_twice(const DcqcnParams& p) {
  Dcqcn d(p, kLine);
  d.on_cnp(t0);
  d.on_cnp(t0 + us(50));
  return d;
}

Nanos expiry(int k) { return t0 + us(50 + 55 * k); }

// Paper, F = 5, timer only: expiries 1..5 are fast recovery, R_C = (R_T + R_C)/2 with R_T
// fixed: the gap of 10 G halves each time, R_C = 20 G - 10 G / 2^k.
TEST(Dcqcn, FastRecoveryHalvesTheGapForFStages) {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rpg_byte_reset = 0;
  Dcqcn d = cut_twice(p);
  const double want[] = {15e9, 17.5e9, 18.75e9, 19.375e9, 19.6875e9};
  for (int k = 1; k <= 5; ++k) {
    EXPECT_EQ(d.next_timer(), expiry(k));
    d.on_timer(expiry(k));
    EXPECT_EQ(d.current_rate_bps(), want[k - 1]) << "expiry " << k;
    EXPECT_EQ(d.target_rate_bps(), 20e9);
  }
  EXPECT_EQ(d.counters().fast_recovery, 5u);
  EXPECT_EQ(d.counters().additive_increase, 0u);
  EXPECT_EQ(d.timer_stage(), 5u);
}

// The 6th expiry finds T = 5 = F: additive increase, R_T += R_AI = 40 Mb/s, then halfway:
//   6: R_T = 20.04 G, R_C = (19.6875 + 20.04)/2 = 19.86375 G
//   7: R_T = 20.08 G, R_C = (19.86375 + 20.08)/2 = 19.971875 G
// No byte counter, so BC stays 0 and hyper increase never comes.
TEST(Dcqcn, AdditiveIncreaseRaisesTheTargetAfterFStages) {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rpg_byte_reset = 0;
  Dcqcn d = cut_twice(p);
  d.on_timer(expiry(5));
  d.on_timer(expiry(6));
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.04e9);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 19.86375e9);
  d.on_timer(expiry(7));
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.08e9);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 19.971875e9);
  EXPECT_EQ(d.counters().fast_recovery, 5u);
  EXPECT_EQ(d.counters().additive_increase, 2u);
  EXPECT_EQ(d.counters().hyper_increase, 0u);
}

// F = 1, B = 10 MB, R_AI = 40 Mb/s, R_HAI = 400 Mb/s. Each event is judged on (T, BC) before
// its own counter counts it:
//   B bytes     (0,0) fast recovery:  R_C = (20 + 10)/2 = 15 G;              BC = 1
//   B bytes     (0,1) additive:       R_T = 20.04 G, R_C = 17.52 G;          BC = 2
//   expiry 1    (0,2) additive:       R_T = 20.08 G, R_C = 18.8 G;           T = 1
//   expiry 2    (1,2) additive:       R_T = 20.12 G, R_C = 19.46 G;          T = 2
//   expiry 3    (2,2) both > F, hyper: R_T = 20.52 G, R_C = 19.99 G;         T = 3
TEST(Dcqcn, HyperIncreaseOnceBothCountersExceedF) {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rpg_threshold = 1;
  p.rpg_ai_rate = 40;
  p.rpg_hai_rate = 400;
  Dcqcn d = cut_twice(p);
  d.on_sent(t0 + us(51), 10'000'000);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 15e9);
  d.on_sent(t0 + us(52), 10'000'000);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.04e9);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 17.52e9);
  d.on_timer(expiry(1));
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 18.8e9);
  d.on_timer(expiry(2));
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.12e9);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 19.46e9);
  d.on_timer(expiry(3));
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.52e9);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 19.99e9);
  EXPECT_EQ(d.counters().fast_recovery, 1u);
  EXPECT_EQ(d.counters().additive_increase, 3u);
  EXPECT_EQ(d.counters().hyper_increase, 1u);
  EXPECT_EQ(d.counters().byte_counter_expiries, 2u);
  EXPECT_EQ(d.counters().timer_expiries, 3u);
}

// Timer 1 s, B = 10 MB: after the cut (R_C 20 G, R_T 40 G) only bytes move the rate.
// 10 MB - 1 byte is no stage; the last byte is (fast recovery: 30 G); 30 MB in one call are
// three: 35, 37.5, 38.75 G.
TEST(Dcqcn, ByteCounterAloneAdvancesStages) {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rpg_time_reset = 1'000'000;
  Dcqcn d(p, kLine);
  d.on_cnp(t0);
  d.on_sent(t0 + us(1), 10'000'000 - 1);
  EXPECT_EQ(d.current_rate_bps(), 20e9);
  d.on_sent(t0 + us(2), 1);
  EXPECT_EQ(d.current_rate_bps(), 30e9);
  d.on_sent(t0 + us(3), 30'000'000);
  EXPECT_EQ(d.current_rate_bps(), 38.75e9);
  EXPECT_EQ(d.byte_stage(), 4u);
  EXPECT_EQ(d.timer_stage(), 0u);
  EXPECT_EQ(d.counters().timer_expiries, 0u);
  EXPECT_EQ(d.next_timer(), t0 + std::chrono::seconds(1));
}

// A CNP every 50 us keeps a CNP in every alpha period (alpha stays 1) and the timer from ever
// expiring: R_C = 40 G / 2^k, below rpg_min_rate = 1 Mb/s from k = 16 (610 kb/s), so it stays
// at 1 Mb/s. Then, left alone, the timer brings it back to exactly the line rate, never past
// it, and stops: a recovered QP has no timer and its byte counter counts nothing.
TEST(Dcqcn, RateStaysBetweenMinRateAndLineRate) {
  Dcqcn d(kDcqcnPaperDefaults, kLine);
  for (int k = 0; k < 40; ++k) {
    d.on_cnp(t0 + us(50 * k));
    EXPECT_GE(d.rate_bps(), 1'000'000u);
  }
  EXPECT_EQ(d.rate_bps(), 1'000'000u);
  int events = 0;
  while (d.next_timer() != kNever && events < 100'000) {
    d.on_timer(d.next_timer());
    ASSERT_GE(d.rate_bps(), 1'000'000u);
    ASSERT_LE(d.rate_bps(), kLine);
    ++events;
  }
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.next_timer(), kNever);
  const uint64_t bytes_before = d.counters().byte_counter_expiries;
  d.on_sent(t0 + std::chrono::seconds(1), 100'000'000);
  EXPECT_EQ(d.counters().byte_counter_expiries, bytes_before);
}

// mlx5's monitor period (4 us) on a grid started by the first CNP: the first CNP cuts at
// once (it is the grid's boundary); CNPs at +1 and +2 us make one cut, at +4 us, with alpha
// as its 1 us timer left it (g = 5/1024, one update per boundary):
//   a0 = 1023/1024                            (first CNP; it does not raise alpha again)
//   +1 us  no CNP in (0,1]:  a1 = a0 (1019/1024)       then the CNP at +1 marks (1,2]
//   +2 us  CNP:              a2 = a1 (1019/1024) + 5/1024, the CNP at +2 marks (2,3]
//   +3 us  CNP:              a3 = a2 (1019/1024) + 5/1024
//   +4 us  no CNP:           a4 = a3 (1019/1024), then the cut R_C = R_C (1 - a4/2)
// No increase since the first cut and clamp_tgt_rate off: R_T stays 40 G.
TEST(Dcqcn, CnpsWithinAMonitorPeriodMakeOneCut) {
  Dcqcn d(kDcqcnMlx5Defaults, kLine);
  d.on_cnp(t0);
  const double rc1 = 40e9 * 1025.0 / 2048.0;
  d.on_cnp(t0 + us(1));
  EXPECT_EQ(d.next_timer(), t0 + us(4));
  d.on_cnp(t0 + us(2));
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), rc1);
  EXPECT_EQ(d.counters().rate_cuts, 1u);
  d.on_timer(t0 + us(4));
  const double keep = 1019.0 / 1024.0, g = 5.0 / 1024.0;
  const double a1 = 1023.0 / 1024.0 * keep;
  const double a2 = a1 * keep + g;
  const double a3 = a2 * keep + g;
  const double a4 = a3 * keep;
  EXPECT_DOUBLE_EQ(d.alpha(), a4);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), rc1 * (1 - a4 / 2));
  EXPECT_EQ(d.target_rate_bps(), 40e9);
  EXPECT_EQ(d.counters().rp_cnp_handled, 3u);
  EXPECT_EQ(d.counters().rate_cuts, 2u);
  EXPECT_EQ(d.next_timer(), t0 + us(304));
}

// rpg_gd 10 makes the cut alpha itself (all of R_C at alpha 1); rpg_min_dec_fac bounds it:
// at 50 % R_C keeps 20 G of 40 G, at 75 % 30 G.
TEST(Dcqcn, MinDecFacBoundsOneCut) {
  for (auto [fac, want] : {std::pair{50u, 20e9}, std::pair{75u, 30e9}}) {
    DcqcnParams p = kDcqcnPaperDefaults;
    p.rpg_gd = 10;
    p.rpg_min_dec_fac = fac;
    Dcqcn d(p, kLine);
    d.on_cnp(t0);
    EXPECT_EQ(d.current_rate_bps(), want) << "rpg_min_dec_fac " << fac;
  }
}

// rate_to_set_on_first_cnp = 10 000 Mb/s: the first CNP sets R_C = R_T = 10 G instead of a
// cut; the next one cuts (paper alpha 1: 5 G). Above the line rate it is the line rate.
TEST(Dcqcn, RateToSetOnFirstCnpReplacesTheFirstCut) {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rate_to_set_on_first_cnp = 10'000;
  Dcqcn d(p, kLine);
  d.on_cnp(t0);
  EXPECT_EQ(d.current_rate_bps(), 10e9);
  EXPECT_EQ(d.target_rate_bps(), 10e9);
  d.on_cnp(t0 + us(10));
  EXPECT_EQ(d.current_rate_bps(), 5e9);

  p.rate_to_set_on_first_cnp = 100'000;
  Dcqcn high(p, kLine);
  high.on_cnp(t0);
  EXPECT_EQ(high.rate_bps(), kLine);
}

// mlx5's clamp rules (monitor period 0 here, so each CNP cuts at once): without
// clamp_tgt_rate, back-to-back cuts keep R_T at 40 G; after a timer increase (expiry at
// +300 us: fast recovery, T = 1) the next cut sets R_T = R_C, unless
// clamp_tgt_rate_after_time_inc is off; after a byte-counter increase it always does.
TEST(Dcqcn, Mlx5ClampRulesDecideWhereTheTargetGoes) {
  DcqcnParams p = kDcqcnMlx5Defaults;
  p.rate_reduce_monitor_period = 0;
  {
    Dcqcn d(p, kLine);
    d.on_cnp(t0);
    d.on_cnp(t0 + us(10));
    EXPECT_EQ(d.target_rate_bps(), 40e9);
    d.on_timer(t0 + us(310));
    ASSERT_EQ(d.timer_stage(), 1u);
    const double before = d.current_rate_bps();
    d.on_cnp(t0 + us(320));
    EXPECT_EQ(d.target_rate_bps(), before);
  }
  p.clamp_tgt_rate_after_time_inc = false;
  {
    Dcqcn d(p, kLine);
    d.on_cnp(t0);
    d.on_timer(t0 + us(300));
    ASSERT_EQ(d.timer_stage(), 1u);
    d.on_cnp(t0 + us(310));
    EXPECT_EQ(d.target_rate_bps(), 40e9);
    d.on_sent(t0 + us(311), 32767 * 64);  // one byte-counter stage
    ASSERT_EQ(d.byte_stage(), 1u);
    const double before = d.current_rate_bps();
    d.on_cnp(t0 + us(312));
    EXPECT_EQ(d.target_rate_bps(), before);
  }
}

// rpg_max_rate = 30 000 Mb/s on a 40 G line: increases stop R_T at 30 G, and once R_C gets
// there the QP is no longer rate limited: line rate, no timer.
TEST(Dcqcn, MaxRateEndsTheRateLimit) {
  DcqcnParams p = kDcqcnPaperDefaults;
  p.rpg_max_rate = 30'000;
  Dcqcn d(p, kLine);
  d.on_cnp(t0);
  d.on_timer(t0 + us(55));  // fast recovery toward R_T = min(40 G, 30 G): (20 + 30)/2
  EXPECT_EQ(d.current_rate_bps(), 25e9);
  int events = 0;
  while (d.next_timer() != kNever && events < 1000) {
    ASSERT_LE(d.rate_bps(), 30'000'000'000u);
    d.on_timer(d.next_timer());
    ++events;
  }
  EXPECT_EQ(d.rate_bps(), kLine);
  EXPECT_EQ(d.next_timer(), kNever);
}

// A timer handled late is the same as one handled on time: one QP is woken at every
// next_timer(), its twin only at the end; both saw the same CNPs and bytes.
TEST(Dcqcn, LateTimersChangeNothing) {
  Dcqcn on_time(kDcqcnMlx5Defaults, kLine), late(kDcqcnMlx5Defaults, kLine);
  for (Dcqcn* d : {&on_time, &late}) {
    d->on_cnp(t0);
    d->on_cnp(t0 + us(3));
  }
  const Nanos end = t0 + us(5000);
  while (on_time.next_timer() <= end) on_time.on_timer(on_time.next_timer());
  on_time.on_timer(end);
  late.on_timer(end);
  EXPECT_DOUBLE_EQ(late.current_rate_bps(), on_time.current_rate_bps());
  EXPECT_DOUBLE_EQ(late.target_rate_bps(), on_time.target_rate_bps());
  EXPECT_NEAR(late.alpha(), on_time.alpha(), 1e-12);
  EXPECT_EQ(late.counters().timer_expiries, on_time.counters().timer_expiries);
  EXPECT_EQ(late.counters().timer_expiries, 16u);  // 5000 us / 300 us after the cut at +4 us
}

// A call with an earlier time than the last one is taken at the last one.
TEST(Dcqcn, TimeNeverGoesBack) {
  Dcqcn d(paper_quiet(), kLine);
  d.on_cnp(t0);
  d.on_timer(t0 + us(110));
  d.on_cnp(t0);  // arrives "before" the last call: handled at t0 + 110 us, alpha (255/256)^2
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 20e9 * (1 - kDecay * kDecay / 2));
}

}  // namespace
}  // namespace rocelab::cc::test
