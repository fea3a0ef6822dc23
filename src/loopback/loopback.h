// `rocelab loopback`'s workload (tools/cmd_loopback.cc is its command line):
// two emulated devices of one testbed (src/testbed) — on real UDP sockets
// (127.0.0.x) or the simulated fabric — run traffic and every byte is checked.
// An error completion on the requester moves its QP to the error state, as on
// a NIC: the run stops there (the operations left are not posted); no wait
// outlives the error. UC and UD do not retransmit: with faults injected, a
// message that does not arrive is counted as lost (not an error); every
// message that does arrive must still be whole and byte-exact.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "emu/transport/fault_config.h"
#include "emu/transport/fault_injector.h"

namespace rocelab::loopback {

struct Options {
  std::string transport = "udp";  // udp or sim
  std::string qp_type = "rc";     // rc, uc or ud
  std::string op = "all";         // send, write, read, atomic or all (those of the QP type)
  uint32_t size = 4096;
  uint32_t count = 10;            // operations of each kind
  uint32_t mtu = 1024;
  std::string pcap, events;       // files: every packet, the engine event log
  std::string pcap_at = "tx";     // tx or rx
  std::string fault_log;          // what the fault injectors did, a line per packet
  bool counters = false;          // Summary::counters
  int retry_cnt = 7;
  bool retry_forever = false;
  int timeout = 14;
  emu::FaultConfig faults;
  // Each of the first 10 failed checks, as it happens.
  std::function<void(const std::string&)> on_failure;
};

struct Summary {
  double seconds = 0;
  uint64_t ops = 0, bytes = 0, errors = 0;
  std::string stop_reason;       // the run stopped at an operation that failed: why ("" if it did not)
  uint64_t not_run = 0;          // operations not posted because of it
  bool lossy = false;            // UC/UD under faults: the counts below
  uint64_t delivered = 0, lost = 0, repeated = 0;
  struct DeviceCounters {
    std::string device;
    std::vector<std::pair<std::string, uint64_t>> nonzero;
  };
  std::vector<DeviceCounters> counters;  // Options::counters: each device's nonzero counters
  std::vector<emu::FaultStats> faults;   // each fault injector's (with faults)
};

// The run. Fails (returns false, *error says why) only when it cannot run: a
// combination the QP type does not have, a file that cannot be written, a
// device that cannot be made. Otherwise *summary says how it went; it passed
// when summary->errors is 0.
bool run(const Options& o, Summary* summary, std::string* error);

}  // namespace rocelab::loopback
