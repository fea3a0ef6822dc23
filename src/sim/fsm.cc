#include "sim/fsm.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace rocelab::sim {
namespace {

using emu::QpState;
using emu::QpType;

constexpr QpState kStates[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                               QpState::kSqd,   QpState::kSqe,  QpState::kErr};

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// "AV PATH_MTU" in bit order; "-" for none.
std::string names(uint32_t bits, const char* sep = " ") {
  std::string s;
  for (int b = 0; b < emu::qp_attr::kNumBits; ++b) {
    if (!(bits & (1u << b))) continue;
    if (!s.empty()) s += sep;
    s += emu::qp_attr::bit_name(1u << b);
  }
  return s.empty() ? "-" : s;
}

std::string state(QpState s) { return std::string(emu::to_string(s)); }

}  // namespace

std::optional<QpType> parse_qp_type(std::string_view text) {
  const std::string u = upper(text);
  for (QpType t : {QpType::kRC, QpType::kUC, QpType::kUD})
    if (emu::to_string(t) == u) return t;
  return std::nullopt;
}

std::optional<QpState> parse_qp_state(std::string_view text) {
  std::string u = upper(text);
  if (u.rfind("IBV_QPS_", 0) == 0) u = u.substr(8);
  for (QpState s : kStates)
    if (emu::to_string(s) == u) return s;
  return std::nullopt;
}

std::optional<uint32_t> parse_attr_mask(std::string_view text, std::string* error) {
  const std::string t = trim(text);
  if (t.empty()) {
    *error = "empty attribute mask";
    return std::nullopt;
  }
  if (std::isdigit(static_cast<unsigned char>(t[0]))) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(t.c_str(), &end, 0);
    if (*end != '\0' || v > 0xFFFFFFFFul) {
      *error = "not a number: " + t;
      return std::nullopt;
    }
    return static_cast<uint32_t>(v);
  }
  std::string list = t;
  for (char& c : list)
    if (c == '|') c = ',';
  uint32_t mask = 0;
  std::istringstream in(list);
  std::string part;
  while (std::getline(in, part, ',')) {
    std::string name = upper(trim(part));
    if (name.empty()) continue;
    if (name.rfind("IBV_QP_", 0) == 0) name = name.substr(7);
    uint32_t bit = 0;
    for (int b = 0; b < emu::qp_attr::kNumBits; ++b)
      if (!emu::qp_attr::bit_name(1u << b).empty() && emu::qp_attr::bit_name(1u << b) == name) bit = 1u << b;
    if (bit == 0) {
      *error = "unknown attribute " + trim(part) + " (names as in IBV_QP_*: STATE, AV, PATH_MTU, ...)";
      return std::nullopt;
    }
    mask |= bit;
  }
  return mask;
}

std::string fsm_table(QpType type) {
  const int ti = emu::type_index(type);
  std::ostringstream o;
  o << "QP state machine of " << emu::to_string(type)
    << " (IBTA 10.3.1, the engine's own table; STATE is implied)\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-6s %-6s %-60s %s\n", "from", "to", "required", "optional");
  o << line;
  for (QpState from : kStates) {
    for (QpState to : kStates) {
      const emu::QpTransition& t = emu::qp_transition(from, to);
      if (!t.valid) continue;
      std::snprintf(line, sizeof line, "%-6s %-6s %-60s %s\n", state(from).c_str(), state(to).c_str(),
                    names(t.req[ti]).c_str(), names(t.opt[ti]).c_str());
      o << line;
    }
  }
  o << "Every other pair is no transition (e.g. RESET->ERR, RTR->RTR). CUR_STATE is\n"
       "allowed only from RTR, RTS, SQD and SQE. The IBTA enters SQE on a UC/UD send error;\n"
       "this engine moves such a QP to ERR instead (so SQE is never entered here).\n";
  return o.str();
}

std::string fsm_dot(QpType type) {
  const int ti = emu::type_index(type);
  std::ostringstream o;
  o << "digraph qp_" << emu::to_string(type) << " {\n"
    << "  label=\"QP state machine of " << emu::to_string(type)
    << " (IBTA 10.3.1): edges name the required attributes\";\n"
    << "  labelloc=t; rankdir=LR; node [shape=circle, fontname=\"Helvetica\"];\n"
    << "  edge [fontname=\"Helvetica\", fontsize=10];\n";
  for (QpState s : kStates) o << "  " << state(s) << ";\n";
  for (QpState from : kStates) {
    for (QpState to : kStates) {
      const emu::QpTransition& t = emu::qp_transition(from, to);
      if (!t.valid) continue;
      const bool escape = (to == QpState::kReset || to == QpState::kErr) && from != to;
      if (escape) {
        o << "  " << state(from) << " -> " << state(to) << " [color=gray70, style=dashed];\n";
        continue;
      }
      std::string label = t.req[ti] ? names(t.req[ti], "\\n") : "";
      if (from == to) label = t.opt[ti] ? "optional:\\n" + names(t.opt[ti], "\\n") : "";
      o << "  " << state(from) << " -> " << state(to) << " [label=\"" << label << "\"];\n";
    }
  }
  o << "}\n";
  return o.str();
}

std::string explain_modify(QpState from, QpState to, QpType type, uint32_t mask) {
  const emu::QpModifyVerdict v = emu::check_qp_modify(from, to, type, mask | emu::qp_attr::kState);
  std::ostringstream o;
  o << v.text(from, to, type) << "\n";
  if (!v.valid_transition) {
    o << "  From " << state(from) << " a " << emu::to_string(type) << " QP can go to:";
    for (QpState s : kStates)
      if (emu::qp_transition(from, s).valid) o << " " << state(s);
    o << "\n";
    return o.str();
  }
  auto each = [&](uint32_t bits, const char* what) {
    for (int b = 0; b < emu::qp_attr::kNumBits; ++b) {
      const uint32_t bit = 1u << b;
      if (!(bits & bit)) continue;
      o << "  " << what << " " << emu::qp_attr::bit_name(bit) << ": " << emu::qp_attr_purpose(bit) << "\n";
    }
  };
  each(v.missing, "missing");
  each(v.not_allowed, "not allowed");
  if (v.cur_state_refused)
    o << "  not allowed CUR_STATE: only from RTR, RTS, SQD or SQE (ib_modify_qp_is_ok)\n";
  const emu::QpTransition& t = emu::qp_transition(from, to);
  const int ti = emu::type_index(type);
  o << "  required: " << names(t.req[ti]) << "\n  optional: " << names(t.opt[ti]) << "\n";
  return o.str();
}

}  // namespace rocelab::sim
