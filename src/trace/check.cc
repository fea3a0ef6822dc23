#include "trace/check.h"

#include <algorithm>
#include <cstdio>

#include "present/fields.h"
#include "trace/space.h"

namespace rocelab::trace {

using present::qpn_text;
using wire::OpClass;
using wire::Psn;

Analyzer::Analyzer(CheckOptions opt) : opt_(opt) {}

Analyzer::~Analyzer() = default;

void Analyzer::report(int space, std::string_view rule, std::vector<uint64_t> packets, std::string text) {
  const Rule* r = find_rule(rule);
  const Severity sev = r ? r->severity : Severity::kError;
  (sev == Severity::kError ? errors_ : notices_)++;
  if (space >= 0) {
    SpaceSummary& s = spaces_[static_cast<size_t>(space)]->sum;
    (sev == Severity::kError ? s.errors : s.notices)++;
  }
  uint64_t& kept = kept_[{space, rule}];
  if (opt_.max_findings_per_rule != 0 && kept >= opt_.max_findings_per_rule) {
    if (space >= 0) ++spaces_[static_cast<size_t>(space)]->sum.findings_not_kept;
    return;
  }
  ++kept;
  findings_.push_back({rule, sev, std::move(packets), std::move(text), space});
}

int Analyzer::space_for_request(const TracePacket& p) {
  const FlowKey key{std::string(p.src), std::string(p.dst), p.packet->hdr.bth.dest_qpn.value()};
  auto [it, inserted] = request_flows_.emplace(key, static_cast<int>(spaces_.size()));
  if (inserted) {
    auto s = std::make_unique<Space>();
    s->req_addr = p.src;
    s->resp_addr = p.dst;
    s->resp_qpn = p.packet->hdr.bth.dest_qpn.value();
    s->transport = p.packet->hdr.info().transport;
    s->mtu = opt_.mtu;
    s->sum.transport = std::string(wire::to_string(s->transport));
    spaces_.push_back(std::move(s));
  }
  return it->second;
}

// The PSN space a response belongs to: the response flow (responder ->
// requester, requester's QPN) is bound to a request flow the other way at its
// first response, choosing among the requester's spaces towards that
// responder the one whose outstanding PSNs hold the response's PSN.
int Analyzer::space_for_response(const TracePacket& p) {
  const uint32_t qpn = p.packet->hdr.bth.dest_qpn.value();
  const FlowKey key{std::string(p.src), std::string(p.dst), qpn};
  if (auto it = response_flows_.find(key); it != response_flows_.end()) return it->second;
  const Psn psn = p.packet->hdr.bth.psn;
  int best = -1;
  for (size_t i = 0; i < spaces_.size(); ++i) {
    Space& s = *spaces_[i];
    if (s.req_addr != p.dst || s.resp_addr != p.src || (s.req_qpn && *s.req_qpn != qpn) || !s.started) continue;
    if (s.req_qpn) continue;  // bound to another response flow
    const bool holds = s.outstanding.count(psn.value()) || s.reads.count(psn.value()) ||
                       (!psn.before(s.acked.value_or(psn)) && psn.before(s.next));
    if (holds || best < 0) best = static_cast<int>(i);
    if (holds) break;
  }
  if (best < 0) return -1;
  spaces_[static_cast<size_t>(best)]->req_qpn = qpn;
  response_flows_[key] = best;
  return best;
}

int Analyzer::add(const TracePacket& p) {
  const wire::RoceHeaders& h = p.packet->hdr;
  const wire::OpInfo& info = h.info();
  if ((p.tclass & 3) == 3) report(-1, rule::kEcnCe, {p.number}, std::string(p.src) + " -> " + std::string(p.dst) +
                                                              ": " + std::string(info.name) + " PSN " +
                                                              std::to_string(h.bth.psn.value()) +
                                                              " arrived marked Congestion Experienced");
  if (info.is(OpClass::kCnp)) {
    report(-1, rule::kCnp, {p.number}, std::string(p.src) + " -> " + std::string(p.dst) + " qp " +
                                            qpn_text(h.bth.dest_qpn.value()) + ": a CNP (slow down)");
    return -1;
  }
  if (info.transport == wire::Transport::kUD) {
    on_ud(p);
    return -1;
  }
  if (info.is(OpClass::kRequest)) {
    const int s = space_for_request(p);
    on_request(s, p);
    return s;
  }
  if (info.is(OpClass::kResponse)) {
    const int s = space_for_response(p);
    if (s < 0) {
      const FlowKey key{std::string(p.src), std::string(p.dst), h.bth.dest_qpn.value()};
      if (!response_flows_.count(key)) {
        response_flows_[key] = -1;  // said once per flow
        report(-1, rule::kResponseUnmatched, {p.number},
               std::string(p.src) + " -> " + std::string(p.dst) + " qp " + qpn_text(h.bth.dest_qpn.value()) + ": " +
                   std::string(info.name) + " PSN " + std::to_string(h.bth.psn.value()) +
                   ": no request of this capture goes the other way (it began after them?)");
      }
      return -1;
    }
    on_response(s, p);
    return s;
  }
  return -1;
}

void Analyzer::on_ud(const TracePacket& p) {
  const wire::RoceHeaders& h = p.packet->hdr;
  const FlowKey key{std::string(p.src), std::string(p.dst), h.bth.dest_qpn.value()};
  auto [it, fresh] = ud_qkeys_.emplace(key, h.deth.qkey);
  if (!fresh && it->second != h.deth.qkey) {
    char b[64];
    std::snprintf(b, sizeof b, "Q_Key 0x%08x, earlier 0x%08x", h.deth.qkey, it->second);
    report(-1, rule::kUdQkey, {p.number},
           std::string(p.src) + " -> " + std::string(p.dst) + " qp " + qpn_text(h.bth.dest_qpn.value()) + ": " + b);
    it->second = h.deth.qkey;
  }
  if (!p.icrc_ok) report(-1, rule::kIcrcBad, {p.number}, "UD " + std::string(p.src) + " -> " + std::string(p.dst) + ": the ICRC does not match");
}

void Analyzer::finish() {
  for (size_t i = 0; i < spaces_.size(); ++i) {
    Space& a = *spaces_[i];
    for (size_t j = i + 1; j < spaces_.size(); ++j) {
      Space& b = *spaces_[j];
      if (a.req_addr == b.resp_addr && a.resp_addr == b.req_addr && a.req_qpn && *a.req_qpn == b.resp_qpn &&
          (!b.req_qpn || *b.req_qpn == a.resp_qpn)) {
        a.sum.peer = static_cast<int>(j);
        b.sum.peer = static_cast<int>(i);
      }
    }
  }
}

std::vector<SpaceSummary> Analyzer::spaces() const {
  std::vector<SpaceSummary> out;
  for (const auto& sp : spaces_) {
    SpaceSummary s = sp->sum;
    s.requester = sp->req_addr + (sp->req_qpn ? " qp " + qpn_text(*sp->req_qpn) : std::string(""));
    s.responder = sp->resp_addr + " qp " + qpn_text(sp->resp_qpn);
    if (!sp->rtts.empty()) {
      std::vector<Nanos> v = sp->rtts;
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      s.rtt_median = v[v.size() / 2];
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rocelab::trace
