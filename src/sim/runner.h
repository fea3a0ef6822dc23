// Runs a scenario (scenario.h) on the testbed (testbed.h), step by step,
// checking its expectations, and records the ladder (ladder.h) of everything
// that happened; with a topology (topology.h) on a switched network
// (src/fabric), whose report (fabric_report.h) it returns too.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sim/fabric_report.h"
#include "sim/ladder.h"
#include "sim/scenario.h"

namespace rocelab::sim {

struct SimOptions {
  std::string pcap_path;    // every packet, as sent (empty: none)
  std::string events_path;  // the engine's event log (proto/events.proto)
};

struct SimResult {
  Ladder ladder;                      // as the scenario's ladder filter draws it
  std::optional<FabricReport> fabric; // with a topology: what the network did
  size_t expectations = 0;            // checked
  std::vector<std::string> failures;  // "file:line: expected ..., got ..."
};

// Runs the scenario. Returns false (message in *error) when the run could not
// be set up or continued (an output file cannot be written, a node cannot be
// made): that is exit 2, not a failed expectation.
bool run_scenario(const LoadedScenario& sc, const SimOptions& opt, SimResult* out, std::string* error);

}  // namespace rocelab::sim
