// Internal: the QP state transition table of qp_state_table.md (Linux
// ib_modify_qp_is_ok), as data. Exposed for the exhaustive test.
#pragma once
#include <cstdint>

#include "emu/verbs_types.h"

namespace rocelab::emu {

struct QpTransition {
  bool valid = false;
  uint32_t req[3] = {0, 0, 0};  // indexed by type_index(): RC, UC, UD
  uint32_t opt[3] = {0, 0, 0};
};

constexpr int type_index(QpType t) { return t == QpType::kRC ? 0 : t == QpType::kUC ? 1 : 2; }

// The transition from -> to (without the implicit STATE bit).
const QpTransition& qp_transition(QpState from, QpState to);

// ib_modify_qp_is_ok: the transition is valid, mask holds every required bit,
// and nothing but required, optional and STATE bits; CUR_STATE only from RTR,
// RTS, SQD or SQE.
bool qp_modify_is_ok(QpState cur, QpState next, QpType type, uint32_t mask);

}  // namespace rocelab::emu
