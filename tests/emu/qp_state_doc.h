// Reads a QP transition table written as a Markdown table
// (| transition | type | required | optional |), as in docs/qp-state-machine.md
// and in Linux's table (../shared/qp_state_table.md), into one rule per
// (from state, to state, QP type) for RC, UC and UD.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "emu/verbs_types.h"

namespace rocelab::emu::test {

struct QpRule {
  bool valid = false;
  uint32_t req = 0, opt = 0;
  int line = 0;  // the row it came from
};
using QpKey = std::tuple<int, int, int>;  // from, to, type (the enums' values)
using QpTable = std::map<QpKey, QpRule>;

// The rows of `path`; with a non-empty `section`, only those under the heading
// "## <section>" (up to the next heading). A row naming an unknown state fails
// the calling test. An unreadable file fails it too and returns an empty table.
QpTable load_qp_table(const std::string& path, const std::string& section = "");

// Whether a modify from -> to with `mask` is legal under `t` (the document's rules).
bool qp_table_allows(const QpTable& t, QpState from, QpState to, QpType type, uint32_t mask);

}  // namespace rocelab::emu::test
