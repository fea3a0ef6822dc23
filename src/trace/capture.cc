#include "trace/capture.h"

#include "wire/frame.h"
#include "wire/pcap_reader.h"

namespace rocelab::trace {

CaptureRead analyze_capture(const std::string& path, Analyzer& an, std::string* error) {
  CaptureRead r;
  std::string detail;
  auto reader = wire::PcapReader::open(path, &detail);
  if (!reader) {
    r.readable = false;
    *error = detail.empty() ? reader.error().message() : detail;
    return r;
  }
  const int link = reader->link_type();
  std::string src, dst;
  for (;;) {
    auto next = reader->next(&detail);
    if (!next) {
      r.damaged = detail.empty() ? next.error().message() : detail;
      return r;
    }
    if (!next->has_value()) return r;
    const wire::CapturedFrame& f = **next;
    ++r.frames;
    auto d = wire::decode_frame(link, f.data);
    if (!d) continue;  // not RoCEv2 (rocelab decode says what the others are)
    ++r.packets;
    src = d->ip.info.src.to_string();
    dst = d->ip.info.dst.to_string();
    TracePacket tp;
    tp.number = r.frames;
    tp.time = f.ts;
    tp.src = src;
    tp.dst = dst;
    tp.tclass = d->ip.info.tclass;
    tp.packet = &d->roce;
    tp.icrc_ok = d->icrc_ok();
    an.add(tp);
  }
}

}  // namespace rocelab::trace
