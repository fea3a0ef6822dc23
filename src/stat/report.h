// What `rocelab stat` prints of the registry's entries (client.h): tables
// for people, Protobuf's JSON mapping of stat.proto's Host for programs.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stat/client.h"

namespace rocelab::stat {

// The Host message of the live entries, with the problems of the others.
Host host_of(const std::vector<Entry>& entries);

// One JSON object (stat.proto's Host, field names as in the schema, every
// field present).
std::string host_json(const Host& h);

// The tables: a line per device (its process, address, object counts and
// non-zero counters), then a line per QP.
std::string host_table(const Host& h);

// Every QP numbered qpn (one per device at most; several devices may have
// one), each in full: its attributes, PSNs, retries and counters. Empty when
// there is none.
std::string qp_detail(const Host& h, uint32_t qpn);

}  // namespace rocelab::stat
