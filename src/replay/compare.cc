#include "replay/compare.h"

#include <algorithm>
#include <cstdio>

#include "present/fields.h"
#include "wire/aeth.h"

namespace rocelab::replay {

using wire::OpClass;

std::string_view to_string(DiffClass c) {
  switch (c) {
    case DiffClass::kBehaviour: return "behaviour";
    case DiffClass::kPolicy: return "policy";
    case DiffClass::kNetwork: return "network";
  }
  return "?";
}

namespace {

uint64_t fnv1a(std::span<const std::byte> b) {
  uint64_t h = 1469598103934665603ull;
  for (std::byte x : b) {
    h ^= static_cast<uint8_t>(x);
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

void Comparer::on_request(int64_t rel, uint64_t frame, bool ack_req) {
  slots_[rel].req_frame = frame;
  if (ack_req) max_ack_req_ = std::max(max_ack_req_, rel);
}

void Comparer::on_answer_asked(int64_t last_rel) { max_ack_req_ = std::max(max_ack_req_, last_rel); }

void Comparer::on_response(bool capture, int64_t rel, const wire::RocePacket& p, uint64_t frame, Determined det) {
  if (rel < 0) return;  // an answer to a request before the first message start: not replayed
  Slot& s = slots_[rel];
  if (capture) {
    ++r_.captured_responses;
    record(s.cap, rel, p, frame, det, &cap_acked_);
  } else {
    ++r_.live_responses;
    record(s.live, rel, p, 0, det, &live_acked_);
  }
}

void Comparer::record(Answer& a, int64_t rel, const wire::RocePacket& p, uint64_t frame, Determined det,
                      int64_t* acked) {
  const wire::OpInfo& info = p.hdr.info();
  if (!a.any) {
    a.any = true;
    a.opcode = p.hdr.bth.opcode;
    a.frame = frame;
  }
  const uint8_t bit = static_cast<uint8_t>(wire::rc_relative(p.hdr.bth.opcode) - wire::op::kRcReadRespFirst);
  if (bit < 8) a.opcodes |= static_cast<uint8_t>(1u << bit);
  if (info.is(OpClass::kRead) && !a.read) {
    a.read = true;
    a.known_bytes = det.known_bytes;
    a.match = det.match;
    a.read_len = static_cast<uint32_t>(p.payload.size());
    a.read_hash = fnv1a(p.payload);
  }
  if (!info.carries(wire::Hdr::kAeth)) return;  // a READ Middle acknowledges nothing
  const wire::Aeth& aeth = p.hdr.aeth;
  switch (aeth.kind()) {
    case wire::AckKind::kAck: {
      if (a.acks == 0) {
        a.msn = aeth.msn;
        a.has_msn = true;
        if (info.is(OpClass::kAck)) {
          a.plain_ack = true;
          a.credits = aeth.value5();
        }
      }
      ++a.acks;
      if (info.is(OpClass::kAtomic) && !a.atomic) {
        a.atomic = true;
        a.known_bytes = det.known_bytes;
        a.match = det.match;
        a.orig = p.hdr.atomic_ack_eth.orig;
      }
      // A READ's First response acknowledges what came before the READ.
      const bool read_first = info.is(OpClass::kRead) && info.is(OpClass::kFirst) && !info.is(OpClass::kLast);
      *acked = std::max(*acked, read_first ? rel - 1 : rel);
      break;
    }
    case wire::AckKind::kRnrNak:
      ++a.rnr;
      a.rnr_timer = aeth.value5();
      break;
    case wire::AckKind::kNak:
      if (a.nak == 0xFF) a.nak = aeth.value5();
      if (aeth.value5() == static_cast<uint8_t>(wire::NakCode::kPsnSeqError)) *acked = std::max(*acked, rel - 1);
      break;
    case wire::AckKind::kReserved:
      break;
  }
}

std::string Comparer::describe(const Answer& a, bool covered) const {
  if (!a.any) return covered ? "no response at this PSN (acknowledged by a later one)" : "no response";
  std::string s(wire::op_info(a.opcode).name);
  // Other opcodes at the same PSN (a READ answered again from another PSN).
  for (uint8_t bit = 0; bit < 6; ++bit) {
    const auto op = static_cast<uint8_t>((a.opcode & 0xE0) | (wire::op::kRcReadRespFirst + bit));
    if ((a.opcodes >> bit & 1) && op != a.opcode) {
      const std::string_view name = wire::op_info(op).name;
      const std::string_view common = "RC RDMA READ response ";
      s += " + " + std::string(name.starts_with(common) && s.starts_with(common) ? name.substr(common.size()) : name);
    }
  }
  if (a.nak != 0xFF) {
    s += " NAK " + std::string(present::nak_name(a.nak));
  } else if (a.rnr) {
    s += " " + present::rnr_text(a.rnr_timer);
  } else if (a.plain_ack) {
    s += " ACK credits " + std::to_string(a.credits);
  }
  if (a.has_msn) s += " MSN " + std::to_string(a.msn);
  if (a.read) s += ", " + std::to_string(a.read_len) + " bytes (hash " + hex64(a.read_hash) + ")";
  if (a.atomic) s += ", original value " + hex64(a.orig);
  if (a.acks > 1) s += ", " + std::to_string(a.acks) + " times";
  return s;
}

void Comparer::diff(DiffClass c, std::string_view kind, int64_t rel, const Slot& s, std::string text) {
  switch (c) {
    case DiffClass::kBehaviour: ++r_.behaviour; break;
    case DiffClass::kPolicy: ++r_.policy; break;
    case DiffClass::kNetwork: ++r_.network; break;
  }
  uint64_t& n = listed_[kind];
  if (o_.max_listed != 0 && n >= o_.max_listed) {
    ++r_.not_listed;
    return;
  }
  ++n;
  if (!o_.on_difference) return;
  Difference d;
  d.cls = c;
  d.kind = kind;
  d.psn = rel;
  d.frame = s.cap.frame ? s.cap.frame : s.req_frame;
  d.capture = describe(s.cap, cap_acked_ >= rel);
  d.live = describe(s.live, live_acked_ >= rel);
  d.text = std::move(text);
  o_.on_difference(d);
}

void Comparer::judge(int64_t rel, const Slot& s) {
  const Answer& c = s.cap;
  const Answer& l = s.live;
  if (!c.any && !l.any) return;
  auto refusal = [](const Answer& a) { return a.nak != 0xFF && a.nak != 0; };
  // A refusal (invalid request, remote access or operational error) is the
  // responder's verdict on the request: both must give the same.
  if (refusal(l) && live_refused_ < 0) live_refused_ = rel;
  if (refusal(c) || refusal(l)) {
    if (!(refusal(c) && refusal(l) && c.nak == l.nak))
      diff(DiffClass::kBehaviour, "nak", rel, s,
           refusal(c) ? "the capture's responder refused this request, the live one did not refuse it so"
                      : "the live responder refused this request, the capture's did not refuse it so");
    return;
  }
  const bool c_seq = c.nak == 0, l_seq = l.nak == 0;
  if (c_seq != l_seq)
    diff(DiffClass::kNetwork, "psn_sequence_nak", rel, s,
         c_seq ? "the capture's responder missed a request before this PSN (lost on the way); the replay "
                 "delivered every request the capture holds"
               : "the live responder missed a request before this PSN: the capture does not hold it (lost before the "
                 "capture point, or the capture began later)");
  if ((c.rnr != 0) != (l.rnr != 0))
    diff(DiffClass::kPolicy, "rnr_nak", rel, s,
         c.rnr ? "the capture's responder had no receive buffer ready; the replay keeps its receive queue full"
               : "the live responder had no receive buffer ready");
  const bool c_ack = c.acks != 0, l_ack = l.acks != 0;
  const bool c_cov = cap_acked_ >= rel, l_cov = live_acked_ >= rel;
  if (c_ack && !l_ack) {
    if (l_seq || l.rnr) {
      // said above
    } else if (l_cov) {
      diff(DiffClass::kPolicy, "ack_coalescing", rel, s, "the live responder acknowledged this PSN with a later ACK");
    } else if (max_ack_req_ >= rel) {
      diff(DiffClass::kBehaviour, "missing_response", rel, s,
           live_refused_ >= 0 && live_refused_ < rel
               ? "the live responder refused PSN+" + std::to_string(live_refused_) +
                     " and its QP went to the error state: it answers nothing after"
               : "the live responder never acknowledged this PSN although a request at or after it asked for an "
                 "answer");
    } else {
      diff(DiffClass::kPolicy, "ack_coalescing", rel, s,
           "no request from here on asked for an ACK (AckReq): the live responder may wait");
    }
  } else if (l_ack && !c_ack) {
    if (c_seq || c.rnr) {
      // said above
    } else if (c_cov) {
      diff(DiffClass::kPolicy, "ack_coalescing", rel, s, "the capture's responder acknowledged this PSN with a later ACK");
    } else {
      diff(DiffClass::kNetwork, "no_captured_response", rel, s,
           "the capture holds no acknowledgement of this PSN: lost on the way back, or the capture ends");
    }
  } else if (c_ack && l_ack) {
    if (c.opcodes != l.opcodes) {
      if ((c.opcodes & l.opcodes) == c.opcodes)
        diff(DiffClass::kNetwork, "no_captured_response", rel, s,
             "the capture lacks a response the live responder sent here (lost on the way back)");
      else
        diff(DiffClass::kBehaviour, "opcode", rel, s, "the responders answered with different opcodes");
    } else {
      if (c.plain_ack && l.plain_ack && c.credits != l.credits)
        diff(DiffClass::kPolicy, "credits", rel, s, "different end-to-end credit counts in the AETH");
      if (c.has_msn && l.has_msn && !msn_base_) {
        msn_base_ = true;
        msn_delta_ = (c.msn - l.msn) & wire::kMask24;
        if (msn_delta_ != 0)
          diff(DiffClass::kNetwork, "msn_start", rel, s,
               "the capture began after " + std::to_string(msn_delta_) +
                   " messages of this connection had completed: MSNs are compared from here, that far apart");
      }
      if (c.has_msn && l.has_msn && ((c.msn - msn_delta_) & wire::kMask24) != l.msn)
        diff(DiffClass::kBehaviour, "msn", rel, s, "different MSNs: the responders count completed messages differently");
      if (c.acks != l.acks)
        diff(DiffClass::kNetwork, "duplicate_acks", rel, s,
             "a different number of ACKs at this PSN: answers to requests the network duplicated or the "
             "requester sent again");
    }
  }
  // READ data and original values, where the capture determines them
  // (Answer::known_bytes, match): compared with what the capture's own WRITEs
  // left there, if the capture's responder returned that.
  if (c.read && l.read) {
    if (c.read_len != l.read_len) {
      diff(DiffClass::kBehaviour, "read_length", rel, s, "READ responses of different lengths");
    } else if (c.known_bytes == 0 || !c.match) {
      ++r_.reads_undetermined;
    } else {
      ++r_.reads_compared;
      r_.read_bytes_compared += c.known_bytes;
      if (!l.match)
        diff(DiffClass::kBehaviour, "read_data", rel, s,
             "different READ data in the " + std::to_string(c.known_bytes) +
                 " bytes the capture determines (its own WRITEs put them there, and its responder returned them)");
    }
  } else if (c.read && !l.read && !l_seq && l.nak == 0xFF) {
    diff(DiffClass::kBehaviour, "missing_response", rel, s, "the live responder sent no READ response at this PSN");
  } else if (l.read && !c.read && !c_seq) {
    diff(DiffClass::kNetwork, "no_captured_response", rel, s,
         "the capture holds no READ response at this PSN: lost on the way back, or the capture ends");
  }
  if (c.atomic && l.atomic) {
    if (c.known_bytes == 0 || !c.match) {
      ++r_.atomics_undetermined;
    } else {
      ++r_.atomics_compared;
      if (!l.match)
        diff(DiffClass::kBehaviour, "atomic_value", rel, s,
             "a different original value, although the capture's is what its own WRITEs and atomics had left there");
    }
  }
}

void Comparer::finalize(int64_t before) {
  auto end = slots_.lower_bound(before);
  for (auto it = slots_.begin(); it != end; ++it) judge(it->first, it->second);
  slots_.erase(slots_.begin(), end);
}

}  // namespace rocelab::replay
