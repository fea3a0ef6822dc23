#include "tools/decode_summary.h"

#include <cstdio>

#include "tools/json_line.h"

namespace rocelab::tools {

using wire::OpClass;

namespace {
constexpr size_t kListedRetransmits = 16;  // the text table lists this many PSNs, then "..."
}

void Summary::add(const Endpoints& e, const wire::RocePacket& p, bool icrc_ok) {
  const auto& h = p.hdr;
  const Key key{e.src, e.dst, h.bth.dest_qpn.value()};
  auto [it, inserted] = index_.try_emplace(key, qps_.size());
  if (inserted) {
    QpStats q;
    q.src = e.src;
    q.dst = e.dst;
    q.dest_qpn = h.bth.dest_qpn;
    q.psn_lo = q.psn_hi = h.bth.psn;
    qps_.push_back(std::move(q));
  }
  QpStats& q = qps_[it->second];
  ++q.packets;
  if (!icrc_ok) ++q.bad_icrc;
  ++q.per_opcode[h.bth.opcode];
  if (h.bth.psn.before(q.psn_lo)) q.psn_lo = h.bth.psn;
  if (h.bth.psn.after(q.psn_hi)) q.psn_hi = h.bth.psn;
  const wire::OpInfo& info = h.info();
  // A request PSN seen twice on one QP is a retransmission (IBTA 9.7.5.1: the
  // requester resends from the oldest unacknowledged PSN).
  if (info.is(OpClass::kRequest) && !q.request_psns.insert(h.bth.psn.value()).second)
    q.retransmitted.push_back(h.bth.psn.value());
  if (info.carries(wire::Hdr::kAeth)) {
    switch (h.aeth.kind()) {
      case wire::AckKind::kNak: ++q.naks[h.aeth.value5()]; break;
      case wire::AckKind::kRnrNak: ++q.rnr_naks; break;
      case wire::AckKind::kAck:
      case wire::AckKind::kReserved: break;
    }
  }
}

std::string Summary::text() const {
  std::string s = "\nPer-QP summary (" + std::to_string(qps_.size()) +
                  " QPs, keyed by source -> destination and destination QP)\n";
  for (const QpStats& q : qps_) {
    s += q.src + " -> " + q.dst + " QP " + hex(q.dest_qpn.value(), 6) +
         ": " + std::to_string(q.packets) + " packets, PSN " + std::to_string(q.psn_lo.value()) +
         ".." + std::to_string(q.psn_hi.value());
    if (q.bad_icrc != 0) s += ", " + std::to_string(q.bad_icrc) + " bad ICRC";
    s += "\n";
    for (const auto& [code, n] : q.per_opcode) {
      char line[96];
      std::snprintf(line, sizeof line, "    %-40s %8llu\n",
                    std::string(wire::op_info(code).name).c_str(),
                    static_cast<unsigned long long>(n));
      s += line;
    }
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

std::vector<std::string> Summary::json() const {
  std::vector<std::string> out;
  for (const QpStats& q : qps_) {
    JsonLine j;
    j.str("type", "qp").str("src", q.src).str("dst", q.dst);
    j.num("dest_qp", q.dest_qpn.value()).num("packets", q.packets).num("bad_icrc", q.bad_icrc);
    JsonLine ops;
    for (const auto& [code, n] : q.per_opcode) ops.num(wire::op_info(code).name, n);
    j.raw("opcodes", ops.done());
    j.num("psn_lo", q.psn_lo.value()).num("psn_hi", q.psn_hi.value());
    std::string list = "[";
    for (size_t i = 0; i < q.retransmitted.size(); ++i)
      list += (i == 0 ? "" : ",") + std::to_string(q.retransmitted[i]);
    j.raw("retransmitted_psns", list + "]");
    JsonLine naks;
    for (size_t code = 0; code < q.naks.size(); ++code)
      if (q.naks[code] != 0) naks.num(std::to_string(code), q.naks[code]);
    j.raw("naks", naks.done()).num("rnr_naks", q.rnr_naks);
    out.push_back(j.done());
  }
  return out;
}

}  // namespace rocelab::tools
