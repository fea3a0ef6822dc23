// `rocelab check` on requests: each rule that judges a request is a function
// here, named after its rule (rules.h, docs/replay.md); Analyzer::on_request
// runs them in order and keeps the PSN space's state.
#include "trace/space.h"

namespace rocelab::trace {

using namespace check_detail;
using wire::OpClass;
using wire::Psn;
using At = Analyzer::At;
using Space = Analyzer::Space;

namespace {

// pkey.changed: every packet of a connection carries the same P_Key.
void pkey_changed(const At& a) {
  if (a.s.pkey && *a.s.pkey != a.h.bth.pkey) {
    char b[48];
    std::snprintf(b, sizeof b, ": P_Key 0x%04x, earlier 0x%04x", a.h.bth.pkey, *a.s.pkey);
    a.report(rule::kPkeyChanged, {a.p.number}, a.where() + a.what() + b);
  }
  a.s.pkey = a.h.bth.pkey;
}

// pad.alignment: payload and pad together are a multiple of 4 bytes.
void pad_alignment(const At& a) {
  if ((a.len + a.h.bth.pad_count) % 4 != 0)
    a.report(rule::kPadAlign, {a.p.number}, a.where() + a.what() + ": payload " + std::to_string(a.len) + " + pad " +
                                                std::to_string(a.h.bth.pad_count) + " is not a multiple of 4");
}

// psn.gap: a new request d PSNs ahead of the next one expected.
void psn_gap(const At& a, int32_t d) {
  Space& s = a.s;
  ++s.sum.gaps;
  a.report(rule::kPsnGap, {a.p.number},
           a.where() + a.what() + ": expected PSN " + std::to_string(s.next.value()) + ", " + std::to_string(d) +
               " packet" + (d == 1 ? "" : "s") + " missing before it");
  s.msg_open = false;  // what was missing may have opened or closed a message
  s.synced = false;
  for (int32_t k = 0; k < std::min<int32_t>(d, 4096) && s.missing.size() < 65536; ++k)
    s.missing[(s.next + static_cast<uint32_t>(k)).value()] = a.p.number;
}

// seq.new_inside, seq.no_first, len.reth: the message a new packet opens,
// continues or closes, and a WRITE's bytes against its RETH.
void message_sequence(const At& a) {
  Space& s = a.s;
  const bool first = a.info.is(OpClass::kFirst), last = a.info.is(OpClass::kLast);
  const bool middle = a.info.is(OpClass::kMiddle), write = a.info.is(OpClass::kWrite);
  if (first || (!middle && !last)) {  // First, Only, or a single-packet READ/atomic
    if (s.msg_open)
      a.report(rule::kSeqInside, {a.p.number, s.msg_first_no},
               a.where() + a.what() + ": a new message while the one begun at " + num(s.msg_first_no) + " has no Last");
    s.synced = true;
    s.msg_open = first && !last;
    s.msg_write = write;
    s.msg_first_no = a.p.number;
    s.msg_bytes = a.len;
    s.msg_reth_len.reset();
    if (a.info.carries(wire::Hdr::kReth) && write) s.msg_reth_len = a.h.reth.dma_len;
    if (first && last && s.msg_reth_len && a.len != *s.msg_reth_len)
      a.report(rule::kLenReth, {a.p.number}, a.where() + a.what() + ": payload " + std::to_string(a.len) +
                                                 " bytes, the RETH says " + std::to_string(*s.msg_reth_len));
  } else if (!s.msg_open) {
    if (s.synced)
      a.report(rule::kSeqNoFirst, {a.p.number}, a.where() + a.what() + ": no message is open (no First before it)");
  } else if (s.msg_write != write) {
    a.report(rule::kSeqNoFirst, {a.p.number, s.msg_first_no},
             a.where() + a.what() + ": the message begun at " + num(s.msg_first_no) + " is a " +
                 (s.msg_write ? "WRITE" : "SEND"));
    s.msg_open = false;
  } else {
    s.msg_bytes += a.len;
    if (last) {
      s.msg_open = false;
      if (s.msg_reth_len && s.msg_bytes != *s.msg_reth_len)
        a.report(rule::kLenReth, {a.p.number, s.msg_first_no},
                 a.where() + a.what() + ": the message from " + num(s.msg_first_no) + " carries " +
                     std::to_string(s.msg_bytes) + " bytes, its RETH says " + std::to_string(*s.msg_reth_len));
    }
  }
}

// pad.first_middle, len.first_middle, len.mtu: First and Middle packets carry
// one MTU and no pad; no payload exceeds the MTU (or 4096).
void packet_lengths(const At& a) {
  const uint32_t mtu = a.s.mtu;
  const bool last = a.info.is(OpClass::kLast), middle = a.info.is(OpClass::kMiddle);
  if ((a.info.is(OpClass::kFirst) && !last) || middle) {
    if (a.h.bth.pad_count != 0)
      a.report(rule::kPadFirstMiddle, {a.p.number}, a.where() + a.what() + ": pad " + std::to_string(a.h.bth.pad_count));
    if (mtu != 0 && a.len != mtu)
      a.report(rule::kLenMiddle, {a.p.number},
               a.where() + a.what() + ": payload " + std::to_string(a.len) + " bytes, the path MTU is " +
                   std::to_string(mtu));
  }
  if (mtu != 0 && a.len > mtu && (last || !middle))
    a.report(rule::kLenMtu, {a.p.number},
             a.where() + a.what() + ": payload " + std::to_string(a.len) + " bytes, the path MTU is " +
                 std::to_string(mtu));
  else if (a.len > wire::kMaxMtu)
    a.report(rule::kLenMtu, {a.p.number}, a.where() + a.what() + ": payload " + std::to_string(a.len) + " bytes");
}

// What is known of a request PSN seen before, for the rules that tell why.
struct Again {
  Space::Sent* prev = nullptr;  // its earlier transmission, while unacknowledged
  Nanos since{0};               // since that transmission
  bool nak_after = false;       // a PSN sequence error NAK came since, at or before this PSN
  bool rnr_after = false;       // an RNR NAK likewise
  std::map<uint32_t, uint64_t>::iterator lost;  // a READ whose responses from here were lost
  std::vector<uint64_t> pkts;
};

Again again(const At& a) {
  Space& s = a.s;
  Again g;
  auto it = s.outstanding.find(a.psn.value());
  g.prev = it == s.outstanding.end() ? nullptr : &it->second;
  g.pkts = {a.p.number};
  if (g.prev) g.pkts.push_back(g.prev->last_no);
  g.since = g.prev ? a.p.time - g.prev->last_t : Nanos(0);
  g.nak_after = s.nak_seq.valid && (!g.prev || s.nak_seq.t >= g.prev->last_t) && !a.psn.before(s.nak_seq.psn);
  g.rnr_after = s.rnr.valid && (!g.prev || s.rnr.t >= g.prev->last_t) && !a.psn.before(s.rnr.psn);
  g.lost = a.info.is(OpClass::kRead) ? s.read_lost.find(a.psn.value()) : s.read_lost.end();
  return g;
}

// psn.network_duplicate: the same request again sooner than any retransmit
// timer, with nothing that asked for it. True when this is one.
bool network_duplicate(const At& a, const Again& g) {
  if (!g.prev || g.since >= kMinTimeout || g.nak_after || g.rnr_after || g.lost != a.s.read_lost.end()) return false;
  ++a.s.sum.duplicates;
  a.report(rule::kNetworkDuplicate, g.pkts,
           a.where() + a.what() + ": again " + us(g.since) + " after " + num(g.prev->last_no) +
               ", sooner than any retransmit timer: a copy made by the network");
  return true;
}

// psn.out_of_order: a PSN a gap skipped arrives before anything asked for it
// again: it was overtaken. True when this is one.
bool out_of_order(const At& a, const Again& g) {
  Space& s = a.s;
  auto m = s.missing.find(a.psn.value());
  if (m == s.missing.end()) return false;
  const uint64_t after_no = m->second;
  s.missing.erase(m);
  if (g.prev || g.nak_after || g.rnr_after) return false;
  a.report(rule::kOutOfOrder, {a.p.number, after_no},
           a.where() + a.what() + ": arrives after " + num(after_no) + " that came later in sequence (reordered)");
  return true;
}

// psn.retransmission, with its likely cause; rnr.wait_short when it follows an
// RNR NAK sooner than the delay that NAK asked for.
void retransmission(const At& a, Again& g) {
  Space& s = a.s;
  std::string cause;
  if (g.lost != s.read_lost.end()) {
    cause = "to resume the READ: its responses from PSN " + std::to_string(a.psn.value()) + " were lost (" +
            num(g.lost->second) + " came after the gap)";
    g.pkts.push_back(g.lost->second);
    s.read_lost.erase(g.lost);
  } else if (!s.burst_cause.empty() && a.psn == s.burst_next) {
    cause = s.burst_cause + " (go-back-N)";
  } else if (g.nak_after) {
    cause = "after the PSN sequence error NAK " + num(s.nak_seq.no) + " (it named PSN " +
            std::to_string(s.nak_seq.psn.value()) + ")";
    g.pkts.push_back(s.nak_seq.no);
  } else if (g.rnr_after) {
    const Nanos waited = a.p.time - s.rnr.t;
    cause = "after the RNR NAK " + num(s.rnr.no) + ", " + us(waited) + " later (it asked for " +
            std::to_string(s.rnr.wait_us) + " us)";
    g.pkts.push_back(s.rnr.no);
    if (waited < std::chrono::microseconds(s.rnr.wait_us))
      a.report(rule::kRnrWait, {a.p.number, s.rnr.no},
               a.where() + a.what() + ": sent " + us(waited) + " after the RNR NAK " + num(s.rnr.no) +
                   " that asked for " + std::to_string(s.rnr.wait_us) + " us");
    s.rnr.valid = false;  // one wait per RNR NAK
  } else if (s.acked && !s.acked->before(a.psn)) {
    cause = "spurious: PSN " + std::to_string(a.psn.value()) + " was acknowledged by " + num(s.acked_no) +
            " (ACK PSN " + std::to_string(s.acked->value()) + "), unless that ACK was lost after the point of capture";
    g.pkts.push_back(s.acked_no);
  } else if (g.prev) {
    cause = "after a timeout: " + us(g.since) + " since its previous transmission " + num(g.prev->last_no);
  } else {
    cause = "its earlier transmission is not in this capture";
  }
  if (s.burst_cause.empty() || a.psn != s.burst_next) s.burst_cause = cause;
  s.burst_next = a.psn + 1;
  ++s.sum.retransmissions;
  a.report(rule::kRetransmission, g.pkts, a.where() + a.what() + " sent again " + cause);
  if (g.prev) {
    g.prev->last_no = a.p.number;
    g.prev->last_t = a.p.time;
    g.prev->retransmitted = true;
  }
}

// A request the responder will now expect answered: outstanding until an
// ACK covers it, a READ until its responses come.
void outstanding(const At& a) {
  a.s.outstanding[a.psn.value()] = {a.p.number, a.p.number, a.p.time, a.p.time, a.h.bth.ack_req, false,
                                    a.info.is(OpClass::kAtomic)};
}
void outstanding_read(const At& a) {
  if (a.info.is(OpClass::kRead)) a.s.reads[a.psn.value()] = {a.p.number, a.h.reth.dma_len, std::nullopt, 0, a.psn, true};
}

}  // namespace

void Analyzer::on_request(int si, const TracePacket& p) {
  const At a(*this, si, p, false);
  Space& s = a.s;
  learn_mtu(a);
  ++s.sum.requests;
  icrc_bad(a);
  pkey_changed(a);
  pad_alignment(a);

  // How many PSNs this request uses: a READ reserves one per response.
  uint32_t consumed = 1;
  bool consumed_known = true;
  if (a.info.is(OpClass::kRead)) {
    if (s.mtu != 0) {
      consumed = read_responses(a.h.reth.dma_len, s.mtu);
    } else {
      consumed_known = false;
    }
  }
  if (!s.started) {
    s.started = true;
    s.next = a.psn;
    s.epsn = a.psn;
  }
  const int32_t d = a.psn.distance(s.next);
  if (d >= 0) {
    // A new request. A gap: packets in between never reached this point.
    if (d > 0 && !s.next_unknown) psn_gap(a, d);
    s.next_unknown = false;
    s.burst_cause.clear();
    message_sequence(a);
    packet_lengths(a);
    outstanding(a);
    forget_old(s.outstanding, a.psn);
    if (a.info.is(OpClass::kRead)) {
      outstanding_read(a);
      forget_old(s.reads, a.psn);
    }
    if (s.epsn == a.psn) s.set_epsn(a.psn + consumed);
    s.next = a.psn + consumed;
    if (!consumed_known) s.next_unknown = true;
    s.sum.bytes += a.len;
    return;
  }

  // Seen before: the network's copy, a reordered packet, or a retransmission.
  Again g = again(a);
  if (network_duplicate(a, g)) return;
  if (out_of_order(a, g)) {
    outstanding(a);
    outstanding_read(a);
  } else {
    retransmission(a, g);
    outstanding_read(a);
  }
  if (s.epsn == a.psn) s.set_epsn(a.psn + consumed);
}

}  // namespace rocelab::trace
