// The rules `rocelab check` applies (docs/replay.md explains each one): an id,
// whether breaking it is an error (exit 1) or a notice of ordinary network
// behaviour (loss, retransmission, congestion), and a line on what it checks.
#pragma once
#include <span>
#include <string_view>

namespace rocelab::trace {

enum class Severity : uint8_t { kNotice, kError };

struct Rule {
  std::string_view id;
  Severity severity;
  std::string_view what;
};

namespace rule {
// Requests (one PSN space: a requester's requests and its responder's responses)
inline constexpr std::string_view kPsnGap = "psn.gap", kRetransmission = "psn.retransmission",
    kNetworkDuplicate = "psn.network_duplicate", kOutOfOrder = "psn.out_of_order", kSeqNoFirst = "seq.no_first", kSeqInside = "seq.new_inside",
    kLenMiddle = "len.first_middle", kLenMtu = "len.mtu", kLenReth = "len.reth", kPadAlign = "pad.alignment",
    kPadFirstMiddle = "pad.first_middle", kPkeyChanged = "pkey.changed", kIcrcBad = "icrc.bad",
    // Responses
    kAckUnsent = "ack.unsent_psn", kAckDuplicate = "ack.duplicate", kNakPsn = "nak.psn", kNak = "nak.received",
    kRnrNak = "rnr.nak", kRnrWait = "rnr.wait_short", kMsnBackwards = "msn.backwards",
    kReadCount = "read.response_count", kReadPsn = "read.response_psn", kReadLength = "read.length",
    kAtomicAck = "atomic.ack_opcode", kResponseUnmatched = "response.unmatched",
    // UD and congestion
    kUdQkey = "ud.qkey_changed", kEcnCe = "ecn.ce", kCnp = "cnp";
}  // namespace rule

std::span<const Rule> all_rules();
const Rule* find_rule(std::string_view id);

}  // namespace rocelab::trace
