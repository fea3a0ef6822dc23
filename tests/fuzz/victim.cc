// The engine fuzzer's victim (victim.h): its device, QPs of every type and
// state, MRs in a guarded arena, and the checks that no byte outside what the
// peer may write has changed.
#include "tests/fuzz/victim.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "emu/connect.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace rocelab::fuzz {
namespace {

using namespace emu;

// The memory the victim registers, laid out in one arena with guard bytes
// between and around the regions.
using Region = Victim::Region;
constexpr int kNumRegions = Victim::kNumRegions;
constexpr const char* kRegionNames[] = {"remote-write MR", "remote-read-only MR", "local-only MR",
                                        "receive buffers", "READ/atomic result buffer",
                                        "remote-write MR of an unused PD", "deregistered MR",
                                        "send source buffer"};
// Whether the peer may legitimately change the region.
constexpr bool kMayChange[] = {true, false, false, true, true, false, false, false};
constexpr size_t kRegionLen[] = {4096, 4096, 4096, 16384, 4096, 4096, 4096, 4096};
constexpr size_t kGuard = 64;

struct Arena {
  std::array<size_t, kNumRegions> off{};
  size_t size = 0;
  std::vector<std::byte> mem, pattern;
  Arena() {
    size_t o = kGuard;
    for (int r = 0; r < kNumRegions; ++r) {
      off[r] = o;
      o += kRegionLen[r] + kGuard;
    }
    size = o;
    mem.resize(size);
    pattern.resize(size);
    for (size_t i = 0; i < size; ++i) pattern[i] = std::byte(static_cast<uint8_t>(i * 131 + 7));
  }
  std::byte* at(int r) { return mem.data() + off[r]; }
  uint64_t addr(int r) { return reinterpret_cast<uint64_t>(at(r)); }
};
Arena& arena() {
  static Arena a;
  return a;
}

const wire::IpAddr kVictimAddr = wire::IpAddr::v4(10, 0, 0, 1);
const wire::IpAddr kPeerAddr = wire::IpAddr::v4(10, 0, 0, 2);
const wire::IpAddr kStrangerAddr = wire::IpAddr::v4(10, 0, 0, 3);

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "victim setup failed: %s\n", what);
  std::abort();
}

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r) die(what);
  return std::move(*r);
}
void must(std::error_code ec, const char* what) {
  if (ec) die(what);
}

}  // namespace

Victim::Victim() {
  scratch_.resize(wire::kMaxRoceLen + 64);

  // The peer and a stranger are bare ports on the fabric: the input's packets
  // leave from them as they are.
  std::string why;
  peer_ = bed_.make_transport(kPeerAddr, 0, nullptr, nullptr, &why);
  stranger_ = bed_.make_transport(kStrangerAddr, 0, nullptr, nullptr, &why);
  if (!peer_ || !stranger_) die("ports");
  dev_ = bed_.make_device(kVictimAddr, 0, DeviceConfig{}, nullptr, nullptr, &why);
  if (!dev_) die("device");
  setup();
}

Victim::~Victim() = default;

void Victim::reset() {
  dev_->reset();
  must(fabric_.reset(), "fabric reset");
  qp_objs_.clear();
  cqs_.clear();
  qps_.clear();
  mr_infos_.clear();
  rw_mr_ = nullptr;
  rw_at_dereg_.clear();
  setup();
}

