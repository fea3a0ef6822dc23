// Feeding a capture file to the Analyzer (check.h): libpcap reads it,
// wire::decode_frame decodes each frame; what is not RoCEv2 is skipped.
#pragma once
#include <cstdint>
#include <string>

#include "trace/check.h"

namespace rocelab::trace {

struct CaptureRead {
  uint64_t frames = 0, packets = 0;  // frames read; RoCEv2 packets among them
  bool readable = true;              // false: could not be opened as a capture
  std::string damaged;               // non-empty: the file ends in a damaged record (what libpcap said)
};

// Reads path to its end (or to the damage) into an. *error gets the reason
// when the file cannot be opened as a capture.
CaptureRead analyze_capture(const std::string& path, Analyzer& an, std::string* error);

}  // namespace rocelab::trace
