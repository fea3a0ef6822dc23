// The checks of one stream (property_check.h).
#include "tests/emu/property_check.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string_view>
#include <vector>

namespace rocelab::emu::test {

namespace {

std::string fmt(const char* f, auto... args) {
  char b[512];
  std::snprintf(b, sizeof b, f, args...);
  return b;
}

std::string status_name(WcStatus s) { return std::string(to_string(s)); }

// The first offset where a and b differ, or npos.
size_t first_diff(std::span<const std::byte> a, std::span<const std::byte> b) {
  const auto m = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return m.first == a.end() && m.second == b.end() ? std::string::npos
                                                   : static_cast<size_t>(m.first - a.begin());
}

}  // namespace

std::string StreamChecker::op_name(size_t i) const {
  const Op& op = plan_.ops[i];
  return fmt("WR %zu (%s, %u bytes)", i, to_string(op.kind), op.len);
}

// The header a SEND/WRITE source starts with, decoded: which message landed.
std::string StreamChecker::name_message(std::span<const std::byte> bytes) const {
  if (bytes.size() < kHeaderLen) return "";
  uint32_t h[3];
  std::memcpy(h, bytes.data(), kHeaderLen);
  if (h[0] != kHeaderMagic) return "";
  return fmt(" (it holds the start of stream %u WR %u)", h[1], h[2]);
}

std::string StreamChecker::on_send(const Wc& wc) {
  const size_t n = plan_.ops.size();
  if (wc.wr_id < n && wc.status != WcStatus::kSuccess) {
    return fmt("%s completed with %s (vendor_err %u)", op_name(wc.wr_id).c_str(),
               status_name(wc.status).c_str(), wc.vendor_err);
  }
  if (done_ == n) {
    return fmt("unexpected send completion wr_id %" PRIu64 " after all %zu WRs completed", wc.wr_id, n);
  }
  size_t next = done_;
  while (!plan_.ops[next].signaled) ++next;  // the last WR is always signaled
  if (wc.wr_id != next) {
    return fmt("send completion wr_id %" PRIu64 " (%s) where %s was next: duplicated, lost or out of order",
               wc.wr_id, status_name(wc.status).c_str(), op_name(next).c_str());
  }
  if (wc.status != WcStatus::kSuccess) {
    return fmt("%s completed with %s", op_name(next).c_str(), status_name(wc.status).c_str());
  }
  if (wc.opcode != wc_opcode(plan_.ops[next].kind)) {
    return fmt("%s completed with opcode %s", op_name(next).c_str(), std::string(to_string(wc.opcode)).c_str());
  }
  done_ = next + 1;
  return "";
}

std::string StreamChecker::on_recv(const Wc& wc, std::span<const std::byte> remote) {
  if (recv_done_ == plan_.recvs.size()) {
    return fmt("unexpected receive completion wr_id %" PRIu64 " (%s, byte_len %u) after all %zu receives completed",
               wc.wr_id, status_name(wc.status).c_str(), wc.byte_len, plan_.recvs.size());
  }
  const size_t i = recv_done_;
  const RecvPlan& rp = plan_.recvs[i];
  const Op& op = plan_.ops[rp.op];
  const std::string who = fmt("receive %zu (for %s)", i, op_name(rp.op).c_str());
  if (wc.wr_id != i) {
    return fmt("receive completion wr_id %" PRIu64 " (byte_len %u) where %s was next: duplicated, lost or out of order",
               wc.wr_id, wc.byte_len, who.c_str());
  }
  if (wc.status != WcStatus::kSuccess) return who + " completed with " + status_name(wc.status);
  const WcOpcode want_op = op.kind == OpKind::kWriteImm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
  if (wc.opcode != want_op) return who + " completed with opcode " + std::string(to_string(wc.opcode));
  if (wc.byte_len != op.len) return who + fmt(" has byte_len %u", wc.byte_len);
  const bool imm = (wc.wc_flags & wc_flags::kWithImm) != 0;
  if (imm != has_imm(op.kind)) return who + (imm ? " has" : " lacks") + " IBV_WC_WITH_IMM";
  if (imm && wc.imm_data != op.imm) return who + fmt(" has imm_data 0x%08x, want 0x%08x", wc.imm_data, op.imm);
  const auto want = plan_.expected_recv(i);
  const auto got = remote.subspan(rp.off, rp.cap);
  if (const size_t d = first_diff(got, want); d != std::string::npos) {
    return who + fmt(": byte %zu of its buffer is 0x%02x, want 0x%02x", d, static_cast<unsigned>(got[d]),
                     static_cast<unsigned>(want[d])) + name_message(got);
  }
  ++recv_done_;
  return "";
}

// Names the range an offset of the local or remote MR belongs to.
std::string StreamChecker::what_is_at(bool local, uint64_t off) const {
  for (size_t i = 0; i < plan_.ops.size(); ++i) {
    const Op& op = plan_.ops[i];
    const uint64_t start = local ? op.local_off : op.remote_off;
    const bool has_remote = op.kind == OpKind::kRead || is_write(op.kind) || is_atomic(op.kind);
    if ((local || has_remote) && off >= start && off < start + std::max<uint32_t>(op.len, 1)) {
      return fmt("%s + %" PRIu64, op_name(i).c_str(), off - start);
    }
  }
  if (!local) {
    for (size_t i = 0; i < plan_.recvs.size(); ++i) {
      const RecvPlan& rp = plan_.recvs[i];
      if (off >= rp.off && off < rp.off + rp.cap) return fmt("receive %zu + %" PRIu64, i, off - rp.off);
    }
  }
  return "no WR's range (a stray write)";
}

std::string StreamChecker::check_local(std::span<const std::byte> local) const {
  const auto want = plan_.final_local();
  const size_t d = first_diff(local, want);
  if (d == std::string::npos) return "";
  return fmt("local memory byte %zu (%s) is 0x%02x, want 0x%02x", d, what_is_at(true, d).c_str(),
             static_cast<unsigned>(local[d]), static_cast<unsigned>(want[d]));
}

std::string StreamChecker::check_remote(std::span<const std::byte> remote) const {
  const auto want = plan_.final_remote();
  const size_t d = first_diff(remote, want);
  if (d == std::string::npos) return "";
  return fmt("remote memory byte %zu (%s) is 0x%02x, want 0x%02x", d, what_is_at(false, d).c_str(),
             static_cast<unsigned>(remote[d]), static_cast<unsigned>(want[d]));
}

}  // namespace rocelab::emu::test
