// Fuzz target: a capture file through libpcap (capture::PcapReader) and the whole
// of `rocelab decode` (src/decode: per-packet text and JSON lines, malformed
// packets, the per-file tally, the per-QP summary). The input is the file.
//
// Invariants: the status is one of decode's exit codes; every output line is
// one line (no newline inside); every JSON line is one object ({...}) without
// raw control characters; the summary is printable in both forms.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "decode/capture_decode.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

int g_fd = -1;
std::string g_path;

void check_line(std::string_view s, bool json) {
  ROCELAB_FUZZ_CHECK(s.find('\n') == std::string_view::npos, "a newline inside an output line");
  if (!json) return;
  ROCELAB_FUZZ_CHECK(s.size() >= 2 && s.front() == '{' && s.back() == '}', "JSON line is not an object");
  for (char c : s)
    ROCELAB_FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20, "raw control character in JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_fd < 0) {
    // An in-memory file: libpcap opens it by name like any capture.
    g_fd = memfd_create("fuzz-capture", 0);
    ROCELAB_FUZZ_CHECK(g_fd >= 0, "memfd_create failed");
    g_path = "/proc/self/fd/" + std::to_string(g_fd);
  }
  ROCELAB_FUZZ_CHECK(ftruncate(g_fd, 0) == 0, "ftruncate failed");
  size_t off = 0;
  while (off < size) {
    const ssize_t n = pwrite(g_fd, data + off, size - off, static_cast<off_t>(off));
    ROCELAB_FUZZ_CHECK(n > 0, "pwrite failed");
    off += static_cast<size_t>(n);
  }
  for (const bool json : {false, true}) {
    rocelab::decode::DecodeOptions o;
    o.json = json;
    o.summary = true;
    rocelab::decode::Summary summary;
    const rocelab::decode::DecodeSinks sinks{[json](std::string_view s) { check_line(s, json); },
                                             [](std::string_view s) { check_line(s, false); }};
    const int status = rocelab::decode::decode_capture(o, g_path, "fuzz.pcap", summary, sinks);
    ROCELAB_FUZZ_CHECK(status == rocelab::decode::kExitOk ||
                           status == rocelab::decode::kExitBadPackets ||
                           status == rocelab::decode::kExitUnreadable,
                       "decode returned an undocumented status");
    if (json) {
      for (const std::string& line : summary.json()) check_line(line, true);
    } else {
      (void)summary.text();
    }
  }
  return 0;
}
