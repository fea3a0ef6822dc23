#include "trace/capture.h"

namespace rocelab::trace {

CaptureRead analyze_capture(const std::string& path, Analyzer& an, std::string* error) {
  std::string src, dst;
  return capture::for_each_roce_frame(path, true, error, [&](uint64_t number, auto ts, const wire::DecodedFrame& d) {
    src = d.ip.info.src.to_string();
    dst = d.ip.info.dst.to_string();
    TracePacket tp;
    tp.number = number;
    tp.time = ts;
    tp.src = src;
    tp.dst = dst;
    tp.tclass = d.ip.info.tclass;
    tp.packet = &d.roce;
    tp.icrc_ok = d.icrc_ok();
    an.add(tp);
  });
}

}  // namespace rocelab::trace
