#include "sim/names.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "emu/records.h"

namespace rocelab::sim {

namespace {

std::string norm(std::string_view s, std::string_view prefix) {
  std::string u;
  for (char c : s) u += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  if (u.rfind(prefix, 0) == 0) u.erase(0, prefix.size());
  return u;
}

template <typename E>
std::optional<E> by_name(std::string_view name, std::string_view prefix, int lo, int hi) {
  const std::string n = norm(name, prefix);
  for (int v = lo; v <= hi; ++v) {
    const E e = static_cast<E>(v);
    const std::string_view s = emu::to_string(e);
    if (!s.empty() && s != "?" && norm(s, "") == n) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<unsigned> parse_access(std::string_view name) {
  const std::string n = norm(name, "IBV_ACCESS_");
  if (n == "LOCAL_WRITE") return emu::access::kLocalWrite;
  if (n == "REMOTE_WRITE") return emu::access::kRemoteWrite;
  if (n == "REMOTE_READ") return emu::access::kRemoteRead;
  if (n == "REMOTE_ATOMIC") return emu::access::kRemoteAtomic;
  if (n == "MW_BIND") return emu::access::kMwBind;
  if (n == "ZERO_BASED") return emu::access::kZeroBased;
  return std::nullopt;
}

std::optional<emu::WrOpcode> parse_wr_opcode(std::string_view name) {
  return by_name<emu::WrOpcode>(name, "IBV_WR_", 0, 9);
}

std::optional<emu::WcStatus> parse_wc_status(std::string_view name) {
  return by_name<emu::WcStatus>(name, "IBV_WC_", 0, 21);
}

std::optional<emu::WcOpcode> parse_wc_opcode(std::string_view name) {
  if (auto o = by_name<emu::WcOpcode>(name, "IBV_WC_", 0, 6)) return o;
  return by_name<emu::WcOpcode>(name, "IBV_WC_", 128, 129);
}

std::optional<int> parse_errno(std::string_view name) {
  const std::string n = norm(name, "");
  for (int e = 1; e < 134; ++e) {
    const char* s = strerrorname_np(e);
    if (s && n == s) return e;
  }
  return std::nullopt;
}

bool counter_known(std::string_view name) {
  bool found = false;
  emu::Counters{}.for_each([&](std::string_view n, uint64_t) { found = found || n == name; });
  return found;
}

}  // namespace rocelab::sim
