// The QP state machine for teaching: the engine's own transition table
// (emu/qp_state.h, one source of truth) as a terminal table and as Graphviz
// DOT, and a modify_qp verdict explained attribute by attribute.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "emu/qp_state.h"
#include "emu/verbs_types.h"

namespace rocelab::sim {

// "rc"/"RC", "INIT"/"init" ...; nullopt for anything else.
std::optional<emu::QpType> parse_qp_type(std::string_view text);
std::optional<emu::QpState> parse_qp_state(std::string_view text);

// An attribute mask: names separated by ',' or '|' ("STATE,AV,PATH_MTU",
// "IBV_QP_STATE|IBV_QP_AV"), or a number ("0x181"). On an unknown name returns
// nullopt and says which in *error.
std::optional<uint32_t> parse_attr_mask(std::string_view text, std::string* error);

// Every transition of `type`: from, to, required and optional attributes.
std::string fsm_table(emu::QpType type);

// The same as a Graphviz digraph: the states, each transition labelled with
// its required attributes; the edges every state has to RESET and ERR drawn
// light and unlabelled.
std::string fsm_dot(emu::QpType type);

// The verdict on modify_qp from -> to with `mask`, explained: allowed or not,
// each missing attribute with what it is for, each attribute that may not be
// given, and what else could be given.
std::string explain_modify(emu::QpState from, emu::QpState to, emu::QpType type, uint32_t mask);

}  // namespace rocelab::sim
