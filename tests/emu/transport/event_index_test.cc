// The simulated fabric's index of its ports' earliest times
// (emu/transport/event_index.h): after any sequence of inserts, raises, lowers
// and removals, its top is the earliest key, each key is the one last given,
// and collect_until lists exactly the ids due by a time: all checked against
// a plain array scanned by brute force, over seeded random sequences.
#include "emu/transport/event_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

namespace rocelab::emu {
namespace {

// The brute-force model: each id's key, or none.
using Model = std::vector<std::optional<Nanos>>;

std::optional<Nanos> earliest(const Model& m) {
  std::optional<Nanos> t;
  for (const auto& k : m)
    if (k && (!t || *k < *t)) t = k;
  return t;
}

void expect_matches(const EventIndex& x, const Model& m) {
  size_t present = 0;
  for (uint32_t id = 0; id < m.size(); ++id) {
    ASSERT_EQ(x.contains(id), m[id].has_value()) << "id " << id;
    if (m[id]) {
      ++present;
      EXPECT_EQ(x.key(id), *m[id]) << "id " << id;
    }
  }
  EXPECT_EQ(x.size(), present);
  const auto t = earliest(m);
  ASSERT_EQ(x.empty(), !t.has_value());
  if (t) {
    EXPECT_EQ(x.top_key(), *t);
    EXPECT_EQ(m[x.top_id()], t);  // the top's id holds that key
  }
}

TEST(EventIndex, TopAndKeysFollowInsertsRaisesLowersAndRemovalsAsABruteForceScanDoes) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const uint32_t ids = 1 + rng() % 70;
    Model m(ids);
    EventIndex x;
    for (int op = 0; op < 3000; ++op) {
      const uint32_t id = rng() % ids;
      // Few distinct times, so that ties are common.
      const Nanos t(rng() % 50);
      switch (rng() % 4) {
        case 0:
          x.set(id, t);
          m[id] = t;
          break;
        case 1:
          x.lower(id, t);
          if (!m[id] || t < *m[id]) m[id] = t;
          break;
        case 2:
          x.erase(id);
          m[id].reset();
          break;
        case 3:
          if (rng() % 50 == 0) {
            x.clear();
            m.assign(ids, std::nullopt);
          }
          break;
      }
      expect_matches(x, m);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "seed " << seed << ", operation " << op;
        return;
      }
    }
  }
}

TEST(EventIndex, CollectUntilListsExactlyTheIdsDueByThatTime) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const uint32_t ids = 1 + rng() % 70;
    Model m(ids);
    EventIndex x;
    for (int op = 0; op < 500; ++op) {
      const uint32_t id = rng() % ids;
      if (rng() % 5 == 0) {
        x.erase(id);
        m[id].reset();
      } else {
        const Nanos t(rng() % 100);
        x.set(id, t);
        m[id] = t;
      }
      const Nanos by(rng() % 110);
      std::vector<uint32_t> got;
      x.collect_until(by, &got);
      std::sort(got.begin(), got.end());
      std::vector<uint32_t> want;
      for (uint32_t i = 0; i < ids; ++i)
        if (m[i] && *m[i] <= by) want.push_back(i);
      ASSERT_EQ(got, want) << "seed " << seed << ", operation " << op;
    }
  }
}

TEST(EventIndex, AnEmptyIndexListsNothingAndARemovedIdCanComeBack) {
  EventIndex x;
  std::vector<uint32_t> got;
  x.collect_until(Nanos::max(), &got);
  EXPECT_TRUE(got.empty());
  x.erase(3);  // absent: nothing happens
  EXPECT_TRUE(x.empty());
  x.lower(3, Nanos(5));
  x.set(7, Nanos::max());
  EXPECT_EQ(x.top_id(), 3u);
  x.erase(3);
  EXPECT_EQ(x.top_id(), 7u);
  EXPECT_EQ(x.top_key(), Nanos::max());
  x.set(3, Nanos(9));
  EXPECT_EQ(x.top_key(), Nanos(9));
  x.collect_until(Nanos(8), &got);
  EXPECT_TRUE(got.empty());
  x.collect_until(Nanos(9), &got);
  EXPECT_EQ(got, std::vector<uint32_t>{3});
}

}  // namespace
}  // namespace rocelab::emu
