// Inside `rocelab check` (src/trace only): the state of one PSN space
// (Analyzer::Space) and one packet in it (Analyzer::At), which the rule
// functions of check_requests.cc and check_responses.cc take.
#pragma once
#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "present/fields.h"
#include "trace/check.h"
#include "wire/psn.h"

namespace rocelab::trace {

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
  wire::Psn next;                 // the next new request PSN the requester will use
  bool next_unknown = false;      // after a READ of unknown PSN count
  wire::Psn epsn;                 // what the responder expects (from the requests seen in order)
  // Its recent values: a NAK crosses the requests in flight, so it may name
  // what the responder expected a moment before the capture shows.
  std::array<uint32_t, 64> epsn_history{};
  size_t epsn_changes = 0;
  void set_epsn(wire::Psn e) {
    if (e == epsn) return;
    epsn_history[epsn_changes++ % epsn_history.size()] = epsn.value();
    epsn = e;
  }
  bool recent_epsn(wire::Psn q) const {
    const size_t n = std::min(epsn_changes, epsn_history.size());
    for (size_t i = 0; i < n; ++i)
      if (epsn_history[i] == q.value()) return true;
    return false;
  }
  std::map<uint32_t, Sent> outstanding;  // not yet acknowledged, by PSN
  std::map<uint32_t, uint64_t> missing;  // PSNs skipped by a gap, not seen since (-> the packet after the gap)
  std::optional<wire::Psn> acked; // the highest PSN acknowledged
  uint64_t acked_no = 0;

  struct Nak {
    bool valid = false;
    wire::Psn psn;
    uint64_t no = 0;
    Nanos t{0};
    uint32_t wait_us = 0;  // RNR: the delay asked for
  };
  Nak nak_seq, rnr;
  std::string burst_cause;        // go-back-N in progress: why it started
  wire::Psn burst_next;

  // The message being sent (sequence and length checks on new packets).
  bool synced = false;            // a message start was seen (the capture may begin mid-message)
  bool msg_open = false;
  bool msg_write = false;
  uint64_t msg_first_no = 0, msg_bytes = 0;
  std::optional<uint32_t> msg_reth_len;

  struct Read {
    uint64_t no = 0;
    uint32_t length = 0;
    std::optional<wire::Psn> next_resp;  // the PSN the next Middle/Last response must carry
    uint64_t bytes = 0;
    wire::Psn first_resp;
    bool whole = true;  // every response so far arrived, in order
    std::optional<wire::Psn> lost_from;  // the first response that did not arrive
  };
  std::map<uint32_t, uint64_t> read_lost;  // response PSN lost -> the packet after the gap
  std::map<uint32_t, Read> reads;  // by request PSN (erased when answered)

  std::optional<uint16_t> pkey;
  std::optional<uint32_t> msn;

  SpaceSummary sum;
  std::vector<Nanos> rtts;         // a bounded sample for the median
  uint64_t rtt_seen = 0;
};

// One packet in its PSN space: what every rule function looks at, and how a
// finding about it begins. The words are built only when there is a finding
// (no allocation per packet).
struct Analyzer::At {
  Analyzer& an;
  int si;
  Space& s;
  const TracePacket& p;
  const wire::RoceHeaders& h;
  const wire::OpInfo& info;
  wire::Psn psn;
  uint32_t len;   // payload bytes
  bool response;  // a response (it goes from the responder to the requester)

  At(Analyzer& a, int space, const TracePacket& pkt, bool resp)
      : an(a), si(space), s(*a.spaces_[static_cast<size_t>(space)]), p(pkt), h(pkt.packet->hdr), info(h.info()),
        psn(h.bth.psn), len(static_cast<uint32_t>(pkt.packet->payload.size())), response(resp) {}

  // "10.0.0.1 -> 10.0.0.2 qp 0x000012: ", the way the packet went.
  std::string where() const {
    return response ? s.resp_addr + " -> " + s.req_addr + " qp " + present::qpn_text(h.bth.dest_qpn.value()) + ": "
                    : s.req_addr + " -> " + s.resp_addr + " qp " + present::qpn_text(s.resp_qpn) + ": ";
  }
  // "RC SEND Only PSN 5"
  std::string what() const { return std::string(info.name) + " PSN " + std::to_string(psn.value()); }
  void report(std::string_view rule, std::vector<uint64_t> packets, std::string text) const {
    an.report(si, rule, std::move(packets), std::move(text));
  }
};

namespace check_detail {

// The smallest retransmit timeout a QP can have (IBTA: 4.096 us * 2^timeout,
// timeout >= 1): the same request seen again sooner was not retransmitted by
// the requester but duplicated by the network.
inline constexpr Nanos kMinTimeout{8192};

inline std::string us(Nanos t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f us", static_cast<double>(t.count()) / 1000.0);
  return b;
}

inline std::string num(uint64_t n) { return "#" + std::to_string(n); }

// A First or Middle packet carries exactly one path MTU.
inline void learn_mtu(const Analyzer::At& a) {
  if (a.s.mtu == 0 && (a.info.is(wire::OpClass::kMiddle) ||
                       (a.info.is(wire::OpClass::kFirst) && !a.info.is(wire::OpClass::kLast))))
    a.s.mtu = a.len;
}

// State stays bounded when a capture holds only one direction (no ACK ever
// retires a request) or a UC connection (no ACKs at all): what lies more than
// kWindow PSNs behind the newest is forgotten.
inline constexpr uint32_t kWindow = 1u << 16;
template <typename Map>
void forget_old(Map& m, wire::Psn newest) {
  if (m.size() > kWindow) m.erase((newest - kWindow).value());
  while (m.size() > 2 * kWindow) m.erase(m.begin());
}

// A READ of `length` bytes is answered by this many responses (and reserves
// as many PSNs): one per path MTU, at least one.
inline uint32_t read_responses(uint32_t length, uint32_t mtu) {
  return std::max<uint32_t>(1, (length + mtu - 1) / mtu);
}

// icrc.bad: the packet's ICRC does not match (requests and responses alike).
inline void icrc_bad(const Analyzer::At& a) {
  if (!a.p.icrc_ok) a.report(rule::kIcrcBad, {a.p.number}, a.where() + a.what() + ": the ICRC does not match");
}

}  // namespace check_detail

}  // namespace rocelab::trace
