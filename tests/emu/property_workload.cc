// The random scenario of one seed and its expected memory images
// (property_workload.h).
#include "tests/emu/property_workload.h"

#include <algorithm>
#include <cstdio>

namespace rocelab::emu::test {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kSend: return "SEND";
    case OpKind::kSendImm: return "SEND_WITH_IMM";
    case OpKind::kWrite: return "RDMA_WRITE";
    case OpKind::kWriteImm: return "RDMA_WRITE_WITH_IMM";
    case OpKind::kRead: return "RDMA_READ";
    case OpKind::kFetchAdd: return "FETCH_ADD";
    case OpKind::kCmpSwap: return "CMP_SWP";
  }
  return "?";
}

WrOpcode wr_opcode(OpKind k) {
  switch (k) {
    case OpKind::kSend: return WrOpcode::kSend;
    case OpKind::kSendImm: return WrOpcode::kSendWithImm;
    case OpKind::kWrite: return WrOpcode::kRdmaWrite;
    case OpKind::kWriteImm: return WrOpcode::kRdmaWriteWithImm;
    case OpKind::kRead: return WrOpcode::kRdmaRead;
    case OpKind::kFetchAdd: return WrOpcode::kAtomicFetchAndAdd;
    case OpKind::kCmpSwap: return WrOpcode::kAtomicCmpAndSwp;
  }
  return WrOpcode::kSend;
}

WcOpcode wc_opcode(OpKind k) {
  switch (k) {
    case OpKind::kSend:
    case OpKind::kSendImm: return WcOpcode::kSend;
    case OpKind::kWrite:
    case OpKind::kWriteImm: return WcOpcode::kRdmaWrite;
    case OpKind::kRead: return WcOpcode::kRdmaRead;
    case OpKind::kFetchAdd: return WcOpcode::kFetchAdd;
    case OpKind::kCmpSwap: return WcOpcode::kCompSwap;
  }
  return WcOpcode::kSend;
}

namespace {

uint64_t align8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }
uint64_t align64(uint64_t x) { return (x + 63) & ~uint64_t{63}; }

// Most WRs small, some medium, at most lim.max_large above 64 KiB.
uint32_t draw_len(Rng& r, const PropertyLimits& lim, unsigned* large) {
  const uint64_t x = r.below(100);
  uint32_t len;
  if (x < 8) len = 0;
  else if (x < 50) len = static_cast<uint32_t>(r.range(1, 256));
  else if (x < 80) len = static_cast<uint32_t>(r.range(257, 4096));
  else if (x < 95 || *large >= lim.max_large) len = static_cast<uint32_t>(r.range(4097, 65536));
  else {
    ++*large;
    len = static_cast<uint32_t>(r.range(65537, std::max<uint32_t>(lim.max_size, 65537)));
  }
  return std::min(len, lim.max_size);
}

OpKind draw_kind(Rng& r) {
  const uint64_t x = r.below(100);
  if (x < 22) return OpKind::kSend;
  if (x < 32) return OpKind::kSendImm;
  if (x < 52) return OpKind::kWrite;
  if (x < 62) return OpKind::kWriteImm;
  if (x < 82) return OpKind::kRead;
  if (x < 91) return OpKind::kFetchAdd;
  return OpKind::kCmpSwap;
}

std::string prob(Rng& r, unsigned max_pm) {
  char b[16];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(r.range(1, max_pm)) / 1000.0);
  return b;
}

FaultConfig draw_faults(Rng& r, uint64_t seed, int dev, const PropertyLimits& lim) {
  FaultConfig fc;
  fc.seed = mix64(seed * 2 + static_cast<uint64_t>(dev)) | 1;
  // A quarter of the devices send cleanly, the others lose up to the limit.
  if (r.below(4) != 0) fc.loss = static_cast<double>(r.below(lim.max_loss_pm + 1)) / 1000.0;
  if (r.below(2) != 0) fc.reorder = static_cast<double>(r.below(lim.max_reorder_pm + 1)) / 1000.0;
  if (r.below(2) != 0) fc.duplicate = static_cast<double>(r.below(lim.max_dup_pm + 1)) / 1000.0;
  if (r.below(4) == 0) fc.corrupt = static_cast<double>(r.below(lim.max_corrupt_pm + 1)) / 1000.0;
  if (lim.rx_rules && r.per_mille(400)) {
    switch (r.below(5)) {
      case 0: fc.schedule = "dup:dir=rx:p=" + prob(r, 100); break;
      case 1: fc.schedule = "drop:class=ack:p=" + prob(r, 200); break;
      case 2: fc.schedule = "reorder:dir=rx:by=3:p=" + prob(r, 100); break;
      case 3: fc.schedule = "delay:delay=20us:jitter=300us:p=" + prob(r, 300); break;
      default: fc.schedule = "drop:class=read:dir=rx:p=" + prob(r, 150); break;
    }
  }
  return fc;
}

