#include "replay/replay.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "capture/pcap_writer.h"
#include "emu/connect.h"
#include "emu/device.h"
#include "emu/records/pcap_tap.h"
#include "emu/transport/sim_fabric.h"
#include "replay/compare.h"
#include "replay/live_memory.h"
#include "replay/plan.h"
#include "testbed/testbed.h"
#include "wire/aeth.h"
#include "wire/frame.h"

namespace rocelab::replay {

namespace {

using detail::OpClass;
using wire::Psn;
using detail::ReadPass;
using detail::for_each_packet;
using detail::starts_message;
using detail::round_mtu;
// The bytes of one R_Key whose content the capture determines (written by
// its WRITEs): merged intervals [start, end).
class Known {
 public:
  void add(uint64_t a, uint64_t n) {
    if (n == 0) return;
    uint64_t b = a + n;
    auto it = m_.upper_bound(a);
    if (it != m_.begin() && std::prev(it)->second >= a) --it;
    while (it != m_.end() && it->first <= b) {
      a = std::min(a, it->first);
      b = std::max(b, it->second);
      it = m_.erase(it);
    }
    if (m_.size() < 65536) m_[a] = b;
  }
  // Calls f(start, length) for each known piece of [a, a + n).
  template <class F>
  void each_known(uint64_t a, uint64_t n, F&& f) const {
    auto it = m_.upper_bound(a);
    if (it != m_.begin()) --it;
    for (; it != m_.end() && it->first < a + n; ++it) {
      const uint64_t s = std::max(a, it->first), e = std::min(a + n, it->second);
      if (s < e) f(s, e - s);
    }
  }
  bool covers(uint64_t a, uint64_t n) const {
    if (n == 0) return true;
    auto it = m_.upper_bound(a);
    if (it == m_.begin()) return false;
    --it;
    return it->first <= a && it->second >= a + n;
  }

