// DCQCN's notification point (src/cc/notification_point.h): a CE-marked packet
// is answered with a CNP unless one went out for the same QP less than
// min_time_between_cnps ago.
#include "cc/notification_point.h"

#include <gtest/gtest.h>

namespace rocelab::cc::test {
namespace {

Nanos us(int64_t v) { return std::chrono::microseconds(v); }

TEST(NotificationPoint, FirstMarkedPacketIsAnswered) {
  NotificationPoint np(kMinTimeBetweenCnpsPaper);
  EXPECT_TRUE(np.on_ce_marked(us(7)));
  EXPECT_EQ(np.counters().np_cnp_sent, 1u);
  EXPECT_EQ(np.counters().np_ecn_marked_roce_packets, 1u);
}

// N = 50 us: marks at 0, 10, 49.999 and 50 us get CNPs at 0 and 50; the interval runs from
// the last CNP sent (50), not from the last mark, so 99 us is silent and 100 us answered.
TEST(NotificationPoint, AtMostOneCnpPerInterval) {
  NotificationPoint np(kMinTimeBetweenCnpsPaper);
  EXPECT_TRUE(np.on_ce_marked(us(0)));
  EXPECT_FALSE(np.on_ce_marked(us(10)));
  EXPECT_FALSE(np.on_ce_marked(us(50) - Nanos(1)));
  EXPECT_TRUE(np.on_ce_marked(us(50)));
  EXPECT_FALSE(np.on_ce_marked(us(99)));
  EXPECT_TRUE(np.on_ce_marked(us(100)));
  EXPECT_EQ(np.counters().np_ecn_marked_roce_packets, 6u);
  EXPECT_EQ(np.counters().np_cnp_sent, 3u);
}

TEST(NotificationPoint, ZeroIntervalAnswersEveryMark) {
  NotificationPoint np(Nanos(0));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(np.on_ce_marked(us(1)));
  EXPECT_EQ(np.counters().np_cnp_sent, 5u);
}

// One NotificationPoint per QP: a CNP for one QP does not silence another.
TEST(NotificationPoint, EachQpHasItsOwnInterval) {
  NotificationPoint qp1(kMinTimeBetweenCnpsMlx5), qp2(kMinTimeBetweenCnpsMlx5);
  EXPECT_TRUE(qp1.on_ce_marked(us(0)));
  EXPECT_TRUE(qp2.on_ce_marked(us(1)));
  EXPECT_FALSE(qp1.on_ce_marked(us(3)));
  EXPECT_TRUE(qp1.on_ce_marked(us(4)));
  EXPECT_FALSE(qp2.on_ce_marked(us(4)));
}

}  // namespace
}  // namespace rocelab::cc::test
