// Text inside SVG and HTML: the five characters markup gives a meaning
// escaped, for element content and double-quoted attribute values.
#pragma once
#include <string>

namespace rocelab::plot {

std::string xml_escape(const std::string& s);

}  // namespace rocelab::plot
