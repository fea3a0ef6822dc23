#include "replay/plan.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "replay/live_memory.h"
#include "trace/check.h"
#include "wire/aeth.h"

namespace rocelab::replay::detail {

bool make_plan(const ReplayOptions& o, ReplayResult& r, Plan& plan) {
  auto fail = [&](std::string why) {
    r.status = 2;
    r.error = std::move(why);
    return false;
  };
  // The PSN spaces (src/trace pairs responses with their requests) and what
  // each one's responder needs.
  std::vector<SpaceInfo> spaces;
  {
    trace::Analyzer an(trace::CheckOptions{o.mtu, 1});
    std::string src, dst;
    wire::IpAddr last_src, last_dst;
    bool named = false;
    const ReadPass p1 = for_each_packet(o.capture, [&](uint64_t no, Nanos t, const wire::DecodedFrame& d) {
      if (named && d.ip.info.src == last_dst && d.ip.info.dst == last_src) {  // the other way: a response
        std::swap(last_src, last_dst);
        std::swap(src, dst);
      } else if (!named || !(d.ip.info.src == last_src) || !(d.ip.info.dst == last_dst)) {  // names when they change
        last_src = d.ip.info.src;
        last_dst = d.ip.info.dst;
        src = last_src.to_string();
        dst = last_dst.to_string();
        named = true;
      }
      trace::TracePacket tp;
      tp.number = no;
      tp.time = t;
      tp.src = src;
      tp.dst = dst;
      tp.tclass = d.ip.info.tclass;
      tp.packet = &d.roce;
      tp.icrc_ok = d.icrc_ok();
      const int si = an.add(tp);
      if (si < 0) return;
      if (spaces.size() <= static_cast<size_t>(si)) spaces.resize(static_cast<size_t>(si) + 1);
      SpaceInfo& s = spaces[static_cast<size_t>(si)];
      const wire::RoceHeaders& h = d.roce.hdr;
      const wire::OpInfo& info = h.info();
      const auto len = static_cast<uint32_t>(d.roce.payload.size());
      if ((info.is(OpClass::kFirst) && !info.is(OpClass::kLast)) || info.is(OpClass::kMiddle))
        s.mtu_seen = std::max(s.mtu_seen, len);
      s.max_payload = std::max(s.max_payload, len);
      const wire::Psn psn = h.bth.psn;
      if (info.is(OpClass::kRequest)) {
        if (s.requests++ == 0) {
          s.req_addr = d.ip.info.src;
          s.resp_addr = d.ip.info.dst;
          s.resp_qpn = h.bth.dest_qpn.value();
          s.transport = info.transport;
        }
        // What the responder needs: from the first message start on.
        if (!s.started) {
          if (!starts_message(info)) return;
          s.started = true;
          s.start_psn = s.ref_psn = psn.value();
        }
        const int64_t rel = s.ref_rel + psn.distance(wire::Psn(s.ref_psn));
        s.ref_rel = rel;
        s.ref_psn = psn.value();
        SpaceInfo::Use u;
        bool uses = false;
        // A range that reaches past 2^64 - 1 is in no span: the live
        // responder refuses it, as any responder whose MRs do not wrap.
        if (info.carries(wire::Hdr::kReth) && h.reth.dma_len != 0) {
          u = {h.reth.rkey, h.reth.va & ~uint64_t{7}, h.reth.va + h.reth.dma_len};
          uses = h.reth.va <= UINT64_MAX - h.reth.dma_len;
        } else if (info.carries(wire::Hdr::kAtomicEth)) {
          u = {h.atomic_eth.rkey, h.atomic_eth.va & ~uint64_t{7}, h.atomic_eth.va + 8};
          uses = h.atomic_eth.va <= UINT64_MAX - 8;
        }
        if (uses) {
          if (info.transport != wire::Transport::kRC) {
            s.accept(u);  // nobody answers: nothing is refused
          } else {
            s.pending[rel] = u;
            if (s.pending.size() > 65536) s.accept_upto(s.pending.begin()->first);
          }
        }
        if (info.is(OpClass::kSend)) {
          if (info.is(OpClass::kFirst)) s.send_len = 0;
          s.send_len += len;
          if (info.is(OpClass::kLast)) {
            ++s.recv_needed;
            s.max_send = std::max(s.max_send, s.send_len);
          }
        } else if (info.is(OpClass::kWrite) && info.is(OpClass::kImm) && info.is(OpClass::kLast)) {
          ++s.recv_needed;
        }
      } else {
        ++s.responses;
        s.req_qpn = h.bth.dest_qpn.value();
        if (!info.carries(wire::Hdr::kAeth)) return;
        const int64_t rel = s.ref_rel + psn.distance(wire::Psn(s.ref_psn));
        const bool refusal = h.aeth.kind() == wire::AckKind::kNak &&
                             h.aeth.value5() != static_cast<uint8_t>(wire::NakCode::kPsnSeqError);
        if (refusal && s.refused.size() < 65536) s.refused.insert(psn.value());
        if (!s.started) return;
        if (h.aeth.kind() == wire::AckKind::kAck) {
          // A READ's First response acknowledges what came before the READ.
          const bool read_first = info.is(OpClass::kRead) && info.is(OpClass::kFirst) && !info.is(OpClass::kLast);
          s.accept_upto(read_first ? rel - 1 : rel);
        } else {
          s.accept_upto(rel - 1);
          if (refusal) s.pending.erase(rel);
        }
      }
    });
    if (!p1.ok) return fail("cannot read as a capture: " + p1.error);
    r.frames = p1.frames;
    r.packets = p1.packets;
    r.damaged = p1.damaged;
  }

  // Which connection.
  std::vector<size_t> all;
  for (size_t i = 0; i < spaces.size(); ++i)
    if (spaces[i].requests && (spaces[i].transport == wire::Transport::kRC || spaces[i].transport == wire::Transport::kUC))
      all.push_back(i);
  auto choice_text = [&](size_t i) {
    const SpaceInfo& s = spaces[i];
    ConnectionChoice c;
    c.qpn = s.req_qpn.value_or(s.resp_qpn);
    for (size_t j : all)  // does the QPN name this space alone?
      if (j != i && spaces[j].req_qpn.value_or(spaces[j].resp_qpn) == c.qpn) c.from = s.req_addr.to_string();
    c.text = s.name() + "  " + std::string(wire::to_string(s.transport)) + ", " + std::to_string(s.requests) +
             " requests";
    return c;
  };
  if (all.empty()) return fail("no RC or UC connection with requests in this capture");
  std::vector<size_t> cand;
  for (size_t i : all)
    if (o.from.empty() || spaces[i].req_addr.to_string() == o.from) cand.push_back(i);
  if (cand.empty()) {
    for (size_t j : all) r.choices.push_back(choice_text(j));
    return fail("no connection's requester is at " + o.from);
  }
  size_t pick = cand.front();
  if (o.qp) {
    std::vector<size_t> by_req, by_resp;
    for (size_t i : cand) {
      if (spaces[i].req_qpn && *spaces[i].req_qpn == *o.qp) by_req.push_back(i);
      if (spaces[i].resp_qpn == *o.qp) by_resp.push_back(i);
    }
    const std::vector<size_t>& m = by_req.empty() ? by_resp : by_req;
    if (m.size() != 1) {
      for (size_t i : m.empty() ? cand : m) r.choices.push_back(choice_text(i));
      return fail(m.empty() ? "no connection has QP " + qpn_text(*o.qp)
                            : "several connections have QP " + qpn_text(*o.qp));
    }
    pick = m.front();
  } else {
    // One connection: its direction with the most requests.
    for (size_t i : cand)
      if (i != pick && !spaces[i].connected_to(spaces[pick]) && !spaces[pick].connected_to(spaces[i])) {
        for (size_t j : cand) r.choices.push_back(choice_text(j));
        return fail("the capture holds several connections: choose one by its QPN");
      }
    for (size_t i : cand)
      if (spaces[i].requests > spaces[pick].requests) pick = i;
  }
  plan.sp = spaces[pick];
  const SpaceInfo& sp = plan.sp;
  for (size_t i : all)
    if (i != pick && (sp.connected_to(spaces[i]) || spaces[i].connected_to(sp)))
      r.other_direction = choice_text(i);
  spaces.clear();
  r.connection = sp.name();
  r.transport = std::string(wire::to_string(sp.transport));
  plan.mtu = o.mtu ? o.mtu : sp.mtu_seen ? round_mtu(sp.mtu_seen) : std::max<uint32_t>(1024, round_mtu(sp.max_payload));

  // What the responder needs (the requests nobody answered count: the capture ended).
  plan.sp.accept_upto(INT64_MAX);
  auto& mrs = plan.regions;
  mrs = plan.sp.regions;
  const bool started = sp.started;
  const uint32_t start_psn = sp.start_psn;
  plan.start_psn = sp.start_psn;
  plan.recv_needed = sp.recv_needed;
  plan.max_send = sp.max_send;
  if (!started) return fail("connection " + r.connection + ": no request starts a message (First or Only)");
  r.start_psn = start_psn;
  r.mtu = plan.mtu;
  // The live MRs' address ranges, together, within the span limit (their pages
  // cost only when written: live_memory.h).
  uint64_t total = 0;
  for (auto& [rkey, m] : mrs) {
    const uint64_t n = m.hi - m.lo;
    if (n > o.max_span - std::min(total, o.max_span) || n > kMaxOneSpan) {
      char b[224];
      std::snprintf(b, sizeof b,
                    "the requests of R_Key 0x%08x reach VA 0x%llx..0x%llx, a span of %llu bytes: the live MRs would "
                    "span more than the limit of %llu bytes",
                    rkey, static_cast<unsigned long long>(m.lo), static_cast<unsigned long long>(m.hi - 1),
                    static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(std::min(o.max_span, kMaxOneSpan)));
      r.limit = "max_span";
      return fail(b);
    }
    total += n;
  }

  return true;
}

}  // namespace rocelab::replay::detail
