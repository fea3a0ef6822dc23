#include "stat/proc.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string_view>

namespace rocelab::stat {
namespace {

// The first max bytes of a /proc file; nullopt when it cannot be opened.
std::optional<std::string> read_proc(uint32_t pid, const char* what, size_t max) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + what;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out(max, '\0');
  size_t n = 0;
  while (n < max) {
    ssize_t r = ::read(fd, out.data() + n, max - n);
    if (r <= 0) break;
    n += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(n);
  return out;
}

}  // namespace

std::optional<uint64_t> process_start_ticks(uint32_t pid) {
  auto text = read_proc(pid, "stat", 4096);
  if (!text) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // count fields from the last ')', which ends it: field 3 (state) follows.
  const size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::string_view rest(*text);
  rest.remove_prefix(close + 1);
  int field = 2;
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    if (i >= rest.size()) break;
    ++field;
    const size_t start = i;
    while (i < rest.size() && rest[i] != ' ') ++i;
    if (field == 22) {
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(rest.data() + start, rest.data() + i, v);
      if (ec != std::errc{} || p != rest.data() + i) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

std::string process_comm(uint32_t pid) {
  std::string s = read_proc(pid, "comm", 64).value_or("");
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string process_cmdline(uint32_t pid, size_t max_len) {
  std::string s = read_proc(pid, "cmdline", max_len).value_or("");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s)
    if (c == '\0') c = ' ';
  return s;
}

}  // namespace rocelab::stat
