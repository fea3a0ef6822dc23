// Internal: the QP state transition table of qp_state_table.md (Linux
// ib_modify_qp_is_ok), as data. Exposed for the exhaustive test.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "emu/verbs_types.h"

namespace rocelab::emu {

struct QpTransition {
  bool valid = false;
  uint32_t req[5] = {0, 0, 0, 0, 0};  // indexed by type_index(): RC, UC, UD, XRC_INI, XRC_TGT
  uint32_t opt[5] = {0, 0, 0, 0, 0};
};

constexpr int type_index(QpType t) {
  switch (t) {
    case QpType::kRC: return 0;
    case QpType::kUC: return 1;
    case QpType::kUD: return 2;
    case QpType::kXrcIni: return 3;
    case QpType::kXrcTgt: return 4;
  }
  return 0;
}

// The transition from -> to (without the implicit STATE bit).
const QpTransition& qp_transition(QpState from, QpState to);

// ib_modify_qp_is_ok: the transition is valid, mask holds every required bit,
// and nothing but required, optional and STATE bits; CUR_STATE only from RTR,
// RTS, SQD or SQE.
bool qp_modify_is_ok(QpState cur, QpState next, QpType type, uint32_t mask);

// Why a modify is refused, from the same table: what a teacher (rocelab fsm
// check) and a refused verb (the engine's refusal reason) show.
struct QpModifyVerdict {
  bool ok = false;
  bool valid_transition = false;  // from -> to is in the table at all
  bool cur_state_refused = false; // CUR_STATE given outside RTR/RTS/SQD/SQE
  uint32_t missing = 0;           // required bits the mask lacks
  uint32_t not_allowed = 0;       // bits neither required nor optional (nor STATE)
  // One line: "modify_qp INIT->RTR on RC: missing PATH_MTU, DEST_QPN".
  std::string text(QpState from, QpState to, QpType type) const;
};
QpModifyVerdict check_qp_modify(QpState cur, QpState next, QpType type, uint32_t mask);

// What an attribute is for, in a line: "AV: the peer's address (GID) ...".
std::string_view qp_attr_purpose(uint32_t bit);

}  // namespace rocelab::emu