void draw_sges(Rng& r, Op& op) {
  if (is_atomic(op.kind)) return;  // one SGE of 8 bytes
  if (op.len == 0) {
    op.nsge = r.per_mille(500) ? 0 : 1;
    return;
  }
  op.nsge = 1;
  if (r.per_mille(700)) return;
  if (op.len >= 3 && r.per_mille(500)) {
    op.nsge = 3;
    op.split[0] = static_cast<uint32_t>(r.range(1, op.len - 2));
    op.split[1] = static_cast<uint32_t>(r.range(op.split[0] + 1, op.len - 1));
  } else if (op.len >= 2) {
    op.nsge = 2;
    op.split[0] = static_cast<uint32_t>(r.range(1, op.len - 1));
  }
}

StreamPlan draw_stream(Rng& r, unsigned id, unsigned pair, int req, const PropertyLimits& lim_in, Mtu mtu) {
  // A lost packet of a READ response costs the rest of the READ again (the
  // responder resends from the missing PSN to the end), so under heavy loss a
  // READ of n packets costs O(n^2): messages stay within 512 packets.
  PropertyLimits lim = lim_in;
  lim.max_size = std::min<uint32_t>(lim.max_size, 512 * mtu_bytes(mtu));
  StreamPlan s;
  s.id = id;
  s.pair = pair;
  s.req = req;
  s.window = static_cast<unsigned>(r.range(1, 16));
  s.lazy_recv = r.per_mille(300);
  s.local_tag = r.next();
  s.remote_tag = r.next();
  s.fadd_init = r.next();
  s.cas_init = r.next();
  const auto n = static_cast<size_t>(r.range(lim.min_ops, lim.max_ops));
  unsigned large = 0, unsignaled_run = 0;
  uint64_t max_read = 0;
  s.ops.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Op& op = s.ops[i];
    op.kind = draw_kind(r);
    op.len = is_atomic(op.kind) ? 8 : draw_len(r, lim, &large);
    // The last WR is signaled (it completes the rest), and so is one in every
    // window: the requester waits for a completion before it posts more.
    op.signaled = i + 1 == n || unsignaled_run + 1 >= s.window || r.per_mille(800);
    unsignaled_run = op.signaled ? 0 : unsignaled_run + 1;
    op.fence = r.per_mille(50);
    op.inline_data = (takes_recv(op.kind) || is_write(op.kind)) && op.len <= kMaxInline && r.per_mille(300);
    op.imm = static_cast<uint32_t>(r.next());
    if (op.kind == OpKind::kRead) max_read = std::max<uint64_t>(max_read, op.len);
  }
  // Remote layout: atomic words, read-only area, WRITE area, receive ranges.
  s.ro_off = 64;
  s.ro_len = max_read + 64;
  s.wr_off = align64(s.ro_off + s.ro_len);
  uint64_t lcur = 0, wcur = s.wr_off;
  uint64_t fadd = s.fadd_init, cas = s.cas_init;
  std::vector<size_t> writes;
  for (size_t i = 0; i < n; ++i) {
    Op& op = s.ops[i];
    if (op.kind == OpKind::kRead) op.remote_off = s.ro_off + r.below(s.ro_len - op.len + 1);
    if (is_write(op.kind)) {
      if (!writes.empty() && r.per_mille(300)) {
        // Overwrite (part of) an earlier WRITE: posting order decides the result.
        const Op& w = s.ops[writes[r.below(writes.size())]];
        op.len = std::min(op.len, w.len);
        op.remote_off = w.remote_off + r.below(w.len - op.len + 1);
      } else {
        op.remote_off = align8(wcur) + r.below(8);
        wcur = op.remote_off + op.len + 8;
      }
      writes.push_back(i);
    }
    if (op.kind == OpKind::kFetchAdd) {
      op.remote_off = StreamPlan::kFaddOff;
      op.compare_add = r.next();
      op.expect_orig = fadd;
      fadd += op.compare_add;
    }
    if (op.kind == OpKind::kCmpSwap) {
      op.remote_off = StreamPlan::kCasOff;
      op.compare_add = r.per_mille(700) ? cas : cas ^ (uint64_t{1} << r.below(64));
      op.swap = r.next();
      op.expect_orig = cas;
      if (op.compare_add == cas) cas = op.swap;
    }
    op.local_off = align8(lcur) + (is_atomic(op.kind) ? 0 : r.below(8));
    lcur = op.local_off + op.len + 8;
    draw_sges(r, op);
  }
  s.wr_len = wcur - s.wr_off;
  s.rv_off = align64(wcur);
  uint64_t rcur = s.rv_off;
  for (size_t i = 0; i < n; ++i) {
    Op& op = s.ops[i];
    if (!takes_recv(op.kind)) continue;
    RecvPlan rp;
    rp.op = i;
    const uint32_t payload = op.kind == OpKind::kWriteImm ? 0 : op.len;
    rp.cap = payload + (r.per_mille(300) ? 0 : static_cast<uint32_t>(r.below(65)));
    rp.off = align8(rcur) + r.below(8);
    rp.split = rp.cap >= 2 && r.per_mille(200) ? static_cast<uint32_t>(r.range(1, rp.cap - 1)) : 0;
    rcur = rp.off + rp.cap + 8;
    op.recv = s.recvs.size();
    s.recvs.push_back(rp);
  }
  s.local_len = lcur + 64;
  s.remote_len = rcur + 64;
  return s;
}

}  // namespace

