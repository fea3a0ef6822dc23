#include "trace/rules.h"

#include <array>

namespace rocelab::trace {

namespace {

using enum Severity;

constexpr std::array kRules = {
    Rule{rule::kPsnGap, kNotice, "a request PSN ahead of the next one expected: packets before it are missing here"},
    Rule{rule::kRetransmission, kNotice,
         "a request PSN sent again, with its likely cause: a NAK, an RNR NAK, a timeout, or spurious"},
    Rule{rule::kNetworkDuplicate, kNotice,
         "the same request again too soon for any retransmit timer: the network delivered it twice"},
    Rule{rule::kOutOfOrder, kNotice,
         "a request PSN missing earlier arrives late, before anything asked for it again: reordered on the way"},
    Rule{rule::kSeqNoFirst, kError, "a Middle or Last packet whose message never had a First"},
    Rule{rule::kSeqInside, kError, "a First or Only packet while a multi-packet message is still open"},
    Rule{rule::kLenMiddle, kError, "First and Middle packets of a connection carry exactly one MTU each"},
    Rule{rule::kLenMtu, kError, "a packet's payload is larger than the path MTU (or 4096)"},
    Rule{rule::kLenReth, kError, "the payloads of a WRITE message add up to the DMA length of its RETH"},
    Rule{rule::kPadAlign, kError, "payload and pad together are a multiple of 4 bytes"},
    Rule{rule::kPadFirstMiddle, kError, "First and Middle packets have no pad (their payload is one MTU)"},
    Rule{rule::kPkeyChanged, kError, "every packet of a connection carries the same P_Key"},
    Rule{rule::kIcrcBad, kError, "the ICRC matches the packet (as the receiver computes it)"},
    Rule{rule::kAckUnsent, kError, "an ACK or NAK names a PSN the requester never sent"},
    Rule{rule::kAckDuplicate, kNotice, "an ACK for PSNs already acknowledged (the answer to duplicate requests)"},
    Rule{rule::kNakPsn, kError,
         "a PSN sequence error NAK names the PSN the responder expected (the first one it did not get)"},
    Rule{rule::kNak, kNotice, "a NAK: PSN sequence error, invalid request, remote access or operational error"},
    Rule{rule::kRnrNak, kNotice, "an RNR NAK (receiver not ready) and the delay it asks for"},
    Rule{rule::kRnrWait, kError, "after an RNR NAK the requester waits at least the delay it asks for"},
    Rule{rule::kMsnBackwards, kError, "the MSN in ACKs never goes backwards"},
    Rule{rule::kReadCount, kError, "a READ of N bytes is answered by ceil(N / MTU) responses (at least one)"},
    Rule{rule::kReadPsn, kError, "READ responses carry the PSNs the READ request reserved, First to Last in order"},
    Rule{rule::kReadLength, kError, "the READ responses' payloads add up to the READ's DMA length"},
    Rule{rule::kAtomicAck, kError, "an atomic request is acknowledged by an ATOMIC Acknowledge (it carries the value)"},
    Rule{rule::kResponseUnmatched, kNotice, "a response for which this capture holds no request"},
    Rule{rule::kUdQkey, kNotice, "a UD flow changes its Q_Key"},
    Rule{rule::kEcnCe, kNotice, "a packet marked Congestion Experienced (ECN CE) on the way"},
    Rule{rule::kCnp, kNotice, "a Congestion Notification Packet (RoCEv2 CNP)"},
};

}  // namespace

std::span<const Rule> all_rules() { return kRules; }

const Rule* find_rule(std::string_view id) {
  for (const Rule& r : kRules)
    if (r.id == id) return &r;
  return nullptr;
}

}  // namespace rocelab::trace