void Victim::setup() {
  Arena& a = arena();
  std::memcpy(a.mem.data(), a.pattern.data(), a.size);

  Pd* pd = must(dev_->alloc_pd(), "pd");
  Pd* pd2 = must(dev_->alloc_pd(), "pd2");
  using namespace access;
  const unsigned kAllRemote = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  auto reg = [&](Pd* p, int r, uint64_t iova, unsigned acc) {
    Mr* mr = must(dev_->reg_mr(p, a.at(r), kRegionLen[r], iova, acc), "reg_mr");
    mr_infos_.push_back({mr->rkey(), mr->iova(), static_cast<uint32_t>(mr->length())});
    return mr;
  };
  rw_mr_ = reg(pd, kRw, 0x10000, kAllRemote);
  // Near the top of the 64-bit space: ranges that wrap are one step away.
  reg(pd, kRo, 0xFFFFFFFFFFFFE000ull, kRemoteRead);
  reg(pd, kLocal, a.addr(kLocal), kLocalWrite);
  Mr* recv_mr = reg(pd, kRecv, a.addr(kRecv), kLocalWrite);
  Mr* rd_mr = reg(pd, kRdDest, a.addr(kRdDest), kLocalWrite);
  reg(pd2, kOtherPd, 0x20000, kAllRemote);
  Mr* stale = reg(pd, kStale, 0x30000, kAllRemote);
  must(dev_->dereg_mr(stale), "dereg_mr");  // its rkey stays in mr_infos_: a stale R_Key
  Mr* src_mr = reg(pd, kSrc, a.addr(kSrc), 0);

  Cq* scq = must(dev_->create_cq(1024, nullptr, 0), "cq");
  Cq* rcq = must(dev_->create_cq(1024, nullptr, 0), "cq");
  cqs_ = {scq, rcq};
  Srq* srq = must(dev_->create_srq(pd, SrqAttr{16, 1, 0}), "srq");

  Gid peer_gid = kPeerAddr.gid();
  ConnectOptions co;
  co.retry_cnt = 3;
  co.rnr_retry = 3;
  co.max_rd_atomic = 4;
  co.timeout = 10;  // 4 ms
  size_t recv_slot = 0;
  std::vector<Sge> recv_sges(64);
  auto post_recvs = [&](Qp* qp, Srq* s) {
    for (int i = 0; i < 4; ++i) {
      Sge& g = recv_sges[recv_slot];
      g = {recv_mr->iova() + recv_slot * 256, 256, recv_mr->lkey()};
      ++recv_slot;
      RecvWr wr{recv_slot, std::span<const Sge>(&g, 1)};
      size_t n = 0;
      const std::span<const RecvWr> one(&wr, 1);
      if (qp != nullptr) must(qp->post_recv(one, &n), "post_recv");
      if (s != nullptr) must(s->post_recv(one, &n), "post_srq_recv");
    }
  };
  auto make_qp = [&](QpType type, QpState target, unsigned qp_access, bool with_srq, bool receives = true) {
    QpInitAttr ia;
    ia.send_cq = scq;
    ia.recv_cq = rcq;
    ia.qp_type = type;
    ia.cap = {16, 8, 2, 1, 64};
    ia.srq = with_srq ? srq : nullptr;
    Qp* qp = must(dev_->create_qp(pd, ia), "create_qp");
    ConnectOptions o = co;
    o.access = qp_access;
    o.qkey = kQkey;
    if (target != QpState::kReset) {
      must(qp_to_init(*qp, o), "init");
      if (!with_srq && receives) post_recvs(qp, nullptr);
    }
    if (target != QpState::kReset && target != QpState::kInit) {
      must(qp_to_rtr(*qp, peer_gid, kPeerQpn, 0, o), "rtr");
      if (target != QpState::kRtr) must(qp_to_rts(*qp, 0, o), "rts");
      if (target == QpState::kErr || target == QpState::kSqd) {
        QpAttr at;
        at.qp_state = target;
        must(qp->modify(at, qp_attr::kState), "modify");
      }
    }
    qp_objs_.push_back(qp);
    qps_.push_back({qp->qp_num(), type, target});
    return qp;
  };
  Qp* rc = make_qp(QpType::kRC, QpState::kRts, kAllRemote & ~kLocalWrite, false);
  make_qp(QpType::kRC, QpState::kRtr, kAllRemote & ~kLocalWrite, false);
  make_qp(QpType::kRC, QpState::kRtr, 0, false);  // no remote access at the QP
  make_qp(QpType::kRC, QpState::kInit, kAllRemote & ~kLocalWrite, false);
  make_qp(QpType::kRC, QpState::kReset, kAllRemote & ~kLocalWrite, false);
  make_qp(QpType::kRC, QpState::kErr, kAllRemote & ~kLocalWrite, false);
  make_qp(QpType::kRC, QpState::kSqd, kAllRemote & ~kLocalWrite, false);
  Qp* uc = make_qp(QpType::kUC, QpState::kRts, kRemoteWrite, false);
  make_qp(QpType::kUC, QpState::kRtr, kRemoteWrite, false);
  make_qp(QpType::kUD, QpState::kRts, 0, false);
  make_qp(QpType::kRC, QpState::kRts, kAllRemote & ~kLocalWrite, true);  // on the SRQ
  post_recvs(nullptr, srq);
  // No receive posted: the first SEND meets the responder's RNR path (err_rnr),
  // which the QPs above reach only after four SENDs (docs/security.md).
  make_qp(QpType::kRC, QpState::kRts, kAllRemote & ~kLocalWrite, false, /*receives=*/false);

  // Outstanding requests on the RC QP, so that responses reach the completer:
  // a SEND, a WRITE, a READ and two atomics (results into kRdDest).
  static Sge src_sge, rd_sge, at_sge, at2_sge;
  src_sge = {a.addr(kSrc), 300, src_mr->lkey()};
  rd_sge = {rd_mr->iova(), 2000, rd_mr->lkey()};
  at_sge = {rd_mr->iova() + 2048, 8, rd_mr->lkey()};
  at2_sge = {rd_mr->iova() + 2056, 8, rd_mr->lkey()};
  std::array<SendWr, 5> wrs{};
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].wr_id = 100 + i;
    wrs[i].send_flags = send_flags::kSignaled;
  }
  wrs[0].opcode = WrOpcode::kSend;
  wrs[0].sg_list = {&src_sge, 1};
  wrs[1].opcode = WrOpcode::kRdmaWrite;
  wrs[1].sg_list = {&src_sge, 1};
  wrs[1].rdma = {0x40000, 0x1234};
  wrs[2].opcode = WrOpcode::kRdmaRead;
  wrs[2].sg_list = {&rd_sge, 1};
  wrs[2].rdma = {0x50000, 0x1234};
  wrs[3].opcode = WrOpcode::kAtomicFetchAndAdd;
  wrs[3].sg_list = {&at_sge, 1};
  wrs[3].atomic = {0x60000, 5, 0, 0x1234};
  wrs[4].opcode = WrOpcode::kAtomicCmpAndSwp;
  wrs[4].sg_list = {&at2_sge, 1};
  wrs[4].atomic = {0x60008, 0, 7, 0x1234};
  size_t n = 0;
  must(rc->post_send(wrs, &n), "post_send rc");
  must(uc->post_send(std::span<const SendWr>(wrs.data(), 2), &n), "post_send uc");
  pump();
}

