// The Protobuf wire format (varints, fixed-length and length-delimited fields),
// written without libprotobuf: the verbs shim answers `rocelab stat` in
// proto/stat.proto's format from inside programs it is preloaded into, where
// libprotobuf must not be loaded (the event-log plugin's header says why).
// Only what encode.cc needs: no reading, no groups.
// Fields with their default value are left out, as proto3 writes them.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace rocelab::stat {

class PbWriter {
 public:
  void varint(uint32_t field, uint64_t v);  // uint32, uint64, bool, enum
  void int64(uint32_t field, int64_t v);   // int32, int64 (two's complement)
  void bytes(uint32_t field, std::string_view b);  // string, bytes
  // A nested message, as one length-delimited field; written even when empty
  // (an element of a repeated field is there although all its fields are default).
  void message(uint32_t field, const PbWriter& m);
  // A bare varint, no tag: the elements of a packed repeated field, which
  // bytes() then writes as one field.
  void raw(uint64_t v) { raw_varint(v); }

  const std::string& data() const { return out_; }

 private:
  void tag(uint32_t field, uint32_t wire_type);
  void length_delimited(uint32_t field, std::string_view b);
  void raw_varint(uint64_t v);
  std::string out_;
};

}  // namespace rocelab::stat
