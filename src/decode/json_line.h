// One JSON object on one line, without a JSON library: keys are our own
// literals, strings are escaped (RFC 8259 §7), numbers are printed as numbers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace rocelab::decode {

// Appends s as a JSON string literal. Control characters become \u00XX; bytes
// that are not valid UTF-8 (a file name can hold any byte) become U+FFFD.
void append_json_string(std::string& out, std::string_view s);

class JsonLine {
 public:
  JsonLine() : s_("{") {}
  JsonLine& str(std::string_view key, std::string_view v) {
    append_json_string(key_(key), v);
    return *this;
  }
  JsonLine& num(std::string_view key, uint64_t v) {
    key_(key) += std::to_string(v);
    return *this;
  }
  JsonLine& boolean(std::string_view key, bool v) {
    key_(key) += v ? "true" : "false";
    return *this;
  }
  // v must already be valid JSON (a nested object, an array, a formatted number).
  JsonLine& raw(std::string_view key, std::string_view v) {
    key_(key) += v;
    return *this;
  }
  std::string done() { return s_ + "}"; }

 private:
  std::string& key_(std::string_view key) {
    if (s_.size() > 1) s_ += ',';
    append_json_string(s_, key);
    s_ += ':';
    return s_;
  }
  std::string s_;
};

}  // namespace rocelab::decode
