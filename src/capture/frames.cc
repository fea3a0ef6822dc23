#include "capture/frames.h"

namespace rocelab::capture {

std::optional<FrameReader> FrameReader::open(const std::string& path, std::string* error) {
  std::string detail;
  auto r = PcapReader::open(path, &detail);
  if (!r) {
    std::string why = r.error().message();
    if (!detail.empty() && detail != why) why += " (" + detail + ")";
    *error = why;
    return std::nullopt;
  }
  return FrameReader(std::move(*r));
}

const Frame* FrameReader::next() {
  if (!damaged_.empty()) return nullptr;
  std::string detail;
  auto n = reader_.next(&detail);
  if (!n) {
    damaged_ = detail.empty() ? n.error().message() : detail;
    return nullptr;
  }
  if (!n->has_value()) return nullptr;
  ++frame_.number;
  frame_.ts = (*n)->ts;
  frame_.data = (*n)->data;
  frame_.orig_len = (*n)->orig_len;
  return &frame_;
}

}  // namespace rocelab::capture