std::vector<std::byte> StreamPlan::source(const Op& op) const {
  std::vector<std::byte> b(op.len);
  fill_seeded(b, local_tag, op.local_off);
  if (op.len >= kHeaderLen && (takes_recv(op.kind) || is_write(op.kind))) {
    const uint32_t h[3] = {kHeaderMagic, id, static_cast<uint32_t>(&op - ops.data())};
    std::memcpy(b.data(), h, kHeaderLen);
  }
  return b;
}

std::vector<std::byte> StreamPlan::initial_local() const {
  std::vector<std::byte> b(local_len);
  fill_seeded(b, local_tag);
  for (const Op& op : ops) {
    if (op.kind == OpKind::kRead || is_atomic(op.kind)) continue;
    const auto src = source(op);
    std::copy(src.begin(), src.end(), b.begin() + static_cast<ptrdiff_t>(op.local_off));
  }
  return b;
}

std::vector<std::byte> StreamPlan::initial_remote() const {
  std::vector<std::byte> b(remote_len);
  fill_seeded(b, remote_tag);
  std::memcpy(b.data() + kFaddOff, &fadd_init, 8);
  std::memcpy(b.data() + kCasOff, &cas_init, 8);
  return b;
}

std::vector<std::byte> StreamPlan::final_local() const {
  std::vector<std::byte> b = initial_local();
  const std::vector<std::byte> remote = initial_remote();  // READs see only the read-only area
  for (const Op& op : ops) {
    if (op.kind == OpKind::kRead) {
      std::copy_n(remote.begin() + static_cast<ptrdiff_t>(op.remote_off), op.len,
                  b.begin() + static_cast<ptrdiff_t>(op.local_off));
    } else if (is_atomic(op.kind)) {
      std::memcpy(b.data() + op.local_off, &op.expect_orig, 8);
    }
  }
  return b;
}

