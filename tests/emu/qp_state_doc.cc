// Reading a Markdown QP transition table (qp_state_doc.h): cells of states,
// QP types and attribute names into rules the tests compare the engine with.
#include "tests/emu/qp_state_doc.h"

#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace rocelab::emu::test {
namespace {

constexpr QpState kStates[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                               QpState::kSqd,   QpState::kSqe,  QpState::kErr};
constexpr QpType kTypes[] = {QpType::kRC, QpType::kUC, QpType::kUD};

std::string trim(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

int state_of(const std::string& n) {
  for (QpState s : kStates)
    if (to_string(s) == n) return static_cast<int>(s);
  return -1;
}

// Attribute names ("AV PATH_MTU ..."); words that are not bit names ("-") are ignored.
uint32_t bits_of(const std::string& cell) {
  std::istringstream in(cell);
  std::string w;
  uint32_t m = 0;
  while (in >> w)
    for (int b = 0; b < qp_attr::kNumBits; ++b)
      if (qp_attr::bit_name(1u << b) == w) m |= 1u << b;
  return m;
}

std::vector<std::pair<int, int>> transitions_of(const std::string& cell) {
  std::vector<std::pair<int, int>> trans;
  if (cell.rfind("any->RESET", 0) == 0) {
    // Linux's table: "any->RESET (except none), INIT/RTR/RTS/SQD/SQE/ERR->ERR, RESET->RESET".
    for (QpState s : kStates) trans.push_back({static_cast<int>(s), static_cast<int>(QpState::kReset)});
    for (QpState s : kStates)
      if (s != QpState::kReset) trans.push_back({static_cast<int>(s), static_cast<int>(QpState::kErr)});
    return trans;
  }
  std::stringstream ts(cell);
  std::string one;
  while (std::getline(ts, one, ',')) {
    one = trim(one);
    const size_t arrow = one.find("->");
    if (arrow == std::string::npos) {
      trans.push_back({-1, -1});
      continue;
    }
    trans.push_back({state_of(one.substr(0, arrow)), state_of(one.substr(arrow + 2))});
  }
  return trans;
}

std::set<int> types_of(const std::string& cell) {
  std::set<int> types;
  std::stringstream ty(cell);
  std::string name;
  while (std::getline(ty, name, ',')) {
    name = trim(name);
    if (name == "all")
      for (QpType x : kTypes) types.insert(static_cast<int>(x));
    if (name == "RC") types.insert(static_cast<int>(QpType::kRC));
    if (name == "UC") types.insert(static_cast<int>(QpType::kUC));
    if (name == "UD") types.insert(static_cast<int>(QpType::kUD));
  }
  return types;
}

}  // namespace

QpTable load_qp_table(const std::string& path, const std::string& section) {
  QpTable t;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  bool inside = section.empty();
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.rfind("#", 0) == 0) {
      if (!section.empty()) inside = line == "## " + section;
      continue;
    }
    if (!inside || line.rfind("| ", 0) != 0 || line.find("->") == std::string::npos) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, '|')) cells.push_back(trim(c));
    if (cells.size() < 5) continue;
    for (auto [from, to] : transitions_of(cells[1])) {
      EXPECT_GE(from, 0) << path << ":" << lineno << ": " << line;
      EXPECT_GE(to, 0) << path << ":" << lineno << ": " << line;
      for (int type : types_of(cells[2])) {
        const QpKey key{from, to, type};
        EXPECT_EQ(t.count(key), 0u) << path << ":" << lineno << ": a second row for one transition";
        t[key] = QpRule{true, bits_of(cells[3]), bits_of(cells[4]), lineno};
      }
    }
  }
  return t;
}

bool qp_table_allows(const QpTable& t, QpState from, QpState to, QpType type, uint32_t mask) {
  auto it = t.find({static_cast<int>(from), static_cast<int>(to), static_cast<int>(type)});
  if (it == t.end() || !it->second.valid) return false;
  const QpRule& r = it->second;
  if ((mask & qp_attr::kCurState) && from != QpState::kRtr && from != QpState::kRts &&
      from != QpState::kSqd && from != QpState::kSqe)
    return false;
  return (mask & r.req) == r.req && (mask & ~(r.req | r.opt | qp_attr::kState)) == 0;
}

}  // namespace rocelab::emu::test
