// DCQCN under random events: for each seed, random parameters (around the
// paper's and mlx5's defaults) and a random sequence of CNPs, bytes sent and
// timer calls at random times, some at the time asked for, some late, some
// early. After every call the invariants hold:
//   - min rate <= R_C <= R_T <= line rate, and rate_bps() is R_C rounded down;
//   - 0 <= alpha <= 1;
//   - next_timer() is after the call's time, or Nanos::max();
//   - rp_cnp_handled counts every CNP; cuts never outnumber them; every rate
//     increase is one timer or byte-counter expiry;
// and a twin that sees the same CNPs and bytes but no timer calls at all is in
// the same state after each of them (late timers change nothing). Twice per
// seed a quiet spell (timer only) lets the QP recover to line rate.
// The seeds are fixed; ROCELAB_PROPERTY_SEED=N runs only seed N (docs/style.md §11).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cc/dcqcn.h"

namespace rocelab::cc::test {
namespace {

constexpr Nanos kNever = Nanos::max();

std::vector<uint64_t> seeds() {
  if (const char* one = std::getenv("ROCELAB_PROPERTY_SEED")) return {std::strtoull(one, nullptr, 0)};
  std::vector<uint64_t> out;
  for (uint64_t s = 1; s <= 40; ++s) out.push_back(s);
  return out;
}

DcqcnParams random_params(std::mt19937_64& rng) {
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  DcqcnParams p = pick(0, 1) ? kDcqcnPaperDefaults : kDcqcnMlx5Defaults;
  if (pick(0, 1)) p.rate_reduce_monitor_period = pick(0, 60);
  if (pick(0, 1)) p.dce_tcp_rtt = pick(1, 80);
  if (pick(0, 1)) p.dce_tcp_g = pick(900, 1023);
  if (pick(0, 3) == 0) p.rpg_gd = pick(9, 13);
  if (pick(0, 3) == 0) p.rpg_min_dec_fac = pick(0, 100);
  if (pick(0, 3) == 0) p.rate_to_set_on_first_cnp = pick(1, 60'000);
  if (pick(0, 3) == 0) p.rpg_max_rate = pick(1'000, 50'000);
  if (pick(0, 1)) p.rpg_time_reset = pick(1, 400);
  if (pick(0, 1)) p.rpg_byte_reset = pick(0, 200'000);
  if (pick(0, 1)) p.rpg_threshold = pick(0, 8);
  p.clamp_tgt_rate = pick(0, 1);
  p.clamp_tgt_rate_after_time_inc = pick(0, 1);
  p.rpg_min_rate = pick(1, 100);
  return p;
}

class Checker {
 public:
  Checker(const DcqcnParams& p, uint64_t line) : min_rate_(p.rpg_min_rate * 1e6), line_(line) {}

  void check(const Dcqcn& d, Nanos now, uint64_t cnps) {
    const double rc = d.current_rate_bps(), rt = d.target_rate_bps();
    ASSERT_GE(rc, std::min(min_rate_, static_cast<double>(line_)));
    ASSERT_LE(rc, rt);
    ASSERT_LE(rt, static_cast<double>(line_));
    ASSERT_EQ(d.rate_bps(), static_cast<uint64_t>(rc));
    ASSERT_GE(d.alpha(), 0.0);
    ASSERT_LE(d.alpha(), 1.0);
    const Nanos next = d.next_timer();
    ASSERT_TRUE(next == kNever || next > now) << "next_timer in the past";
    const Counters& c = d.counters();
    ASSERT_EQ(c.rp_cnp_handled, cnps);
    ASSERT_LE(c.rate_cuts, c.rp_cnp_handled);
    ASSERT_EQ(c.fast_recovery + c.additive_increase + c.hyper_increase,
              c.timer_expiries + c.byte_counter_expiries);
  }

 private:
  double min_rate_;
  uint64_t line_;
};

void same_state(const Dcqcn& a, const Dcqcn& b) {
  auto near = [](double x, double y) { return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), 1.0); };
  ASSERT_TRUE(near(a.current_rate_bps(), b.current_rate_bps()))
      << a.current_rate_bps() << " vs " << b.current_rate_bps();
  ASSERT_TRUE(near(a.target_rate_bps(), b.target_rate_bps()));
  ASSERT_NEAR(a.alpha(), b.alpha(), 1e-9);
  ASSERT_EQ(a.counters().rate_cuts, b.counters().rate_cuts);
  ASSERT_EQ(a.counters().timer_expiries, b.counters().timer_expiries);
  ASSERT_EQ(a.counters().byte_counter_expiries, b.counters().byte_counter_expiries);
}

// Runs one seed; returns what the QP did, so the test can see every rule was reached, and
// counts in *recoveries the quiet spells after which the QP was back at line rate.
Counters run(uint64_t seed, int* recoveries) {
  std::mt19937_64 rng(seed);
  const DcqcnParams p = random_params(rng);
  const uint64_t line = std::uniform_int_distribution<int>(0, 1)(rng) ? 40'000'000'000 : 100'000'000'000;
  Dcqcn d(p, line), twin(p, line);
  Checker check(p, line);
  std::uniform_int_distribution<int> op(0, 9);
  std::exponential_distribution<double> gap_us(1.0 / 30);  // mean 30 us between events
  Nanos now = std::chrono::milliseconds(1);
  Nanos seen = now;  // the latest time d was given: next_timer must be after it
  uint64_t cnps = 0;
  for (int i = 0; i < 3000; ++i) {
    if (i % 1000 == 999) {
      // A quiet spell: only the timer, on time, until it stops (the QP recovered).
      for (int k = 0; k < 50'000 && d.next_timer() != kNever; ++k) {
        now = seen = d.next_timer();
        d.on_timer(now);
        check.check(d, seen, cnps);
        if (::testing::Test::HasFatalFailure()) return d.counters();
      }
      if (d.next_timer() == kNever && d.rate_bps() == line) ++*recoveries;
    }
    now += Nanos(static_cast<int64_t>(gap_us(rng) * 1000));
    const int o = op(rng);
    Nanos at = now;
    if (o < 3) {
      d.on_cnp(at);
      twin.on_cnp(at);
      ++cnps;
    } else if (o < 7) {
      const uint32_t bytes = std::uniform_int_distribution<uint32_t>(64, 1'000'000)(rng);
      d.on_sent(at, bytes);
      twin.on_sent(at, bytes);
    } else {
      // The engine's timer: on time (7: at next_timer, the clock jumping there), whenever
      // (8: now, late if the timer was due), or early (9: 100 us ago, perhaps before the
      // last call).
      const Nanos next = d.next_timer();
      if (o == 7 && next != kNever) at = std::max(now, next);
      if (o == 9) at = now - std::chrono::microseconds(100);
      d.on_timer(at);
      now = std::max(now, at);
    }
    seen = std::max(seen, at);
    check.check(d, seen, cnps);
    if (::testing::Test::HasFatalFailure()) return d.counters();
    // The twin, never woken by its timer, catches up in its next call.
    if (o < 7) same_state(d, twin);
    if (::testing::Test::HasFatalFailure()) return d.counters();
  }
  return d.counters();
}

TEST(DcqcnProperty, InvariantsHoldForRandomEventSequences) {
  Counters all;
  int recoveries = 0;
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE("reproduce: ROCELAB_PROPERTY_SEED=" + std::to_string(seed) +
                 " cc_tests --gtest_filter='DcqcnProperty.*'");
    const Counters c = run(seed, &recoveries);
    if (HasFatalFailure()) return;
    all.rate_cuts += c.rate_cuts;
    all.fast_recovery += c.fast_recovery;
    all.additive_increase += c.additive_increase;
    all.hyper_increase += c.hyper_increase;
    all.timer_expiries += c.timer_expiries;
    all.byte_counter_expiries += c.byte_counter_expiries;
  }
  if (seeds().size() == 1) return;
  // The fixed seeds reach every rule, and QPs recover to line rate.
  EXPECT_GT(all.rate_cuts, 0u);
  EXPECT_GT(all.fast_recovery, 0u);
  EXPECT_GT(all.additive_increase, 0u);
  EXPECT_GT(all.hyper_increase, 0u);
  EXPECT_GT(all.timer_expiries, 0u);
  EXPECT_GT(all.byte_counter_expiries, 0u);
  EXPECT_GT(recoveries, 0);
}

}  // namespace
}  // namespace rocelab::cc::test
