// `rocelab decode`'s work on one capture file, without the command line:
// read every frame (capture::FrameReader), decode it (RoCEv2 over
// Ethernet/raw IP/SLL/SLL2, or native InfiniBand in ERF), print one line per
// packet (text or JSON), a per-file tally, and feed the per-QP summary.
// tools/cmd_decode.cc is the CLI11 front end; the capture fuzzer
// (tests/fuzz/fuzz_capture_decode.cc) drives the same code.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "decode/decode_summary.h"

namespace rocelab::decode {

// Exit statuses of `rocelab decode`, per file (the command returns the worst).
inline constexpr int kExitOk = 0, kExitBadPackets = 1, kExitUnreadable = 2;

struct DecodeOptions {
  bool json = false;
  bool summary = false;  // feed the Summary passed to decode_capture
};

// Where the lines go: `out` gets each output line (without its newline),
// `err` each diagnostic (without its newline).
struct DecodeSinks {
  std::function<void(std::string_view)> out;
  std::function<void(std::string_view)> err;
};

// Decodes the capture at `path`; returns kExitOk, kExitBadPackets (a malformed
// RoCEv2 packet or a bad ICRC) or kExitUnreadable (not a capture, or damaged).
// `display_name` names the file in the output (usually `path`).
int decode_capture(const DecodeOptions& o, const std::string& path, std::string_view display_name,
                   Summary& summary, const DecodeSinks& sinks);

}  // namespace rocelab::decode