void Victim::pump() {
  std::array<Wc, 32> wc;
  const RecvHandler discard = [](const Datagram&) {};
  for (int round = 0; round < 64; ++round) {
    size_t moved = dev_->progress();
    moved += peer_->poll(discard, 256);
    moved += stranger_->poll(discard, 256);
    for (Cq* cq : cqs_) {
      while (int got = cq->poll(wc)) moved += static_cast<size_t>(got);
    }
    if (moved == 0) {
      // Deliveries in flight (the fabric's latency): move the clock to them,
      // but not to timers further away (time passes only when the input says so).
      const Nanos next = fabric_.next_event();
      if (next > fabric_.now() + fabric_.config().latency) return;
      fabric_.advance(next);
    }
  }
}

void Victim::advance(Nanos dt) {
  const Nanos target = fabric_.now() + dt;
  for (int i = 0; i < 256 && fabric_.now() < target; ++i) {
    fabric_.advance(target);
    pump();
  }
}

void Victim::send(uint8_t kind, uint8_t qp, std::span<const uint8_t> bytes) {
  if (!bytes.empty()) std::memcpy(scratch_.data(), bytes.data(), bytes.size());
  uint8_t* p = scratch_.data();
  const size_t len = bytes.size();
  const QpInfo& q = qps_[qp % qps_.size()];
  if (!(kind & kKeepQpn) && len >= wire::kBthLen) {
    p[5] = static_cast<uint8_t>(q.qpn >> 16);
    p[6] = static_cast<uint8_t>(q.qpn >> 8);
    p[7] = static_cast<uint8_t>(q.qpn);
  }
  const int source = (kind >> 4) & 3;
  Datagram d;
  d.ip.src = (source & 1) ? kStrangerAddr : kPeerAddr;
  d.ip.dst = kVictimAddr;
  d.ip.sport = source >= 2 ? 0xD000 : 0xC000;
  d.ip.dport = wire::kRoceV2Port;
  if (!(kind & kKeepIcrc) && len >= wire::kBthLen + wire::kIcrcLen) {
    // As the victim's receive check rebuilds it (recv.cc: check_icrc).
    std::array<std::byte, wire::kIpv4HeaderLen + wire::kUdpHeaderLen> hdr{};
    wire::write_ip_udp(hdr.data(), d.ip, len);
    const auto* b = reinterpret_cast<const std::byte*>(p);
    wire::IcrcAccumulator acc(hdr.data(), wire::kIpv4HeaderLen, b);
    acc.add(std::span<const std::byte>(b + wire::kBthLen, len - wire::kBthLen - wire::kIcrcLen));
    const uint32_t crc = acc.value();
    for (int i = 0; i < 4; ++i) p[len - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  }
  d.payload = std::span<const std::byte>(reinterpret_cast<const std::byte*>(p), len);
  peer_->send(std::span<const Datagram>(&d, 1));
  pump();
}

void Victim::local(uint8_t what) {
  if (what % 2 == 0) {
    if (rw_mr_ == nullptr) return;
    if (dev_->dereg_mr(rw_mr_)) die("dereg_mr");
    rw_mr_ = nullptr;
    Arena& a = arena();
    rw_at_dereg_.assign(a.at(kRw), a.at(kRw) + kRegionLen[kRw]);
  } else {
    QpAttr at;
    at.qp_state = QpState::kErr;
    (void)qp_objs_[(what / 2) % qp_objs_.size()]->modify(at, qp_attr::kState);
  }
  pump();
}

void Victim::run(std::span<const uint8_t> in) {
  while (in.size() >= kRecHeader) {
    const uint8_t kind = in[0], qp = in[1];
    const size_t len = (size_t{in[2]} << 8) | in[3];
    in = in.subspan(kRecHeader);
    if ((kind & 3) == kRecTime) {
      advance(Nanos(int64_t{1} << (qp % 32)));
      continue;
    }
    if ((kind & 3) == kRecLocal) {
      local(qp);
      continue;
    }
    if (len > in.size() || len > scratch_.size()) return;
    send(kind, qp, in.first(len));
    in = in.subspan(len);
  }
}

size_t Victim::bytes_changed(Region r) {
  Arena& a = arena();
  size_t n = 0;
  for (size_t i = a.off[r]; i < a.off[r] + kRegionLen[r]; ++i) n += a.mem[i] != a.pattern[i];
  return n;
}

std::byte& Victim::arena_byte(size_t offset) { return arena().mem.at(offset); }
size_t Victim::arena_size() { return arena().size; }

namespace {
// The offset of the first byte where x and y differ, or n (memcmp first: the
// check runs after every input, and nearly always finds nothing).
size_t first_difference(const std::byte* x, const std::byte* y, size_t n) {
  if (std::memcmp(x, y, n) == 0) return n;
  size_t i = 0;
  while (x[i] == y[i]) ++i;
  return i;
}
}  // namespace

void Victim::check_memory() const {
  Arena& a = arena();
  if (rw_mr_ == nullptr && !rw_at_dereg_.empty()) {
    const size_t i = first_difference(a.at(kRw), rw_at_dereg_.data(), kRegionLen[kRw]);
    if (i != kRegionLen[kRw]) {
      std::fprintf(stderr, "byte %zu of the %s changed after it was deregistered\n", i, kRegionNames[kRw]);
      std::abort();
    }
  }
  size_t prev_end = 0;
  for (int r = 0; r <= kNumRegions; ++r) {
    const size_t start = r < kNumRegions ? a.off[r] : a.size;
    // The guard bytes before region r (after the last region for r == kNumRegions).
    const size_t g = first_difference(&a.mem[prev_end], &a.pattern[prev_end], start - prev_end);
    if (g != start - prev_end) {
      std::fprintf(stderr, "guard byte at arena offset %zu changed (before %s)\n", prev_end + g,
                   r < kNumRegions ? kRegionNames[r] : "the end");
      std::abort();
    }
    if (r == kNumRegions) break;
    prev_end = start + kRegionLen[r];
    if (kMayChange[r]) continue;
    const size_t i = first_difference(&a.mem[start], &a.pattern[start], kRegionLen[r]);
    if (i != kRegionLen[r]) {
      std::fprintf(stderr, "byte %zu of the %s changed: the peer had no right to it\n", i, kRegionNames[r]);
      std::abort();
    }
  }
}

}  // namespace rocelab::fuzz
