// Fuzz target: capture reading and everything that judges or draws a capture —
// libpcap through capture::PcapReader, wire::decode_frame, `rocelab check`'s
// Analyzer (src/trace) and `rocelab ladder`'s drawing (src/sim). The input is
// a capture file (the seeds are make_seeds' captures). No crash, no hang,
// nothing read outside a buffer.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/capture_ladder.h"
#include "trace/capture.h"

using namespace rocelab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input as a file (libpcap reads files): an in-memory one.
  static const int fd = ::memfd_create("fuzz_capture", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  trace::Analyzer an;
  std::string error;
  (void)trace::analyze_capture(path, an, &error);
  an.finish();
  (void)an.spaces();
  sim::CaptureLadder cl;
  if (sim::ladder_from_capture(path, 200, &cl, &error)) {
    (void)sim::render_text(cl.ladder);
    (void)sim::render_html(cl.ladder, "fuzz");
  }
  return 0;
}
