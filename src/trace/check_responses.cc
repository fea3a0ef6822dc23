// `rocelab check` on responses (ACKs, NAKs, READ responses, atomic ACKs):
// each rule that judges a response is a function here, named after its rule
// (rules.h, docs/replay.md); Analyzer::on_response runs them in order and
// retires what the responses acknowledge.
#include "trace/space.h"

namespace rocelab::trace {

using namespace check_detail;
using wire::OpClass;
using wire::Psn;
using At = Analyzer::At;
using Space = Analyzer::Space;

namespace {

// ack.unsent_psn: a response names a PSN the requester never sent. True when
// this one does.
bool ack_unsent(const At& a) {
  const Space& s = a.s;
  if (!s.started || a.psn.before(s.next) || s.next_unknown) return false;
  a.report(rule::kAckUnsent, {a.p.number},
           a.where() + a.what() + ": the requester has sent PSNs up to " + std::to_string((s.next - 1).value()) +
               " only");
  return true;
}

// The outstanding READ whose reserved PSNs hold a response's PSN, or nullptr.
Space::Read* read_of(const At& a) {
  Space& s = a.s;
  auto it = s.reads.upper_bound(a.psn.value());
  if (it == s.reads.begin()) return nullptr;
  Space::Read* r = &std::prev(it)->second;
  if (s.mtu != 0) {
    if (a.psn.distance(r->first_resp) >= static_cast<int32_t>(read_responses(r->length, s.mtu)))
      return nullptr;  // beyond that READ
  }
  return r;
}

// read.response_count, read.length: a READ answered whole got ceil(length /
// MTU) responses carrying length bytes.
void read_complete(const At& a, const Space::Read& r, uint32_t count) {
  const uint32_t mtu = a.s.mtu;
  if (mtu != 0) {
    const uint32_t want = read_responses(r.length, mtu);
    if (count != want)
      a.report(rule::kReadCount, {a.p.number, r.no},
               a.where() + "the READ " + num(r.no) + " of " + std::to_string(r.length) + " bytes got " +
                   std::to_string(count) + " responses, at MTU " + std::to_string(mtu) + " it needs " +
                   std::to_string(want));
  }
  if (r.bytes != r.length)
    a.report(rule::kReadLength, {a.p.number, r.no},
             a.where() + "the READ " + num(r.no) + " asked for " + std::to_string(r.length) + " bytes, got " +
                 std::to_string(r.bytes));
}

// READ responses: read.response_psn (the PSNs the READ reserved, First to
// Last in order), psn.gap (responses missing before this one),
// psn.network_duplicate (a response again), and at the Last one
// read_complete. *ack_psn: what the response's AETH acknowledges as the
// requester sees it. False when the response tells nothing more (no AETH, or
// judged here already).
bool read_response(const At& a, Psn* ack_psn) {
  Space& s = a.s;
  Space::Read* r = read_of(a);
  if (!r) {
    if (!s.acked || a.psn.after(*s.acked))
      a.report(rule::kReadPsn, {a.p.number}, a.where() + a.what() + ": no outstanding READ request reserved this PSN");
    else
      a.report(rule::kNetworkDuplicate, {a.p.number}, a.where() + a.what() + ": a response for a READ already answered");
    return false;
  }
  s.sum.bytes += a.len;
  if (a.info.is(OpClass::kFirst)) {
    if (a.psn != r->first_resp)
      a.report(rule::kReadPsn, {a.p.number, r->no},
               a.where() + a.what() + ": a First response must carry the READ's PSN " +
                   std::to_string(r->first_resp.value()) + " (" + num(r->no) + ")");
    r->next_resp = a.psn + 1;
    r->bytes = a.len;
    r->whole = a.psn == r->first_resp;
  } else if (r->next_resp && a.psn.before(*r->next_resp)) {
    a.report(rule::kNetworkDuplicate, {a.p.number}, a.where() + a.what() + ": this response arrived before");
    return false;
  } else if (!r->next_resp || a.psn != *r->next_resp) {
    // Responses missing before this one: lost before this point (the
    // requester will ask again from the first missing PSN).
    ++s.sum.gaps;
    const Psn lost = r->next_resp ? *r->next_resp : r->first_resp;
    a.report(rule::kPsnGap, {a.p.number, r->no},
             a.where() + a.what() + ": READ responses of " + num(r->no) + " missing before it (expected PSN " +
                 std::to_string(lost.value()) + ")");
    if (!r->lost_from) r->lost_from = lost;
    if (s.read_lost.size() < 65536) s.read_lost[lost.value()] = a.p.number;
    r->next_resp = a.psn + 1;
    r->whole = false;
  } else {
    r->next_resp = a.psn + 1;
    r->bytes += a.len;
  }
  if (a.info.is(OpClass::kLast)) {
    const uint32_t count = static_cast<uint32_t>(a.psn.distance(r->first_resp)) + 1;
    if (r->whole) read_complete(a, *r, count);
    // The requester will ask again from the first lost response: its AETH
    // acknowledges only what came before that.
    if (r->lost_from) *ack_psn = *r->lost_from - 1;
    if (s.next_unknown && s.next == r->first_resp + 1) {
      s.next = r->first_resp + count;  // now the READ's PSN count is known
      if (s.epsn == r->first_resp + 1) s.set_epsn(s.next);
      s.next_unknown = false;
    }
  }
  return a.info.carries(wire::Hdr::kAeth);  // Middle: no AETH, acknowledges nothing
}

// msn.backwards: the MSN in the AETHs never goes backwards.
void msn_backwards(const At& a) {
  Space& s = a.s;
  const uint32_t msn = a.h.aeth.msn;
  if (s.msn && msn != *s.msn && Psn(msn).before(Psn(*s.msn)))
    a.report(rule::kMsnBackwards, {a.p.number},
             a.where() + a.what() + ": MSN " + std::to_string(msn) + " after " + std::to_string(*s.msn));
  s.msn = msn;
}

// rnr.nak: the receiver was not ready; the delay it asks for (rnr.wait_short
// judges the requester's retry against it).
void rnr_nak(const At& a) {
  Space& s = a.s;
  ++s.sum.rnr_naks;
  s.rnr = {true, a.psn, a.p.number, a.p.time, wire::rnr_timer_us(a.h.aeth.value5())};
  a.report(rule::kRnrNak, {a.p.number},
           a.where() + a.what() + ": receiver not ready, retry in " + std::to_string(s.rnr.wait_us) + " us");
}

// nak.psn: a PSN sequence error NAK names the PSN the responder expected;
// nak.received: every NAK, by its code.
void nak(const At& a) {
  Space& s = a.s;
  ++s.sum.naks;
  const auto code = static_cast<wire::NakCode>(a.h.aeth.value5());
  if (code == wire::NakCode::kPsnSeqError) {
    s.nak_seq = {true, a.psn, a.p.number, a.p.time, 0};
    if (a.psn == s.epsn || s.recent_epsn(a.psn)) {
      // As expected (or as expected a moment ago: the NAK crossed requests in flight).
    } else if (a.psn.after(s.epsn)) {
      // The capture shows nothing of PSNs epsn..psn-1 reaching the responder.
      a.report(rule::kNakPsn, {a.p.number},
               a.where() + a.what() + ": PSN " + std::to_string(s.epsn.value()) +
                   " is the first request the responder did not get, the NAK must name it");
    } else if (a.psn.before(s.epsn)) {
      // PSN psn is in the capture but did not reach the responder: the
      // capture was taken before the loss (at the requester). Its view of
      // what the responder expects follows the NAK from here on.
      if (!s.outstanding.count(a.psn.value()))
        a.report(rule::kNakPsn, {a.p.number},
                 a.where() + a.what() + ": the NAK names a PSN the requester never sent or that was acknowledged");
      s.set_epsn(a.psn);
    }
  }
  a.report(rule::kNak, {a.p.number}, a.where() + a.what() + ": NAK " + std::string(present::nak_name(a.h.aeth.value5())));
}

// A request retired by an ACK: a recovery time if it was sent again, else an
// RTT sample if it asked for the ACK (Karn: only requests sent once).
void retire(Space& s, const Space::Sent& x, Nanos now) {
  if (x.retransmitted) {
    const Nanos rec = now - x.first_t;
    s.sum.recovery_min = s.sum.recoveries == 0 ? rec : std::min(s.sum.recovery_min, rec);
    s.sum.recovery_max = std::max(s.sum.recovery_max, rec);
    ++s.sum.recoveries;
  } else if (x.ack_req) {
    const Nanos rtt = now - x.last_t;
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
}

// The highest PSN acknowledged so far, and the packet that said it.
void acked_to(Space& s, Psn psn, uint64_t no) {
  if (!s.acked || psn.after(*s.acked)) {
    s.acked = psn;
    s.acked_no = no;
  }
}

// ack.duplicate: an ACK for PSNs acknowledged already. True when this is one.
bool ack_duplicate(const At& a) {
  Space& s = a.s;
  if (!s.acked || a.psn.after(*s.acked) || a.info.is(OpClass::kRead)) return false;
  ++s.sum.dup_acks;
  a.report(rule::kAckDuplicate, {a.p.number},
           a.where() + a.what() + ": PSN " + std::to_string(a.psn.value()) + " was acknowledged already (" +
               num(s.acked_no) + "): the answer to a duplicate request");
  return true;
}

// atomic.ack_opcode: an atomic request is answered by an ATOMIC Acknowledge.
void atomic_ack(const At& a) {
  if (!a.info.is(OpClass::kAck)) return;
  auto at = a.s.outstanding.find(a.psn.value());
  if (at != a.s.outstanding.end() && at->second.atomic)
    a.report(rule::kAtomicAck, {a.p.number, at->second.first_no},
             a.where() + a.what() + ": the atomic request " + num(at->second.first_no) +
                 " needs an ATOMIC Acknowledge");
}

}  // namespace

void Analyzer::on_response(int si, const TracePacket& p) {
  const At a(*this, si, p, true);
  Space& s = a.s;
  learn_mtu(a);
  ++s.sum.responses;
  icrc_bad(a);
  if (ack_unsent(a)) return;

  Psn ack_psn = a.psn;  // what this response's AETH acknowledges, as the requester sees it
  if (a.info.is(OpClass::kRead) && !read_response(a, &ack_psn)) return;

  msn_backwards(a);
  switch (a.h.aeth.kind()) {
    case wire::AckKind::kRnrNak: rnr_nak(a); return;
    case wire::AckKind::kNak: nak(a); return;
    case wire::AckKind::kReserved: return;
    case wire::AckKind::kAck: break;
  }
  // An ACK (or the AETH of a READ response / atomic ACK): everything up to PSN
  // is done; a READ's First response acknowledges what came before the READ.
  if (a.info.is(OpClass::kRead) && a.info.is(OpClass::kFirst) && !a.info.is(OpClass::kLast)) {
    const Psn before = a.psn - 1;
    for (auto it = s.outstanding.begin(); it != s.outstanding.end();)
      it = Psn(it->first).after(before) ? std::next(it) : s.outstanding.erase(it);
    acked_to(s, before, p.number);
    return;
  }
  if (ack_duplicate(a)) return;
  atomic_ack(a);
  for (auto it = s.outstanding.begin(); it != s.outstanding.end();) {
    if (Psn(it->first).after(ack_psn)) {
      ++it;
      continue;
    }
    retire(s, it->second, p.time);
    it = s.outstanding.erase(it);
  }
  acked_to(s, ack_psn, p.number);
  s.nak_seq.valid = s.nak_seq.valid && ack_psn.before(s.nak_seq.psn);
}

}  // namespace rocelab::trace
