// Fuzz target: `rocelab replay` (src/replay) on a capture file: the plan
// (src/trace's Analyzer, the memory regions, the receives), the replay against
// a live emulated responder on the simulated fabric (every captured request
// remapped, re-encoded and executed by the engine's responder), the comparison
// of its answers with the capture's, and --to-scenario. The input is a capture
// file (the seeds are make_seeds' captures). No crash, no hang, nothing read or
// written outside a buffer, and memory bounded: the live MRs' spans are
// reserved, not allocated (max_span), and the pages written are within
// max_memory.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "replay/replay.h"

using namespace rocelab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input as a file (libpcap reads files): an in-memory one.
  static const int fd = ::memfd_create("fuzz_replay", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  replay::ReplayOptions o;
  o.capture = "/proc/self/fd/" + std::to_string(fd);
  o.as_fast_as_possible = true;
  o.max_memory = 64ull << 20;
  o.on_difference = [](const replay::Difference& d) { (void)d.text.size(); };
  const replay::ReplayResult r = replay::replay_capture(o);
  if (r.status < 0 || r.status > 2) __builtin_trap();  // only the documented exit statuses
  (void)replay::to_scenario(o, "/dev/null");
  return 0;
}
