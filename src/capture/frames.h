// Walking a capture file frame by frame: the one loop under `rocelab decode`,
// `check`, `replay` and the capture ladder. FrameReader numbers the frames
// (from 1, as Wireshark does), turns libpcap's failures into one text, and
// stops at the end of the file or at a damaged record, saying which;
// for_each_roce_frame adds src/wire's decoding and skips what is not RoCEv2.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "capture/pcap_reader.h"
#include "wire/frame.h"

namespace rocelab::capture {

struct Frame {
  uint64_t number = 0;              // 1 for the first frame of the file
  std::chrono::nanoseconds ts{0};   // since the Unix epoch, as the capture says
  std::span<const std::byte> data;  // caplen bytes; valid until the next next()
  uint32_t orig_len = 0;            // length on the wire
};

class FrameReader {
 public:
  // nullopt when path cannot be read as a capture; *error then says why:
  // "No such file or directory", "not a pcap or pcapng capture (unknown file
  // format)".
  static std::optional<FrameReader> open(const std::string& path, std::string* error);

  int link_type() const { return reader_.link_type(); }  // DLT_ value (pcap_reader.h)
  std::string link_type_name() const { return reader_.link_type_name(); }  // "EN10MB", "ERF"

  // The next frame; nullptr at the end of the file, or at a damaged record:
  // then damaged() holds libpcap's text.
  const Frame* next();

  uint64_t frames() const { return frame_.number; }  // read so far
  const std::string& damaged() const { return damaged_; }

 private:
  explicit FrameReader(PcapReader r) : reader_(std::move(r)) {}
  PcapReader reader_;
  Frame frame_;
  std::string damaged_;
};

struct CaptureRead {
  uint64_t frames = 0, packets = 0;  // frames read; RoCEv2 packets among them
  bool readable = true;              // false: could not be opened as a capture
  std::string damaged;               // non-empty: the file ends in a damaged record (what libpcap said)
};

// Streams a capture: f(frame number, timestamp, decoded frame) for each RoCEv2
// packet (wire::decode_frame; compute_icrc: whether it computes the ICRC,
// which a caller that does not judge it can skip); other frames are counted
// and skipped. *error gets the reason when path cannot be opened.
template <class F>
CaptureRead for_each_roce_frame(const std::string& path, bool compute_icrc, std::string* error, F&& f) {
  CaptureRead r;
  auto reader = FrameReader::open(path, error);
  if (!reader) {
    r.readable = false;
    return r;
  }
  const int link = reader->link_type();
  while (const Frame* fr = reader->next()) {
    auto d = wire::decode_frame(link, fr->data, compute_icrc);
    if (!d) continue;  // not RoCEv2 (rocelab decode says what the others are)
    ++r.packets;
    f(fr->number, fr->ts, *d);
  }
  r.frames = reader->frames();
  r.damaged = reader->damaged();
  return r;
}

}  // namespace rocelab::capture
