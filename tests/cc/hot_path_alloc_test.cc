// src/cc allocates nothing after construction (docs/style.md §8): a rate
// control made by the factory and a notification point, driven through CNPs,
// bytes sent and timers, call operator new zero times.
#include <gtest/gtest.h>

#include "cc/notification_point.h"
#include "cc/rate_control.h"
#include "tests/emu/transport/alloc_counter.h"

namespace rocelab::cc::test {
namespace {

TEST(HotPath, RateControlAndNotificationPointAllocateNothing) {
  std::string error;
  auto dcqcn = make_rate_control(Algorithm::kDcqcn, kDcqcnMlx5Defaults, 100'000'000'000, &error);
  auto none = make_rate_control(Algorithm::kNone, kDcqcnMlx5Defaults, 100'000'000'000, &error);
  ASSERT_TRUE(dcqcn && none) << error;
  NotificationPoint np(kMinTimeBetweenCnpsMlx5);
  const long before = rocelab::test::g_allocations.load();
  uint64_t sum = 0;
  Nanos now{0};
  for (int i = 0; i < 100'000; ++i) {
    now += Nanos(337);
    for (RateControl* rc : {dcqcn.get(), none.get()}) {
      if (i % 50 == 0 && np.on_ce_marked(now)) rc->on_cnp(now);
      rc->on_sent(now, 4096);
      if (rc->next_timer() <= now) rc->on_timer(now);
      sum += rc->rate_bps();
    }
  }
  EXPECT_EQ(rocelab::test::g_allocations.load() - before, 0);
  EXPECT_GT(dcqcn->counters().rate_cuts, 0u);
  EXPECT_GT(sum, 0u);
}

}  // namespace
}  // namespace rocelab::cc::test