 private:
  std::map<uint64_t, uint64_t> m_;
};

struct LiveMr {
  uint32_t index = 0;                // its span's number, for the PageBudget
  uint64_t lo = UINT64_MAX, hi = 0;  // the VA range the capture's RETHs use
  detail::Reservation mem;           // the live MR
  emu::Mr* mr = nullptr;
  // What the capture's WRITEs (and atomics) put in the original responder's
  // memory, and which bytes of it they determine.
  detail::Reservation shadow;
  Known known;
  bool covers(uint64_t va, uint64_t n) const {
    return va >= lo && va - lo <= shadow.size() && n <= shadow.size() - (va - lo);
  }
  std::byte* at(uint64_t va, uint64_t n) { return covers(va, n) ? shadow.data() + (va - lo) : nullptr; }
};

// A READ or atomic request sent, until the answers are judged.
struct Pending {
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint32_t len = 0, npk = 1;
  bool known = false;      // atomic: its 8 bytes were determined when it was sent ...
  uint64_t before = 0;     // ... and held this
  bool cmp_swap = false, applied = false;
  uint64_t compare = 0, swap_add = 0;
};

constexpr uint32_t kBogusRkey = 0xFFFFFFFF;  // names no live MR
constexpr int64_t kWindow = 1 << 16;         // PSNs judged this far behind the newest request
constexpr uint32_t kRecvSlots = 1024;
}  // namespace

ReplayResult replay_capture(const ReplayOptions& o) {
  ReplayResult r;
  auto fail = [&](std::string why) {
    r.status = 2;
    r.error = std::move(why);
    return r;
  };
  if (!(o.speed > 0) || !std::isfinite(o.speed)) return fail("--speed must be a positive number");
  if (o.mtu != 0 && o.mtu != round_mtu(o.mtu)) return fail("--mtu must be 256, 512, 1024, 2048 or 4096");

  detail::Plan plan;
  if (!detail::make_plan(o, r, plan)) return r;
  const detail::SpaceInfo& sp = plan.sp;
  const bool rc = sp.transport == wire::Transport::kRC;
  auto is_request = [&](const wire::DecodedFrame& d) { return plan.is_request(d); };
  auto is_response = [&](const wire::DecodedFrame& d) { return plan.is_response(d); };
  const uint32_t start_psn = plan.start_psn;
  const uint64_t recv_needed = plan.recv_needed, max_send = plan.max_send;
  std::map<uint32_t, LiveMr> mrs;
  for (const auto& [rkey, g] : plan.regions) {
    LiveMr& m = mrs[rkey];
    m.index = static_cast<uint32_t>(mrs.size() - 1);
    m.lo = g.lo;
    m.hi = g.hi;
  }
  detail::PageBudget written(o.max_memory);

  // The live responder on a simulated fabric: the capture's addresses when
  // they are two different IP addresses of one family.
  wire::IpAddr req_ip = sp.req_addr, resp_ip = sp.resp_addr;
  if (req_ip == resp_ip || req_ip.v6 != resp_ip.v6) {
    req_ip = wire::IpAddr::v4(10, 0, 0, 1);
    resp_ip = wire::IpAddr::v4(10, 0, 0, 2);
  }
  // (Declared before the testbed: its device goes first, then the fabric, then the writer.)
  std::optional<capture::PcapWriter> writer;
  std::unique_ptr<emu::PcapTap> tap;
  if (!o.pcap.empty()) {
    std::string detail;
    auto w = capture::PcapWriter::open(o.pcap, capture::PcapWriter::Options{}, &detail);
    if (!w) return fail(o.pcap + ": " + (detail.empty() ? w.error().message() : detail));
    writer.emplace(std::move(*w));
    tap = std::make_unique<emu::PcapTap>(*writer, emu::PcapTap::Dirs::kBoth);
  }
  // No propagation delay: the capture's own gaps are the timing (--speed),
  // and a request's answer is there at the next poll. The requester is a bare
  // port on the fabric (the capture's requests are sent as they are); the
  // responder a device of the testbed.
  testbed::Testbed bed(testbed::Net::kSim, emu::SimFabricConfig{Nanos(0), 0, Nanos(0)});
  emu::SimFabric& fabric = *bed.fabric();
  std::string why;
  auto port = bed.make_transport(req_ip, 0, nullptr, nullptr, &why);
  if (!port) return fail("cannot attach to the simulated fabric: " + why);
  emu::DeviceConfig cfg;
  cfg.name = "replay0";
  cfg.active_mtu = emu::Mtu::k4096;
  cfg.tap = tap.get();
  std::unique_ptr<emu::Device> dev = bed.make_device(resp_ip, 0, cfg, nullptr, nullptr, &why);
  if (!dev) return fail("cannot create the live responder: " + why);
  auto pd = dev->alloc_pd();
  if (!pd) return fail("live responder: alloc_pd: " + pd.error().message());
  auto cq = dev->create_cq(4096, nullptr, 0);
  if (!cq) return fail("live responder: create_cq: " + cq.error().message());
  const unsigned remote = emu::access::kLocalWrite | emu::access::kRemoteWrite | emu::access::kRemoteRead |
                          emu::access::kRemoteAtomic;
  for (auto& [rkey, m] : mrs) {
    for (detail::Reservation* res : {&m.mem, &m.shadow}) {
      const std::string refused = res->reserve(m.hi - m.lo);
      if (!refused.empty())
        return fail("live responder: cannot reserve " + std::to_string(m.hi - m.lo) + " bytes for R_Key " +
                    detail::rkey_text(rkey) + ": " + refused);
    }
    auto mr = dev->reg_mr(*pd, m.mem.data(), m.mem.size(), m.lo, remote);
    if (!mr) return fail("live responder: reg_mr of " + std::to_string(m.mem.size()) + " bytes: " + mr.error().message());
    m.mr = *mr;
    r.mr_bytes += m.mem.size();
  }
  r.mrs = mrs.size();
  // Receive buffers: a ring of slots, each reposted as soon as it completes.
  const uint64_t slot_len = std::max<uint64_t>(max_send, 1);
  if (slot_len > o.max_memory || slot_len > (1ull << 31))
    return fail("a SEND of " + std::to_string(slot_len) + " bytes: over --max-memory (or 2 GiB)");
  const uint32_t slots = static_cast<uint32_t>(
      std::clamp<uint64_t>(std::min<uint64_t>(recv_needed, (64ull << 20) / slot_len), 1, kRecvSlots));
  std::vector<std::byte> recv_mem(slots * slot_len);
  auto recv_mr = dev->reg_mr(*pd, recv_mem.data(), recv_mem.size(), reinterpret_cast<uintptr_t>(recv_mem.data()),
                             emu::access::kLocalWrite);
  if (!recv_mr) return fail("live responder: reg_mr (receive buffers): " + recv_mr.error().message());
  emu::QpInitAttr qa;
  qa.send_cq = *cq;
  qa.recv_cq = *cq;
  qa.qp_type = rc ? emu::QpType::kRC : emu::QpType::kUC;
  qa.cap.max_send_wr = 16;
  qa.cap.max_recv_wr = slots;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  auto qp_r = dev->create_qp(*pd, qa);
  if (!qp_r) return fail("live responder: create_qp: " + qp_r.error().message());
  emu::Qp& qp = **qp_r;
  r.live_qpn = qp.qp_num();
  emu::ConnectOptions co;
  emu::mtu_from_bytes(r.mtu, &co.path_mtu);
  co.max_rd_atomic = static_cast<uint8_t>(std::min<uint32_t>(dev->query_device().max_qp_rd_atom, 255));
  co.min_rnr_timer = 1;
  co.access = emu::access::kRemoteWrite | emu::access::kRemoteRead | emu::access::kRemoteAtomic;
  const uint32_t live_start = 0;  // live PSN = PSN relative to the start
  const uint32_t req_qpn = sp.req_qpn.value_or(0x11);
  if (auto ec = emu::qp_to_init(qp, co)) return fail("live responder: to INIT: " + ec.message());
  if (auto ec = emu::qp_to_rtr(qp, req_ip.gid(), req_qpn, live_start, co))
    return fail("live responder: to RTR: " + ec.message() + " " + qp.last_refusal());
  if (auto ec = emu::qp_to_rts(qp, 0, co)) return fail("live responder: to RTS: " + ec.message());
  auto post_recv = [&](uint32_t i) {
    emu::Sge sge{reinterpret_cast<uintptr_t>(recv_mem.data()) + i * slot_len, static_cast<uint32_t>(slot_len),
                 (*recv_mr)->lkey()};
    emu::RecvWr wr;
    wr.wr_id = i;
    wr.sg_list = std::span<const emu::Sge>(&sge, 1);
    size_t n = 0;
    if (!qp.post_recv(std::span<const emu::RecvWr>(&wr, 1), &n)) ++r.receives;
  };
  for (uint32_t i = 0; i < slots; ++i) post_recv(i);

  // The second pass: the replay.
  Comparer cmp(o, r);
  int64_t cap_ref_rel = 0, live_ref_rel = 0;  // the newest request, to place responses
  uint32_t cap_ref_psn = start_psn, live_ref_psn = live_start;
  bool any_sent = false;
  int64_t max_rel = -1, next_judged = kWindow + 256;  // PSNs are judged 256 at a time, kWindow behind
  std::array<emu::Wc, 64> wcs;
  // READs and atomics sent, by PSN, until their answers are behind the window.
  std::map<int64_t, Pending> pending;
  // A side's READ data or atomic original value at rel against what the
  // capture's own WRITEs (and atomics) left in that memory, where they
  // determine it. The capture's atomic ACK applies the atomic to the shadow.
  auto determined = [&](bool capture, int64_t rel, const wire::RocePacket& p) -> Determined {
    Determined det;
    const wire::OpInfo& info = p.hdr.info();
    if (!info.is(OpClass::kRead) && !info.is(OpClass::kAtomic)) return det;
    auto it = pending.upper_bound(rel);
    if (it == pending.begin()) return det;
    --it;
    Pending& q = it->second;
    auto m = mrs.find(q.rkey);
    if (m == mrs.end()) return det;
    if (info.is(OpClass::kAtomic)) {
      if (it->first != rel || !q.known) return det;
      const uint64_t orig = p.hdr.atomic_ack_eth.orig;
      det = {8, orig == q.before};
      if (capture && det.match && !q.applied) {  // once (a duplicate ACK repeats it)
        const uint64_t v = q.cmp_swap ? (orig == q.compare ? q.swap_add : orig) : orig + q.swap_add;
        if (std::byte* b = m->second.at(q.va, 8)) std::memcpy(b, &v, 8);
        q.applied = true;
      }
      return det;
    }
    if (rel >= it->first + static_cast<int64_t>(q.npk)) return det;
    const uint64_t va = q.va + static_cast<uint64_t>(rel - it->first) * r.mtu;
    det.match = true;
    m->second.known.each_known(va, p.payload.size(), [&](uint64_t a, uint64_t n) {
      const std::byte* b = m->second.at(a, n);
      det.known_bytes += static_cast<uint32_t>(n);
      if (!b || std::memcmp(b, p.payload.data() + (a - va), n) != 0) det.match = false;
    });
    return det;
  };
  auto on_live = [&](const emu::Datagram& dg) {
    auto p = wire::parse_roce(dg.payload);
    if (!p || !p->hdr.info().is(OpClass::kResponse) || !any_sent) return;
    const int64_t rel = live_ref_rel + Psn(p->hdr.bth.psn).distance(Psn(live_ref_psn));
    cmp.on_response(false, rel, *p, 0, determined(false, rel, *p));
  };
  auto step = [&]() -> size_t {
    size_t moved = dev->progress();
    moved += port->poll(on_live, 256);
    const int n = recv_needed ? (*cq)->poll(wcs) : 0;  // receives complete only for SENDs and WRITEs with Immediate
    for (int i = 0; i < n; ++i)
      if (wcs[static_cast<size_t>(i)].status == emu::WcStatus::kSuccess)
        post_recv(static_cast<uint32_t>(wcs[static_cast<size_t>(i)].wr_id));
    return moved + static_cast<size_t>(n);
  };
  // Everything due up to `until` (drain: until nothing is in flight).
  auto pump = [&](Nanos until, bool drain) {
    for (int guard = 0; guard < 1 << 22; ++guard) {
      if (step() != 0) continue;
      if (drain) {
        if (fabric.in_flight() == 0) return;
        fabric.advance(Nanos::max());
        continue;
      }
      if (fabric.next_event() > until) {
        if (until > fabric.now()) fabric.advance(until);
        return;
      }
      fabric.advance(until);
    }
  };
  const Nanos vt0 = fabric.now();
  std::optional<Nanos> t0;
  std::vector<std::byte> frame(wire::kMaxFrameLen);
  struct WriteMsg {
    bool open = false;  // its data is what the original responder's memory holds
    bool any = false;   // a WRITE message is under way
    int64_t start = 0;
    uint32_t rkey = 0;
    uint64_t va = 0;
  } wmsg;
  const auto wall0 = std::chrono::steady_clock::now();
  bool seen_start = false;
  std::string over_budget;  // the replay stopped here: why
  const ReadPass p3 = for_each_packet(o.capture, [&](uint64_t no, Nanos t, const wire::DecodedFrame& d) {
    if (!over_budget.empty()) return;
    if (o.progress && (no & 4095) == 0) o.progress(no, r.frames);
    if (is_response(d)) {
      if (!seen_start) return;
      const int64_t rel = cap_ref_rel + Psn(d.roce.hdr.bth.psn).distance(Psn(cap_ref_psn));
      cmp.on_response(true, rel, d.roce, no, determined(true, rel, d.roce));
      return;
    }
    if (!is_request(d)) return;
    const wire::RoceHeaders& h0 = d.roce.hdr;
    const wire::OpInfo& info = h0.info();
    if (!seen_start) {
      if (h0.bth.psn.value() != start_psn || !starts_message(info)) {
        ++r.requests_skipped;
        return;
      }
      seen_start = true;
    }
    const int64_t rel = cap_ref_rel + Psn(h0.bth.psn).distance(Psn(cap_ref_psn));
    if (rel < 0) {
      ++r.requests_skipped;
      return;
    }
    cap_ref_rel = rel;
    cap_ref_psn = h0.bth.psn.value();
    // When to send it.
    if (!t0) t0 = t;
    if (o.as_fast_as_possible) {
      pump(fabric.now(), true);
    } else {
      const double gap = static_cast<double>(std::max<int64_t>(0, (t - *t0).count())) / o.speed;
      pump(vt0 + Nanos(static_cast<int64_t>(std::min(gap, 9.0e18))), false);
    }
    // Remapped: QPN, PSN, P_Key, R_Keys; the VAs stay (each MR sits at the
    // capture's I/O virtual addresses).
    wire::RoceHeaders h = h0;
    h.bth.dest_qpn = wire::Qpn(r.live_qpn);
    h.bth.psn = Psn(live_start + static_cast<uint32_t>(rel));
    h.bth.pkey = wire::kDefaultPkey;
    const bool refused = sp.refused.count(h0.bth.psn.value()) != 0;
    auto remap = [&](uint32_t rkey) {
      auto it = mrs.find(rkey);
      return it == mrs.end() ? kBogusRkey : it->second.mr->rkey();
    };
    if (info.carries(wire::Hdr::kReth)) h.reth.rkey = remap(h0.reth.rkey);
    if (info.carries(wire::Hdr::kAtomicEth)) h.atomic_eth.rkey = remap(h0.atomic_eth.rkey);
    // The pages this request writes (the live MR's and the shadow's) count
    // against --max-memory before it is sent.
    const auto len = static_cast<uint32_t>(d.roce.payload.size());
    auto budget = [&](uint32_t rkey, uint64_t va, uint64_t n) {
      auto it = mrs.find(rkey);
      if (it == mrs.end() || !it->second.covers(va, n) || written.touch(it->second.index, va - it->second.lo, n, 2))
        return true;
      over_budget = "the capture's WRITEs and atomics write more than --max-memory " +
                    std::to_string(written.max_bytes()) + " bytes of pages (each page twice: the live MR and its " +
                    "shadow); R_Key " + detail::rkey_text(rkey) + " passed it at frame " + std::to_string(no);
      return false;
    };
    if (info.is(OpClass::kWrite)) {
      if (info.carries(wire::Hdr::kReth)) wmsg = {!refused, true, rel, h0.reth.rkey, h0.reth.va};
      if (wmsg.any && rel >= wmsg.start) {
        const uint64_t va = wmsg.va + static_cast<uint64_t>(rel - wmsg.start) * r.mtu;
        if (!budget(wmsg.rkey, va, len)) return;
        // What the capture determines of the responder's memory.
        auto it = mrs.find(wmsg.rkey);
        std::byte* b = !wmsg.open || it == mrs.end() ? nullptr : it->second.at(va, len);
        if (b) {
          std::memcpy(b, d.roce.payload.data(), len);
          it->second.known.add(va, len);
        }
      }
      if (info.is(OpClass::kLast)) wmsg.open = wmsg.any = false;
    } else if (info.is(OpClass::kAtomic) && !budget(h0.atomic_eth.rkey, h0.atomic_eth.va, 8)) {
      return;
    }
    cmp.on_request(rel, no, h0.bth.ack_req);
    if (info.is(OpClass::kRead)) {
      Pending q;
      q.rkey = h0.reth.rkey;
      q.va = h0.reth.va;
      q.len = h0.reth.dma_len;
      q.npk = std::max<uint32_t>(1, (q.len + r.mtu - 1) / r.mtu);
      pending[rel] = q;
      cmp.on_answer_asked(rel + q.npk - 1);
    } else if (info.is(OpClass::kAtomic)) {
      auto it = mrs.find(h0.atomic_eth.rkey);
      Pending q;
      q.rkey = h0.atomic_eth.rkey;
      q.va = h0.atomic_eth.va;
      q.len = 8;
      q.known = it != mrs.end() && it->second.known.covers(q.va, 8) && it->second.at(q.va, 8);
      if (q.known) std::memcpy(&q.before, it->second.at(q.va, 8), 8);
      q.cmp_swap = (h0.bth.opcode & 0x1F) == wire::op::kRcCmpSwap;
      q.compare = h0.atomic_eth.compare;
      q.swap_add = h0.atomic_eth.swap_add;
      if (!pending.count(rel)) pending[rel] = q;  // a retransmission changes nothing
      cmp.on_answer_asked(rel);
    }
    wire::IpUdpInfo ip;
    ip.src = req_ip;
    ip.dst = resp_ip;
    ip.sport = d.ip.info.sport;
    ip.tclass = d.ip.info.tclass;
    auto n = wire::build_frame(frame, ip, h, d.roce.payload, false);
    if (!n) {
      ++r.requests_skipped;
      return;
    }
    const size_t iph = wire::ip_udp_header_len(ip.dst.v6);
    emu::Datagram dg{ip, std::span<const std::byte>(frame.data() + iph, *n - iph)};
    live_ref_rel = rel;
    live_ref_psn = h.bth.psn.value();
    any_sent = true;
    port->send(std::span<const emu::Datagram>(&dg, 1));
    ++r.requests;
    max_rel = std::max(max_rel, rel);
    if (max_rel >= next_judged) {
      next_judged = max_rel + 256;
      cmp.finalize(max_rel - kWindow);
      auto keep = pending.lower_bound(max_rel - kWindow);
      if (keep != pending.begin()) pending.erase(pending.begin(), std::prev(keep));
    }
  });
  pump(fabric.now(), true);
  cmp.finalize(INT64_MAX);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.virtual_time = fabric.now() - vt0;
  if (o.progress) o.progress(r.frames, r.frames);
  r.memory_written = written.bytes();
  if (!p3.ok) return fail("cannot read as a capture: " + p3.error);
  if (!over_budget.empty()) return fail(over_budget);
  dev->set_tap(nullptr);
  if (writer) {
    if (auto ec = writer->close()) return fail(o.pcap + ": " + ec.message());
  }
  r.status = r.behaviour ? 1 : 0;
  if (!r.damaged.empty()) r.status = 2;
  return r;
}

}  // namespace rocelab::replay
