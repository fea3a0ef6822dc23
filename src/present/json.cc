#include "present/json.h"

namespace rocelab::present {

std::string json_line(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string json_for_script(const Json& j) {
  const std::string s = json_line(j);
  std::string out;
  out.reserve(s.size());
  // '<' appears in JSON only inside strings, where \u003c means the same character.
  for (char c : s) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace rocelab::present
