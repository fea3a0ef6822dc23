#include "trace/check.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "present/fields.h"
#include "wire/aeth.h"

namespace rocelab::trace {

namespace {

using present::qpn_text;
using wire::OpClass;
using wire::Psn;

// The smallest retransmit timeout a QP can have (IBTA: 4.096 us * 2^timeout,
// timeout >= 1): the same request seen again sooner was not retransmitted by
// the requester but duplicated by the network.
constexpr Nanos kMinTimeout{8192};

std::string us(Nanos t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f us", static_cast<double>(t.count()) / 1000.0);
  return b;
}

std::string num(uint64_t n) { return "#" + std::to_string(n); }

}  // namespace

struct Analyzer::Space {
  std::string req_addr, resp_addr;
  uint32_t resp_qpn = 0;                // the destination QPN of the requests
  std::optional<uint32_t> req_qpn;      // the destination QPN of the responses, once seen
  wire::Transport transport = wire::Transport::kRC;
  uint32_t mtu = 0;  // the path MTU: given, or learned from this space's First/Middle packets

  struct Sent {
    uint64_t first_no = 0, last_no = 0;
    Nanos first_t{0}, last_t{0};
    bool ack_req = false, retransmitted = false, atomic = false;
  };
  bool started = false;
  Psn next;                       // the next new request PSN the requester will use
  bool next_unknown = false;      // after a READ of unknown PSN count
  Psn epsn;                       // what the responder expects (from the requests seen in order)
  // Its recent values: a NAK crosses the requests in flight, so it may name
  // what the responder expected a moment before the capture shows.
  std::array<uint32_t, 64> epsn_history{};
  size_t epsn_changes = 0;
  void set_epsn(Psn e) {
    if (e == epsn) return;
    epsn_history[epsn_changes++ % epsn_history.size()] = epsn.value();
    epsn = e;
  }
  bool recent_epsn(Psn q) const {
    const size_t n = std::min(epsn_changes, epsn_history.size());
    for (size_t i = 0; i < n; ++i)
      if (epsn_history[i] == q.value()) return true;
    return false;
  }
  std::map<uint32_t, Sent> outstanding;  // not yet acknowledged, by PSN
  std::map<uint32_t, uint64_t> missing;  // PSNs skipped by a gap, not seen since (-> the packet after the gap)
  std::optional<Psn> acked;       // the highest PSN acknowledged
  uint64_t acked_no = 0;

  struct Nak {
    bool valid = false;
    Psn psn;
    uint64_t no = 0;
    Nanos t{0};
    uint32_t wait_us = 0;  // RNR: the delay asked for
  };
  Nak nak_seq, rnr;
  std::string burst_cause;        // go-back-N in progress: why it started
  Psn burst_next;

  // The message being sent (sequence and length checks on new packets).
  bool synced = false;            // a message start was seen (the capture may begin mid-message)
  bool msg_open = false;
  bool msg_write = false;
  uint64_t msg_first_no = 0, msg_bytes = 0;
  std::optional<uint32_t> msg_reth_len;

  struct Read {
    uint64_t no = 0;
    uint32_t length = 0;
    std::optional<Psn> next_resp;  // the PSN the next Middle/Last response must carry
    uint64_t bytes = 0;
    Psn first_resp;
    bool whole = true;  // every response so far arrived, in order
    std::optional<Psn> lost_from;  // the first response that did not arrive
  };
  std::map<uint32_t, uint64_t> read_lost;  // response PSN lost -> the packet after the gap
  std::map<uint32_t, Read> reads;  // by request PSN (erased when answered)

  std::optional<uint16_t> pkey;
  std::optional<uint32_t> msn;

