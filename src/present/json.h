// JSON output: every `--json` of rocelab (decode, check, replay) and the data
// of the ladders' HTML pages are nlohmann::json objects, written here. Keys
// stay in the order they are set (ordered_json), so a line reads as its
// text counterpart does. (`rocelab events --json` prints Protobuf messages
// with Protobuf's own JSON mapping: proto/events.proto is their schema.)
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace rocelab::present {

using Json = nlohmann::ordered_json;

// j on one line, without spaces. Bytes of a string that are not valid UTF-8
// (a file name can hold any byte) are written as U+FFFD.
std::string json_line(const Json& j);

// j for a <script> element of an HTML page: as json_line, with every '<'
// written \u003c, so that no "</script>" or "<!--" in a string ends or
// changes the script.
std::string json_for_script(const Json& j);

}  // namespace rocelab::present
