// The words a scenario uses for the verbs vocabulary: the names `rocelab`
// prints (emu's to_string) read back, case-insensitively, with or without the
// IBV_ / IBV_WR_ / IBV_WC_ / IBV_ACCESS_ prefix.
#pragma once
#include <optional>
#include <string_view>

#include "emu/verbs_types.h"

namespace rocelab::sim {

std::optional<unsigned> parse_access(std::string_view name);  // one access:: bit
std::optional<emu::WrOpcode> parse_wr_opcode(std::string_view name);
std::optional<emu::WcStatus> parse_wc_status(std::string_view name);
std::optional<emu::WcOpcode> parse_wc_opcode(std::string_view name);
std::optional<int> parse_errno(std::string_view name);  // "EINVAL" -> EINVAL
bool counter_known(std::string_view name);             // a Counters field name

}  // namespace rocelab::sim
