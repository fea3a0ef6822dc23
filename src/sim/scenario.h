// Loading a teaching scenario (proto/scenario.proto, textproto): parse, then
// check every name and value before anything runs, so that a mistake is
// reported as file:line and exit 2, not half way through a run.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/scenario.pb.h"

namespace rocelab::sim {

struct LoadedScenario {
  scenario::Scenario s;
  std::string path;           // as given (for messages)
  std::vector<int> step_line; // 1-based source line of each step (0: unknown)
  // "path:line" of step i, for messages.
  std::string where(size_t step) const;
};

// Parses and checks text (named `path` in messages). On failure returns
// nullopt and writes "path:line: what is wrong" to *error.
std::optional<LoadedScenario> parse_scenario(std::string_view text, const std::string& path,
                                             std::string* error);
// Reads the file, then parse_scenario. An unreadable file: "path: <strerror>".
std::optional<LoadedScenario> load_scenario(const std::string& path, std::string* error);

}  // namespace rocelab::sim
