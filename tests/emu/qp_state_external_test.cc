// The project's transition table (docs/qp-state-machine.md) against Linux's
// (../shared/qp_state_table.md, read-only, outside the repository; label
// `external`): the two agree on every row for RC, UC and UD. Skipped where
// ../shared is absent.
#include <string>

#include <gtest/gtest.h>

#include "tests/emu/qp_state_doc.h"
#include "tests/external.h"

namespace rocelab::emu::test {
namespace {

const std::string kOurs = ROCELAB_SOURCE_DIR "/docs/qp-state-machine.md";
const std::string kLinux = ROCELAB_SHARED_DIR "/qp_state_table.md";

std::string name(const QpKey& k) {
  const auto [from, to, type] = k;
  return std::string(to_string(static_cast<QpState>(from))) + "->" +
         std::string(to_string(static_cast<QpState>(to))) + " " +
         std::string(to_string(static_cast<QpType>(type)));
}

TEST(QpStateTableExternal, LinuxTableParsesIntoEveryRow) {
  ROCELAB_REQUIRE_EXTERNAL(kLinux);
  const QpTable t = load_qp_table(kLinux);
  // 7 -> RESET, 6 -> ERR, 9 other transitions, for three types.
  EXPECT_EQ(t.size(), 3u * (7 + 6 + 9));
}

// Row by row, both ways: every row of ours is in Linux's table with the same
// required and optional attributes, and Linux's has no row for RC/UC/UD that
// ours lacks.
TEST(QpStateTableExternal, ProjectTableAgreesWithLinuxRowByRow) {
  ROCELAB_REQUIRE_EXTERNAL(kLinux);
  const QpTable ours = load_qp_table(kOurs, "The transition table");
  const QpTable theirs = load_qp_table(kLinux);
  ASSERT_FALSE(ours.empty());
  for (const auto& [key, rule] : ours) {
    auto it = theirs.find(key);
    if (it == theirs.end()) {
      ADD_FAILURE() << kOurs << ":" << rule.line << ": " << name(key) << " is not valid in Linux's table";
      continue;
    }
    EXPECT_EQ(rule.req, it->second.req) << kOurs << ":" << rule.line << ": required attributes of "
                                        << name(key) << " differ (Linux's line " << it->second.line << ")";
    EXPECT_EQ(rule.opt, it->second.opt) << kOurs << ":" << rule.line << ": optional attributes of "
                                        << name(key) << " differ (Linux's line " << it->second.line << ")";
  }
  for (const auto& [key, rule] : theirs)
    EXPECT_TRUE(ours.count(key)) << kLinux << ":" << rule.line << ": " << name(key)
                                 << " is valid in Linux's table but missing from " << kOurs;
}

}  // namespace
}  // namespace rocelab::emu::test
