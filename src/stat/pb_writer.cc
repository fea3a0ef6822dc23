#include "stat/pb_writer.h"

namespace rocelab::stat {
namespace {
constexpr uint32_t kVarint = 0, kLengthDelimited = 2;
}

void PbWriter::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void PbWriter::tag(uint32_t field, uint32_t wire_type) { raw_varint(uint64_t{field} << 3 | wire_type); }

void PbWriter::varint(uint32_t field, uint64_t v) {
  if (v == 0) return;
  tag(field, kVarint);
  raw_varint(v);
}

void PbWriter::int64(uint32_t field, int64_t v) {
  // int32 and int64 negative values are ten-byte varints of the 64-bit
  // two's complement, for both types.
  varint(field, static_cast<uint64_t>(v));
}

void PbWriter::length_delimited(uint32_t field, std::string_view b) {
  tag(field, kLengthDelimited);
  raw_varint(b.size());
  out_.append(b);
}

void PbWriter::bytes(uint32_t field, std::string_view b) {
  if (!b.empty()) length_delimited(field, b);
}

void PbWriter::message(uint32_t field, const PbWriter& m) { length_delimited(field, m.out_); }

}  // namespace rocelab::stat
