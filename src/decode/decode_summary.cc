#include "decode/decode_summary.h"

#include <cstdio>

#include "present/fields.h"
#include "present/json.h"

namespace rocelab::decode {

using present::aeth_text;
using present::hex;
using wire::OpClass;

namespace {
constexpr size_t kListedRetransmits = 16;  // the text table lists this many PSNs, then "..."
}

void Summary::add(const Endpoints& e, const wire::RocePacket& p, bool icrc_ok, std::chrono::nanoseconds ts) {
  const auto& h = p.hdr;
  const wire::OpInfo& info = h.info();
  trace::TracePacket tp;
  tp.number = ++number_;
  tp.time = ts;
  tp.src = e.src;
  tp.dst = e.dst;
  tp.tclass = e.ip ? e.ip->tclass : 0;
  tp.packet = &p;
  tp.icrc_ok = icrc_ok;
  const int space = analyzer_.add(tp);
  size_t idx;
  if (space >= 0) {
    auto [it, fresh] = by_space_.try_emplace(space, stats_.size());
    if (fresh) stats_.push_back({std::string(wire::to_string(info.transport)), "", "", 0, space});
    idx = it->second;
  } else {
    // UD (and what belongs to no PSN space): per flow.
    auto [it, fresh] = by_ud_flow_.try_emplace({e.src, e.dst, h.bth.dest_qpn.value()}, stats_.size());
    if (fresh) stats_.push_back({std::string(wire::to_string(info.transport)), e.src, e.dst, h.bth.dest_qpn.value(), -1});
    idx = it->second;
  }
  SpaceStats& q = stats_[idx];
  ++q.packets;
  if (!icrc_ok) ++q.bad_icrc;
  ++q.per_opcode[h.bth.opcode];
  if (info.is(OpClass::kResponse)) ++q.responses;
  if (info.is(OpClass::kRequest)) {
    ++q.requests;
    if (!q.have_psn) {
      q.psn_lo = q.psn_hi = h.bth.psn;
      q.have_psn = true;
    }
    if (h.bth.psn.before(q.psn_lo)) q.psn_lo = h.bth.psn;
    if (h.bth.psn.after(q.psn_hi)) q.psn_hi = h.bth.psn;
    // A request PSN seen twice in one PSN space was sent again (rocelab check
    // says why: a NAK, a timeout, or the network's copy).
    if (!q.request_psns.insert(h.bth.psn.value()).second) q.retransmitted.push_back(h.bth.psn.value());
  }
  if (info.carries(wire::Hdr::kAeth)) {
    switch (h.aeth.kind()) {
      case wire::AckKind::kNak: ++q.naks[h.aeth.value5()]; break;
      case wire::AckKind::kRnrNak: ++q.rnr_naks; break;
      case wire::AckKind::kAck:
      case wire::AckKind::kReserved: break;
    }
  }
}

std::string Summary::title(const SpaceStats& q) const {
  if (q.space < 0) return q.src + " -> " + q.dst + " QP " + hex(q.ud_qpn, 6);
  const trace::SpaceSummary& s = spaces_[static_cast<size_t>(q.space)];
  return s.requester + " -> " + s.responder;
}

std::string Summary::text() {
  spaces_ = analyzer_.spaces();
  std::string s = "\nPer-connection summary (" + std::to_string(stats_.size()) +
                  " PSN spaces or UD flows; a PSN space is one requester's requests and its responder's responses)\n";
  for (const SpaceStats& q : stats_) {
    s += title(q) + " (" + q.transport + "): " + std::to_string(q.packets) + " packets";
    if (q.space >= 0) {
      s += " (" + std::to_string(q.requests) + " requests, " + std::to_string(q.responses) + " responses)";
      if (q.have_psn) s += ", request PSN " + std::to_string(q.psn_lo.value()) + ".." + std::to_string(q.psn_hi.value());
    }
    if (q.bad_icrc != 0) s += ", " + std::to_string(q.bad_icrc) + " bad ICRC";
    s += "\n";
    for (const auto& [code, n] : q.per_opcode) {
      char line[96];
      std::snprintf(line, sizeof line, "    %-40s %8llu\n", std::string(wire::op_info(code).name).c_str(),
                    static_cast<unsigned long long>(n));
      s += line;
    }
    if (q.space < 0) continue;
    s += "    retransmitted PSNs: " + std::to_string(q.retransmitted.size());
    for (size_t i = 0; i < q.retransmitted.size() && i < kListedRetransmits; ++i)
      s += (i == 0 ? " (" : " ") + std::to_string(q.retransmitted[i]);
    if (q.retransmitted.size() > kListedRetransmits) s += " ...";
    if (!q.retransmitted.empty()) s += ")";
    s += "\n    NAKs:";
    bool any = false;
    for (size_t code = 0; code < q.naks.size(); ++code) {
      if (q.naks[code] == 0) continue;
      wire::Aeth a = wire::Aeth{static_cast<uint8_t>(0x60 | code), 0};
      s += (any ? ", " : " ") + aeth_text(a).substr(4) + " x" + std::to_string(q.naks[code]);
      any = true;
    }
    if (!any) s += " none";
    s += "; RNR NAKs: " + std::to_string(q.rnr_naks) + "\n";
  }
  return s;
}

std::vector<std::string> Summary::json() {
  spaces_ = analyzer_.spaces();
  std::vector<std::string> out;
  for (const SpaceStats& q : stats_) {
    present::Json j;
    if (q.space >= 0) {
      const trace::SpaceSummary& sp = spaces_[static_cast<size_t>(q.space)];
      j = {{"type", "psn_space"}, {"requester", sp.requester}, {"responder", sp.responder}};
    } else {
      j = {{"type", "ud_flow"}, {"src", q.src}, {"dst", q.dst}, {"dest_qp", q.ud_qpn}};
    }
    j["transport"] = q.transport;
    j["packets"] = q.packets;
    j["requests"] = q.requests;
    j["responses"] = q.responses;
    j["bad_icrc"] = q.bad_icrc;
    present::Json ops = present::Json::object();
    for (const auto& [code, n] : q.per_opcode) ops[std::string(wire::op_info(code).name)] = n;
    j["opcodes"] = std::move(ops);
    if (q.have_psn) {
      j["psn_lo"] = q.psn_lo.value();
      j["psn_hi"] = q.psn_hi.value();
    }
    j["retransmitted_psns"] = q.retransmitted;
    present::Json naks = present::Json::object();
    for (size_t code = 0; code < q.naks.size(); ++code)
      if (q.naks[code] != 0) naks[std::to_string(code)] = q.naks[code];
    j["naks"] = std::move(naks);
    j["rnr_naks"] = q.rnr_naks;
    out.push_back(present::json_line(j));
  }
  return out;
}

}  // namespace rocelab::decode
