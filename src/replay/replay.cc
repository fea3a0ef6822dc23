#include "replay/replay.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "capture/pcap_writer.h"
#include "emu/records/pcap_tap.h"
#include "replay/compare.h"
#include "replay/live_responder.h"
#include "replay/memory_oracle.h"
#include "replay/plan.h"
#include "wire/frame.h"

namespace rocelab::replay {

namespace {

using detail::OpClass;
using wire::Psn;

constexpr uint32_t kBogusRkey = 0xFFFFFFFF;  // names no live MR
constexpr int64_t kWindow = 1 << 16;         // PSNs judged this far behind the newest request

// When each captured request is sent, in the fabric's virtual time: at its
// capture time since the first request's, divided by the speed; or, as fast
// as possible, once everything sent before it is answered.
class Pacer {
 public:
  Pacer(double speed, bool as_fast_as_possible, Nanos vt0) : speed_(speed), afap_(as_fast_as_possible), vt0_(vt0) {}
  // The time to run the fabric up to before sending a request captured at t;
  // nullopt: until nothing is in flight.
  std::optional<Nanos> due(Nanos t) {
    if (!started_) {
      started_ = true;
      t0_ = t;
    }
    if (afap_) return std::nullopt;
    const double gap = static_cast<double>(std::max<int64_t>(0, (t - t0_).count())) / speed_;
    return vt0_ + Nanos(static_cast<int64_t>(std::min(gap, 9.0e18)));
  }