  SpaceSummary sum;
  std::vector<Nanos> rtts;         // a bounded sample for the median
  uint64_t rtt_seen = 0;
};

Analyzer::Analyzer(CheckOptions opt) : opt_(opt) {}

namespace {

// A First or Middle packet carries exactly one path MTU.
void learn_mtu(Analyzer::Space& s, const wire::OpInfo& info, uint32_t len) {
  if (s.mtu == 0 && (info.is(OpClass::kMiddle) || (info.is(OpClass::kFirst) && !info.is(OpClass::kLast))))
    s.mtu = len;
}

// State stays bounded when a capture holds only one direction (no ACK ever
// retires a request) or a UC connection (no ACKs at all): what lies more than
// kWindow PSNs behind the newest is forgotten.
constexpr uint32_t kWindow = 1u << 16;
template <typename Map>
void forget_old(Map& m, Psn newest) {
  if (m.size() > kWindow) m.erase((newest - kWindow).value());
  while (m.size() > 2 * kWindow) m.erase(m.begin());
}

}  // namespace
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

void Analyzer::on_request(int si, const TracePacket& p) {
  Space& s = *spaces_[static_cast<size_t>(si)];
  const wire::RoceHeaders& h = p.packet->hdr;
  const wire::OpInfo& info = h.info();
  const Psn psn = h.bth.psn;
  const uint32_t len = static_cast<uint32_t>(p.packet->payload.size());
  learn_mtu(s, info, len);
  // The words of a finding, built only when there is one (no allocation per packet).
  auto where = [&] { return s.req_addr + " -> " + s.resp_addr + " qp " + qpn_text(s.resp_qpn) + ": "; };
  auto what = [&] { return std::string(info.name) + " PSN " + std::to_string(psn.value()); };
  ++s.sum.requests;

  if (!p.icrc_ok) report(si, rule::kIcrcBad, {p.number}, where() + what() + ": the ICRC does not match");
  if (s.pkey && *s.pkey != h.bth.pkey) {
    char b[48];
    std::snprintf(b, sizeof b, ": P_Key 0x%04x, earlier 0x%04x", h.bth.pkey, *s.pkey);
    report(si, rule::kPkeyChanged, {p.number}, where() + what() + b);
  }
  s.pkey = h.bth.pkey;
  if ((len + h.bth.pad_count) % 4 != 0)
    report(si, rule::kPadAlign, {p.number}, where() + what() + ": payload " + std::to_string(len) + " + pad " +
                                                std::to_string(h.bth.pad_count) + " is not a multiple of 4");

  // How many PSNs this request uses: a READ reserves one per response.
  const bool read = info.is(OpClass::kRead);
  uint32_t consumed = 1;
  bool consumed_known = true;
  if (read) {
    if (s.mtu != 0) {
      consumed = std::max<uint32_t>(1, (h.reth.dma_len + s.mtu - 1) / s.mtu);
    } else {
      consumed_known = false;
    }
  }
  if (!s.started) {
    s.started = true;
    s.next = psn;
    s.epsn = psn;
  }
  const int32_t d = psn.distance(s.next);
  if (d >= 0) {
    // A new request. A gap: packets in between never reached this point.
    if (d > 0 && !s.next_unknown) {
      ++s.sum.gaps;
      report(si, rule::kPsnGap, {p.number},
             where() + what() + ": expected PSN " + std::to_string(s.next.value()) + ", " + std::to_string(d) +
                 " packet" + (d == 1 ? "" : "s") + " missing before it");
      s.msg_open = false;  // what was missing may have opened or closed a message
      s.synced = false;
      for (int32_t k = 0; k < std::min<int32_t>(d, 4096) && s.missing.size() < 65536; ++k)
        s.missing[(s.next + static_cast<uint32_t>(k)).value()] = p.number;
    }
    s.next_unknown = false;
    s.burst_cause.clear();
    // The message: sequence, lengths, pad.
    const bool first = info.is(OpClass::kFirst), last = info.is(OpClass::kLast);
    const bool middle = info.is(OpClass::kMiddle);
    const bool write = info.is(OpClass::kWrite);
    if (first || (!middle && !last)) {  // First, Only, or a single-packet READ/atomic
      if (s.msg_open)
        report(si, rule::kSeqInside, {p.number, s.msg_first_no},
               where() + what() + ": a new message while the one begun at " + num(s.msg_first_no) + " has no Last");
      s.synced = true;
      s.msg_open = first && !last;
      s.msg_write = write;
      s.msg_first_no = p.number;
      s.msg_bytes = len;
      s.msg_reth_len.reset();
      if (info.carries(wire::Hdr::kReth) && write) s.msg_reth_len = h.reth.dma_len;
      if (first && last && s.msg_reth_len && len != *s.msg_reth_len)
        report(si, rule::kLenReth, {p.number}, where() + what() + ": payload " + std::to_string(len) +
                                                   " bytes, the RETH says " + std::to_string(*s.msg_reth_len));
    } else if (!s.msg_open) {
      if (s.synced)
        report(si, rule::kSeqNoFirst, {p.number}, where() + what() + ": no message is open (no First before it)");
    } else if (s.msg_write != write) {
      report(si, rule::kSeqNoFirst, {p.number, s.msg_first_no},
             where() + what() + ": the message begun at " + num(s.msg_first_no) + " is a " +
                 (s.msg_write ? "WRITE" : "SEND"));
      s.msg_open = false;
    } else {
      s.msg_bytes += len;
      if (last) {
        s.msg_open = false;
        if (s.msg_reth_len && s.msg_bytes != *s.msg_reth_len)
          report(si, rule::kLenReth, {p.number, s.msg_first_no},
                 where() + what() + ": the message from " + num(s.msg_first_no) + " carries " +
                     std::to_string(s.msg_bytes) + " bytes, its RETH says " + std::to_string(*s.msg_reth_len));
      }
    }
    if ((first && !last) || middle) {
      if (h.bth.pad_count != 0)
        report(si, rule::kPadFirstMiddle, {p.number}, where() + what() + ": pad " + std::to_string(h.bth.pad_count));
      if (s.mtu != 0 && len != s.mtu)
        report(si, rule::kLenMiddle, {p.number},
               where() + what() + ": payload " + std::to_string(len) + " bytes, the path MTU is " + std::to_string(s.mtu));
    }
    if (len > std::max<uint32_t>(s.mtu, 0) && s.mtu != 0 && (last || !middle))
      report(si, rule::kLenMtu, {p.number},
             where() + what() + ": payload " + std::to_string(len) + " bytes, the path MTU is " + std::to_string(s.mtu));
    else if (len > wire::kMaxMtu)
      report(si, rule::kLenMtu, {p.number}, where() + what() + ": payload " + std::to_string(len) + " bytes");

    Space::Sent& sent = s.outstanding[psn.value()];
    sent = {p.number, p.number, p.time, p.time, h.bth.ack_req, false, info.is(OpClass::kAtomic)};
    forget_old(s.outstanding, psn);
    if (read) {
      s.reads[psn.value()] = {p.number, h.reth.dma_len, std::nullopt, 0, psn, true};
      forget_old(s.reads, psn);
    }
    if (s.epsn == psn) s.set_epsn(psn + consumed);
    s.next = psn + consumed;
    if (!consumed_known) s.next_unknown = true;
    s.sum.bytes += len;
    return;
  }

  // Seen before: a retransmission, or the network's duplicate.
  auto it = s.outstanding.find(psn.value());
  Space::Sent* prev = it == s.outstanding.end() ? nullptr : &it->second;
  const bool acked = s.acked && !s.acked->before(psn);
  std::string cause;
  std::vector<uint64_t> pkts{p.number};
  if (prev) pkts.push_back(prev->last_no);
  const Nanos since = prev ? p.time - prev->last_t : Nanos(0);
  const bool nak_after = s.nak_seq.valid && (!prev || s.nak_seq.t >= prev->last_t) && !psn.before(s.nak_seq.psn);
  const bool rnr_after = s.rnr.valid && (!prev || s.rnr.t >= prev->last_t) && !psn.before(s.rnr.psn);
  auto lost = read ? s.read_lost.find(psn.value()) : s.read_lost.end();
  if (prev && since < kMinTimeout && !nak_after && !rnr_after && lost == s.read_lost.end()) {
    ++s.sum.duplicates;
    report(si, rule::kNetworkDuplicate, pkts,
           where() + what() + ": again " + us(since) + " after " + num(prev->last_no) +
               ", sooner than any retransmit timer: a copy made by the network");
    return;
  }
  if (auto m = s.missing.find(psn.value()); m != s.missing.end()) {
    const uint64_t after_no = m->second;
    s.missing.erase(m);
    if (!prev && !nak_after && !rnr_after) {
      // Missing until now and nobody asked for it again: it was overtaken.
      report(si, rule::kOutOfOrder, {p.number, after_no},
             where() + what() + ": arrives after " + num(after_no) + " that came later in sequence (reordered)");
      s.outstanding[psn.value()] = {p.number, p.number, p.time, p.time, h.bth.ack_req, false, info.is(OpClass::kAtomic)};
      if (read) s.reads[psn.value()] = {p.number, h.reth.dma_len, std::nullopt, 0, psn, true};
      if (s.epsn == psn) s.set_epsn(psn + consumed);
      return;
    }
  }
  if (lost != s.read_lost.end()) {
    cause = "to resume the READ: its responses from PSN " + std::to_string(psn.value()) + " were lost (" +
            num(lost->second) + " came after the gap)";
    pkts.push_back(lost->second);
    s.read_lost.erase(lost);
  } else if (!s.burst_cause.empty() && psn == s.burst_next) {
    cause = s.burst_cause + " (go-back-N)";
  } else if (nak_after) {
    cause = "after the PSN sequence error NAK " + num(s.nak_seq.no) + " (it named PSN " +
            std::to_string(s.nak_seq.psn.value()) + ")";
    pkts.push_back(s.nak_seq.no);
  } else if (rnr_after) {
    const Nanos waited = p.time - s.rnr.t;
    cause = "after the RNR NAK " + num(s.rnr.no) + ", " + us(waited) + " later (it asked for " +
            std::to_string(s.rnr.wait_us) + " us)";
    pkts.push_back(s.rnr.no);
    if (waited < std::chrono::microseconds(s.rnr.wait_us))
      report(si, rule::kRnrWait, {p.number, s.rnr.no},
             where() + what() + ": sent " + us(waited) + " after the RNR NAK " + num(s.rnr.no) + " that asked for " +
                 std::to_string(s.rnr.wait_us) + " us");
    s.rnr.valid = false;  // one wait per RNR NAK
  } else if (acked) {
    cause = "spurious: PSN " + std::to_string(psn.value()) + " was acknowledged by " + num(s.acked_no) +
            " (ACK PSN " + std::to_string(s.acked->value()) +
            "), unless that ACK was lost after the point of capture";
    pkts.push_back(s.acked_no);
  } else if (prev) {
    cause = "after a timeout: " + us(since) + " since its previous transmission " + num(prev->last_no);
  } else {
    cause = "its earlier transmission is not in this capture";
  }
  if (s.burst_cause.empty() || psn != s.burst_next) s.burst_cause = cause;
  s.burst_next = psn + 1;
  ++s.sum.retransmissions;
  report(si, rule::kRetransmission, pkts, where() + what() + " sent again " + cause);
  if (prev) {
    prev->last_no = p.number;
    prev->last_t = p.time;
    prev->retransmitted = true;
  }
  if (read) s.reads[psn.value()] = {p.number, h.reth.dma_len, std::nullopt, 0, psn, true};
  if (s.epsn == psn) s.set_epsn(psn + consumed);
}

void Analyzer::on_response(int si, const TracePacket& p) {
  Space& s = *spaces_[static_cast<size_t>(si)];
  const wire::RoceHeaders& h = p.packet->hdr;
  const wire::OpInfo& info = h.info();
  const Psn psn = h.bth.psn;
  const uint32_t len = static_cast<uint32_t>(p.packet->payload.size());
  learn_mtu(s, info, len);
  auto where = [&] { return s.resp_addr + " -> " + s.req_addr + " qp " + qpn_text(h.bth.dest_qpn.value()) + ": "; };
  auto what = [&] { return std::string(info.name) + " PSN " + std::to_string(psn.value()); };
  ++s.sum.responses;
  if (!p.icrc_ok) report(si, rule::kIcrcBad, {p.number}, where() + what() + ": the ICRC does not match");
  if (s.started && !psn.before(s.next) && !s.next_unknown) {
    report(si, rule::kAckUnsent, {p.number},
           where() + what() + ": the requester has sent PSNs up to " + std::to_string((s.next - 1).value()) + " only");
    return;
  }

  Psn ack_psn = psn;  // what this response's AETH acknowledges, as the requester sees it
  // READ responses: the PSNs the READ reserved, in order, and its length.
  if (info.is(OpClass::kRead)) {
    auto it = s.reads.upper_bound(psn.value());
    Space::Read* r = nullptr;
    if (it != s.reads.begin()) r = &std::prev(it)->second;
    if (r && s.mtu != 0) {
      const uint32_t want = std::max<uint32_t>(1, (r->length + s.mtu - 1) / s.mtu);
      if (psn.distance(r->first_resp) >= static_cast<int32_t>(want)) r = nullptr;  // beyond that READ
    }
    const bool first = info.is(OpClass::kFirst), last = info.is(OpClass::kLast);
    if (!r) {
      if (!s.acked || psn.after(*s.acked))
        report(si, rule::kReadPsn, {p.number}, where() + what() + ": no outstanding READ request reserved this PSN");
      else
        report(si, rule::kNetworkDuplicate, {p.number}, where() + what() + ": a response for a READ already answered");
      return;
    }
    s.sum.bytes += len;
    if (first) {
      if (psn != r->first_resp)
        report(si, rule::kReadPsn, {p.number, r->no},
               where() + what() + ": a First response must carry the READ's PSN " + std::to_string(r->first_resp.value()) +
                   " (" + num(r->no) + ")");
      r->next_resp = psn + 1;
      r->bytes = len;
      r->whole = psn == r->first_resp;
    } else if (r->next_resp && psn.before(*r->next_resp)) {
      report(si, rule::kNetworkDuplicate, {p.number}, where() + what() + ": this response arrived before");
      return;
    } else if (!r->next_resp || psn != *r->next_resp) {
      // Responses missing before this one: lost before this point (the
      // requester will ask again from the first missing PSN).
      ++s.sum.gaps;
      report(si, rule::kPsnGap, {p.number, r->no},
             where() + what() + ": READ responses of " + num(r->no) + " missing before it (expected PSN " +
                 (r->next_resp ? std::to_string(r->next_resp->value()) : std::to_string(r->first_resp.value())) + ")");
      const Psn lost = r->next_resp ? *r->next_resp : r->first_resp;
      if (!r->lost_from) r->lost_from = lost;
      if (s.read_lost.size() < 65536) s.read_lost[lost.value()] = p.number;
      r->next_resp = psn + 1;
      r->whole = false;
    } else {
      r->next_resp = psn + 1;
      r->bytes += len;
    }
    if (last) {
      const uint32_t count = static_cast<uint32_t>(psn.distance(r->first_resp)) + 1;
      if (r->whole) {
        if (s.mtu != 0) {
          const uint32_t want = std::max<uint32_t>(1, (r->length + s.mtu - 1) / s.mtu);
          if (count != want)
            report(si, rule::kReadCount, {p.number, r->no},
                   where() + "the READ " + num(r->no) + " of " + std::to_string(r->length) + " bytes got " +
                       std::to_string(count) + " responses, at MTU " + std::to_string(s.mtu) + " it needs " +
                       std::to_string(want));
        }
        if (r->bytes != r->length)
          report(si, rule::kReadLength, {p.number, r->no},
                 where() + "the READ " + num(r->no) + " asked for " + std::to_string(r->length) + " bytes, got " +
                     std::to_string(r->bytes));
      }
      // The requester will ask again from the first lost response: its AETH
      // acknowledges only what came before that.
      if (r->lost_from) ack_psn = *r->lost_from - 1;
      if (s.next_unknown && s.next == r->first_resp + 1) {
        s.next = r->first_resp + count;  // now the READ's PSN count is known
        if (s.epsn == r->first_resp + 1) s.set_epsn(s.next);
        s.next_unknown = false;
      }
    }
    if (!info.carries(wire::Hdr::kAeth)) return;  // Middle: no AETH, acknowledges nothing
  }

  const wire::Aeth a = h.aeth;
  if (s.msn && a.msn != *s.msn && wire::Psn(a.msn).before(wire::Psn(*s.msn)))
    report(si, rule::kMsnBackwards, {p.number}, where() + what() + ": MSN " + std::to_string(a.msn) + " after " +
                                                    std::to_string(*s.msn));
  s.msn = a.msn;
  switch (a.kind()) {
    case wire::AckKind::kRnrNak:
      ++s.sum.rnr_naks;
      s.rnr = {true, psn, p.number, p.time, wire::rnr_timer_us(a.value5())};
      report(si, rule::kRnrNak, {p.number}, where() + what() + ": receiver not ready, retry in " +
                                                std::to_string(s.rnr.wait_us) + " us");
      return;
    case wire::AckKind::kNak: {
      ++s.sum.naks;
      const auto code = static_cast<wire::NakCode>(a.value5());
      if (code == wire::NakCode::kPsnSeqError) {
        s.nak_seq = {true, psn, p.number, p.time, 0};
        if (psn == s.epsn || s.recent_epsn(psn)) {
          // As expected (or as expected a moment ago: the NAK crossed requests in flight).
        } else if (psn.after(s.epsn)) {
          // The capture shows nothing of PSNs epsn..psn-1 reaching the responder.
          report(si, rule::kNakPsn, {p.number},
                 where() + what() + ": PSN " + std::to_string(s.epsn.value()) +
                     " is the first request the responder did not get, the NAK must name it");
        } else if (psn.before(s.epsn)) {
          // PSN psn is in the capture but did not reach the responder: the
          // capture was taken before the loss (at the requester). Its view of
          // what the responder expects follows the NAK from here on.
          if (!s.outstanding.count(psn.value()))
            report(si, rule::kNakPsn, {p.number},
                   where() + what() + ": the NAK names a PSN the requester never sent or that was acknowledged");
          s.set_epsn(psn);
        }
      }
      report(si, rule::kNak, {p.number}, where() + what() + ": NAK " + std::string(wire::to_string(code)));
      return;
    }
    case wire::AckKind::kReserved:
      return;
    case wire::AckKind::kAck:
      break;
  }
  // An ACK (or the AETH of a READ response / atomic ACK): everything up to PSN
  // is done; a READ's First response acknowledges what came before the READ.
  if (info.is(OpClass::kRead) && info.is(OpClass::kFirst) && !info.is(OpClass::kLast)) {
    const Psn before = psn - 1;
    for (auto it = s.outstanding.begin(); it != s.outstanding.end();)
      it = Psn(it->first).after(before) ? std::next(it) : s.outstanding.erase(it);
    if (!s.acked || before.after(*s.acked)) {
      s.acked = before;
      s.acked_no = p.number;
    }
    return;
  }
  if (s.acked && !psn.after(*s.acked) && !info.is(OpClass::kRead)) {
    ++s.sum.dup_acks;
    report(si, rule::kAckDuplicate, {p.number},
           where() + what() + ": PSN " + std::to_string(psn.value()) + " was acknowledged already (" + num(s.acked_no) +
               "): the answer to a duplicate request");
    return;
  }
  if (info.is(OpClass::kAck)) {
    auto at = s.outstanding.find(psn.value());
    if (at != s.outstanding.end() && at->second.atomic)
      report(si, rule::kAtomicAck, {p.number, at->second.first_no},
             where() + what() + ": the atomic request " + num(at->second.first_no) + " needs an ATOMIC Acknowledge");
  }
  for (auto it = s.outstanding.begin(); it != s.outstanding.end();) {
    if (Psn(it->first).after(ack_psn)) {
      ++it;
      continue;
    }
    const Space::Sent& x = it->second;
    if (x.retransmitted) {
      const Nanos rec = p.time - x.first_t;
      s.sum.recovery_min = s.sum.recoveries == 0 ? rec : std::min(s.sum.recovery_min, rec);
      s.sum.recovery_max = std::max(s.sum.recovery_max, rec);
      ++s.sum.recoveries;
    } else if (x.ack_req) {
      // Karn: only requests sent once give an RTT sample.
      const Nanos rtt = p.time - x.last_t;
      ++s.rtt_seen;
      if (s.rtts.size() < 4096) {
        s.rtts.push_back(rtt);
      } else {
        s.rtts[s.rtt_seen % 4096] = rtt;
      }
      s.sum.rtt_min = s.sum.rtt_samples == 0 ? rtt : std::min(s.sum.rtt_min, rtt);
      s.sum.rtt_max = std::max(s.sum.rtt_max, rtt);
      ++s.sum.rtt_samples;
    }
    it = s.outstanding.erase(it);
  }
  if (!s.acked || ack_psn.after(*s.acked)) {
    s.acked = ack_psn;
    s.acked_no = p.number;
  }
  s.nak_seq.valid = s.nak_seq.valid && ack_psn.before(s.nak_seq.psn);
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
