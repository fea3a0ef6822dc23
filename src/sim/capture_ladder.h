// A ladder diagram (ladder.h) from a capture: one lane per IP address that
// sends or receives RoCEv2, an arrow per packet at its capture time (relative
// to the first packet), so a class can look at a real NIC's trace the way it
// looks at a simulation. What the capture cannot tell is not drawn: a capture
// taken at one point shows packets that passed that point, so every arrow
// arrives (no ✗), and a retransmission is a request PSN seen before.
#pragma once
#include <cstddef>
#include <string>

#include "sim/ladder.h"

namespace rocelab::sim {

struct CaptureLadder {
  Ladder ladder;
  size_t roce_packets = 0;     // RoCEv2 packets read
  size_t other_frames = 0;     // frames that are not RoCEv2 (skipped)
  size_t bad_packets = 0;      // on port 4791 but undecodable (noted on the ladder)
  size_t not_drawn = 0;        // beyond max_packets
  std::string damaged;         // the capture ended in a damaged record: what libpcap said
};

// Reads path; draws at most max_packets packets (the rest are counted). false
// with a message in *error when the file cannot be opened or is not a capture.
bool ladder_from_capture(const std::string& path, size_t max_packets, CaptureLadder* out, std::string* error);

}  // namespace rocelab::sim