std::vector<std::byte> StreamPlan::final_remote() const {
  std::vector<std::byte> b = initial_remote();
  uint64_t fadd = fadd_init, cas = cas_init;
  for (const Op& op : ops) {
    if (is_write(op.kind)) {
      const auto src = source(op);
      std::copy(src.begin(), src.end(), b.begin() + static_cast<ptrdiff_t>(op.remote_off));
    } else if (op.kind == OpKind::kSend || op.kind == OpKind::kSendImm) {
      const auto src = source(op);
      std::copy(src.begin(), src.end(), b.begin() + static_cast<ptrdiff_t>(recvs[op.recv].off));
    } else if (op.kind == OpKind::kFetchAdd) {
      fadd += op.compare_add;
    } else if (op.kind == OpKind::kCmpSwap && cas == op.compare_add) {
      cas = op.swap;
    }
  }
  std::memcpy(b.data() + kFaddOff, &fadd, 8);
  std::memcpy(b.data() + kCasOff, &cas, 8);
  return b;
}

std::vector<std::byte> StreamPlan::expected_recv(size_t i) const {
  const RecvPlan& rp = recvs[i];
  std::vector<std::byte> b(rp.cap);
  fill_seeded(b, remote_tag, rp.off);
  const Op& op = ops[rp.op];
  if (op.kind != OpKind::kWriteImm) {
    const auto src = source(op);
    std::copy(src.begin(), src.end(), b.begin());
  }
  return b;
}

Scenario make_scenario(uint64_t seed, const PropertyLimits& lim) {
  Rng r(seed);
  Scenario s;
  s.seed = seed;
  static constexpr Mtu kMtus[] = {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096};
  s.mtu = lim.small_mtu ? kMtus[r.below(5)] : kMtus[2 + r.below(3)];
  for (uint32_t& p : s.psn) {
    // A quarter start just below the 24-bit wrap.
    p = r.per_mille(250) ? 0xFFFFFF - static_cast<uint32_t>(r.below(64))
                         : static_cast<uint32_t>(r.below(1u << 24));
  }
  s.max_rd_atomic = static_cast<uint8_t>(r.range(1, 16));
  s.min_rnr_timer = static_cast<uint8_t>(r.range(1, 12));
  // One in five: a retransmit timeout shorter than the round trip of a long
  // message, so spurious retries race with the ACKs (fabric only: on UDP the
  // round trip is real time).
  s.timeout = lim.short_timeouts && r.below(5) == 0 ? static_cast<uint8_t>(r.range(3, 8)) : 10;
  for (int d = 0; d < 2; ++d) s.faults[d] = draw_faults(r, seed, d, lim);
  for (unsigned p = 0; p < lim.pairs; ++p) {
    const uint64_t dirs = r.below(3);  // A->B, B->A, both
    if (dirs != 1) s.streams.push_back(draw_stream(r, static_cast<unsigned>(s.streams.size()), p, 0, lim, s.mtu));
    if (dirs != 0) s.streams.push_back(draw_stream(r, static_cast<unsigned>(s.streams.size()), p, 1, lim, s.mtu));
  }
  return s;
}

std::string Scenario::describe() const {
  std::string out;
  char b[256];
  std::snprintf(b, sizeof b, "seed %llu: mtu %u, psn A %u B %u, max_rd_atomic %u, min_rnr_timer %u, timeout %u\n",
                static_cast<unsigned long long>(seed), mtu_bytes(mtu), psn[0], psn[1], max_rd_atomic,
                min_rnr_timer, timeout);
  out += b;
  for (int d = 0; d < 2; ++d) {
    const FaultConfig& f = faults[d];
    std::snprintf(b, sizeof b, "  device %c sends with loss %.3f reorder %.3f duplicate %.3f corrupt %.3f seed %llu schedule '%s'\n",
                  d == 0 ? 'A' : 'B', f.loss, f.reorder, f.duplicate, f.corrupt,
                  static_cast<unsigned long long>(f.seed), f.schedule.c_str());
    out += b;
  }
  for (const StreamPlan& st : streams) {
    uint64_t bytes = 0, largest = 0;
    for (const Op& op : st.ops) {
      bytes += op.len;
      largest = std::max<uint64_t>(largest, op.len);
    }
    std::snprintf(b, sizeof b, "  stream %u: pair %u %s, %zu WRs (%zu receives), window %u%s, %llu bytes, largest %llu\n",
                  st.id, st.pair, st.req == 0 ? "A->B" : "B->A", st.ops.size(), st.recvs.size(),
                  st.window, st.lazy_recv ? ", lazy receives" : "",
                  static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(largest));
    out += b;
  }
  return out;
}

}  // namespace rocelab::emu::test
