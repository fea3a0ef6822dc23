// Helpers for the tests that run programs: rocelab itself, tshark, python.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "capture/pcap_reader.h"
#include "wire/frame.h"

namespace rocelab::wire::testutil {

inline const std::string kOpcodesPcap = std::string(ROCELAB_SOURCE_DIR) + "/traces/opcodes.pcap";
inline const std::string kRocelab = ROCELAB_BIN;
inline constexpr int kOpcodesPackets = 41;

struct Output {
  int status = -1;
  std::string out, err;
};

inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "rocelab_tools_" + std::to_string(::getpid()) + "_" + name;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline Output run(const std::string& cmd) {
  const std::string err = temp_path("stderr");
  Output r;
  FILE* p = ::popen((cmd + " 2>" + quote(err)).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  ::unlink(err.c_str());
  return r;
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

inline std::vector<DecodedFrame> decode_file(const std::string& path, std::vector<std::string>& storage) {
  std::vector<DecodedFrame> out;
  auto r = capture::PcapReader::open(path);
  EXPECT_TRUE(r) << path;
  if (!r) return out;
  storage.reserve(1024);  // frames point into storage: no reallocation
  for (;;) {
    auto f = r->next();
    if (!f || !f->has_value()) break;
    storage.emplace_back(reinterpret_cast<const char*>((*f)->data.data()), (*f)->data.size());
    auto d = decode_frame(r->link_type(), std::as_bytes(std::span(storage.back())));
    EXPECT_TRUE(d) << path << " frame " << storage.size();
    if (d) out.push_back(*d);
  }
  return out;
}

inline uint64_t num(const std::string& s, int base = 0) { return std::stoull(s, nullptr, base); }

}  // namespace rocelab::wire::testutil