 private:
  double speed_;
  bool afap_;
  Nanos vt0_;
  bool started_ = false;
  Nanos t0_{0};  // the first request's capture time
};

}  // namespace

ReplayResult replay_capture(const ReplayOptions& o) {
  ReplayResult r;
  auto fail = [&](std::string why, std::string_view limit = {}) {
    r.status = 2;
    r.error = std::move(why);
    r.limit = limit;
    return r;
  };
  if (!(o.speed > 0) || !std::isfinite(o.speed)) return fail("the speed must be a positive number");
  if (o.mtu != 0 && o.mtu != detail::round_mtu(o.mtu)) return fail("the MTU must be 256, 512, 1024, 2048 or 4096");

  detail::Plan plan;
  if (!detail::make_plan(o, r, plan)) return r;
  const detail::SpaceInfo& sp = plan.sp;
  detail::MemoryOracle mem(plan, o.max_memory, r.mtu);
  if (std::string why = mem.reserve(); !why.empty()) return fail("live responder: " + why);

  // The live responder on a simulated fabric: the capture's addresses when
  // they are two different IP addresses of one family.
  detail::ResponderSetup rs;
  rs.req_ip = sp.req_addr;
  rs.resp_ip = sp.resp_addr;
  if (rs.req_ip == rs.resp_ip || rs.req_ip.v6 != rs.resp_ip.v6) {
    rs.req_ip = wire::IpAddr::v4(10, 0, 0, 1);
    rs.resp_ip = wire::IpAddr::v4(10, 0, 0, 2);
  }
  rs.rc = sp.transport == wire::Transport::kRC;
  rs.req_qpn = sp.req_qpn.value_or(0x11);
  rs.mtu = r.mtu;
  rs.recv_needed = plan.recv_needed;
  rs.max_send = plan.max_send;
  if (plan.max_send > o.max_memory)
    return fail("a SEND of " + std::to_string(plan.max_send) + " bytes: more than the memory limit of " +
                    std::to_string(o.max_memory) + " bytes",
                "max_memory");
  // (Declared before the responder, which records into them until it goes.)
  std::optional<capture::PcapWriter> writer;
  std::unique_ptr<emu::PcapTap> tap;
  if (!o.pcap.empty()) {
    std::string detail;
    auto w = capture::PcapWriter::open(o.pcap, capture::PcapWriter::Options{}, &detail);
    if (!w) return fail(o.pcap + ": " + (detail.empty() ? w.error().message() : detail));
    writer.emplace(std::move(*w));
    tap = std::make_unique<emu::PcapTap>(*writer, emu::PcapTap::Dirs::kBoth);
    rs.tap = tap.get();
  }
  std::string why;
  std::unique_ptr<detail::LiveResponder> live = detail::LiveResponder::create(rs, mem, &why);
  if (!live) return fail(why);
  r.mrs = mem.mrs().size();
  r.mr_bytes = live->mr_bytes();
  r.receives = live->receives_posted();
  r.live_qpn = live->qpn();

  // The second pass: the replay. Requests and responses are placed by their
  // PSN relative to the first message start (rel), from the newest request
  // of each side.
  Comparer cmp(o, r);
  int64_t cap_ref_rel = 0, live_ref_rel = 0;
  uint32_t cap_ref_psn = plan.start_psn, live_ref_psn = 0;
  bool any_sent = false;
  int64_t max_rel = -1, next_judged = kWindow + 256;  // PSNs are judged 256 at a time, kWindow behind
  live->set_on_response([&](const emu::Datagram& dg) {
    auto p = wire::parse_roce(dg.payload);
    if (!p || !p->hdr.info().is(OpClass::kResponse) || !any_sent) return;
    const int64_t rel = live_ref_rel + Psn(p->hdr.bth.psn).distance(Psn(live_ref_psn));
    cmp.on_response(false, rel, *p, 0, mem.determined(false, rel, *p));
  });
  const Nanos vt0 = live->now();
  Pacer pacer(o.speed, o.as_fast_as_possible, vt0);
  std::vector<std::byte> frame(wire::kMaxFrameLen);
  const auto wall0 = std::chrono::steady_clock::now();
  bool seen_start = false, over_limit = false;
  const detail::ReadPass p3 = detail::for_each_packet(o.capture, [&](uint64_t no, Nanos t, const wire::DecodedFrame& d) {
    if (over_limit) return;
    if (o.progress && (no & 4095) == 0) o.progress(no, r.frames);
    if (plan.is_response(d)) {
      if (!seen_start) return;
      const int64_t rel = cap_ref_rel + Psn(d.roce.hdr.bth.psn).distance(Psn(cap_ref_psn));
      cmp.on_response(true, rel, d.roce, no, mem.determined(true, rel, d.roce));
      return;
    }
    if (!plan.is_request(d)) return;
    const wire::RoceHeaders& h0 = d.roce.hdr;
    const wire::OpInfo& info = h0.info();
    if (!seen_start) {
      if (h0.bth.psn.value() != plan.start_psn || !detail::starts_message(info)) {
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
    const std::optional<Nanos> due = pacer.due(t);
    live->pump(due.value_or(live->now()), !due);
    // The pages it writes count against the memory limit before it is sent.
    const bool refused = sp.refused.count(h0.bth.psn.value()) != 0;
    int64_t answer = -1;
    if (!mem.on_request(d.roce, rel, refused, no, &answer)) {
      over_limit = true;
      return;
    }
    cmp.on_request(rel, no, h0.bth.ack_req);
    if (answer >= 0) cmp.on_answer_asked(answer);
    // Remapped: QPN, PSN, P_Key, R_Keys; the VAs stay (each MR sits at the
    // capture's I/O virtual addresses).
    wire::RoceHeaders h = h0;
    h.bth.dest_qpn = wire::Qpn(r.live_qpn);
    h.bth.psn = Psn(static_cast<uint32_t>(rel));
    h.bth.pkey = wire::kDefaultPkey;
    auto remap = [&](uint32_t rkey) {
      auto it = mem.mrs().find(rkey);
      return it == mem.mrs().end() ? kBogusRkey : it->second.mr->rkey();
    };
    if (info.carries(wire::Hdr::kReth)) h.reth.rkey = remap(h0.reth.rkey);
    if (info.carries(wire::Hdr::kAtomicEth)) h.atomic_eth.rkey = remap(h0.atomic_eth.rkey);
    wire::IpUdpInfo ip;
    ip.src = rs.req_ip;
    ip.dst = rs.resp_ip;
    ip.sport = d.ip.info.sport;
    ip.tclass = d.ip.info.tclass;
    auto n = wire::build_frame(frame, ip, h, d.roce.payload, false);
    if (!n) {
      ++r.requests_skipped;
      return;
    }
    const size_t iph = wire::ip_udp_header_len(ip.dst.v6);
    live_ref_rel = rel;
    live_ref_psn = h.bth.psn.value();
    any_sent = true;
    live->send(emu::Datagram{ip, std::span<const std::byte>(frame.data() + iph, *n - iph)});
    ++r.requests;
    max_rel = std::max(max_rel, rel);
    if (max_rel >= next_judged) {
      next_judged = max_rel + 256;
      cmp.finalize(max_rel - kWindow);
      mem.forget_before(max_rel - kWindow);
    }
  });
  live->pump(live->now(), true);
  cmp.finalize(INT64_MAX);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.virtual_time = live->now() - vt0;
  if (o.progress) o.progress(r.frames, r.frames);
  r.memory_written = mem.bytes_written();
  if (!p3.ok) return fail("cannot read as a capture: " + p3.error);
  if (over_limit) return fail(mem.over_limit(), "max_memory");
  live->detach_tap();
  if (writer) {
    if (auto ec = writer->close()) return fail(o.pcap + ": " + ec.message());
  }
  r.status = r.behaviour ? 1 : 0;
  if (!r.damaged.empty()) r.status = 2;
  return r;
}

}  // namespace rocelab::replay
