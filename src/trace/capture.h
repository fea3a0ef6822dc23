// Feeding a capture file to the Analyzer (check.h): libpcap reads it,
// wire::decode_frame decodes each frame; what is not RoCEv2 is skipped.
#pragma once
#include <cstdint>
#include <string>

#include "trace/check.h"
#include "wire/frame.h"
#include "wire/pcap_reader.h"

namespace rocelab::trace {

struct CaptureRead {
  uint64_t frames = 0, packets = 0;  // frames read; RoCEv2 packets among them
  bool readable = true;              // false: could not be opened as a capture
  std::string damaged;               // non-empty: the file ends in a damaged record (what libpcap said)
};

// Streams a capture through libpcap: f(frame number, timestamp, decoded frame)
// for each RoCEv2 packet (wire::decode_frame; compute_icrc: whether it computes
// the ICRC, which a caller that does not judge it can skip); other frames are
// counted and skipped. *error gets the reason when path cannot be opened.
template <class F>
CaptureRead for_each_roce_frame(const std::string& path, bool compute_icrc, std::string* error, F&& f) {
  CaptureRead r;
  std::string detail;
  auto reader = wire::PcapReader::open(path, &detail);
  if (!reader) {
    r.readable = false;
    *error = detail.empty() ? reader.error().message() : detail;
    return r;
  }
  const int link = reader->link_type();
  for (;;) {
    auto next = reader->next(&detail);
    if (!next) {
      r.damaged = detail.empty() ? next.error().message() : detail;
      return r;
    }
    if (!next->has_value()) return r;
    ++r.frames;
    auto d = wire::decode_frame(link, (**next).data, compute_icrc);
    if (!d) continue;  // not RoCEv2 (rocelab decode says what the others are)
    ++r.packets;
    f(r.frames, (**next).ts, *d);
  }
}

// Reads path to its end (or to the damage) into an. *error gets the reason
// when the file cannot be opened as a capture.
CaptureRead analyze_capture(const std::string& path, Analyzer& an, std::string* error);

}  // namespace rocelab::trace
