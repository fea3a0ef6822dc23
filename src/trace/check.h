// `rocelab check`: protocol analysis of a capture, per connection and per PSN
// space. A PSN space is one requester's requests and its responder's
// responses (ACKs, NAKs, READ responses, atomic ACKs); an RC connection has
// two, one each way, which is why a QP's requests and the ACKs it sends for
// the other direction are never mixed. Packets are fed in capture order; the
// state kept is per PSN space (the unacknowledged PSNs, the open message, the
// outstanding READs), not per packet, so memory stays bounded on captures of
// millions of packets.
//
// The checks assume the capture was taken where the responder sees the
// requests (and the requester sees the responses): the responder's expected
// PSN is computed from the requests in the capture. docs/replay.md explains
// every rule (rules.h).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "trace/rules.h"
#include "wire/packet.h"

namespace rocelab::trace {

using Nanos = std::chrono::nanoseconds;

// One decoded packet as the analysis sees it.
struct TracePacket {
  uint64_t number = 0;  // 1-based frame number in the capture
  Nanos time{0};        // capture time
  std::string_view src, dst;  // addresses (IP, or LID for native InfiniBand)
  uint8_t tclass = 0;   // IP traffic class: DSCP and ECN
  const wire::RocePacket* packet = nullptr;
  bool icrc_ok = true;
};

struct Finding {
  std::string_view rule;
  Severity severity = Severity::kNotice;
  std::vector<uint64_t> packets;  // frame numbers, the first is where it was seen
  std::string text;               // one line
  int space = -1;                 // the PSN space (Analyzer::spaces()), -1: none
};

// What one PSN space did, for the summary table.
struct SpaceSummary {
  std::string requester, responder;  // "10.0.0.1 qp 0x000011" (the requester's QPN once a response names it)
  std::string transport;             // "RC", "UC", "UD"
  uint64_t requests = 0, responses = 0, bytes = 0;
  uint64_t gaps = 0, retransmissions = 0, duplicates = 0, naks = 0, rnr_naks = 0, dup_acks = 0;
  uint64_t errors = 0, notices = 0, findings_not_kept = 0;
  uint64_t rtt_samples = 0;
  Nanos rtt_min{0}, rtt_median{0}, rtt_max{0};  // request with AckReq -> the ACK covering it
  uint64_t recoveries = 0;
  Nanos recovery_min{0}, recovery_max{0};       // first transmission of a lost PSN -> its ACK
  int peer = -1;                                // the other PSN space of the same connection
};

struct CheckOptions {
  uint32_t mtu = 0;  // the path MTU; 0: learned from the First/Middle packets
  size_t max_findings_per_rule = 50;  // per PSN space and rule (0: all); the rest are counted
};

class Analyzer {
 public:
  explicit Analyzer(CheckOptions opt = {});
  ~Analyzer();
  // Returns the PSN space the packet belongs to (spaces()), -1 for none (UD,
  // CNP, a response with no request in the capture).
  int add(const TracePacket& p);
  // Call once after the last packet: pairs the PSN spaces into connections.
  void finish();

  const std::vector<Finding>& findings() const { return findings_; }
  std::vector<SpaceSummary> spaces() const;
  uint64_t errors() const { return errors_; }
  uint64_t notices() const { return notices_; }

  struct Space;  // the state of one PSN space (space.h)
  struct At;     // one packet in its PSN space, as the rule functions see it (space.h)

 private:
  void report(int space, std::string_view rule, std::vector<uint64_t> packets, std::string text);
  int space_for_request(const TracePacket& p);
  int space_for_response(const TracePacket& p);
  void on_request(int s, const TracePacket& p);   // check_requests.cc
  void on_response(int s, const TracePacket& p);  // check_responses.cc
  void on_ud(const TracePacket& p);

  CheckOptions opt_;
  using FlowKey = std::tuple<std::string, std::string, uint32_t>;  // src, dst, destination QPN
  std::map<FlowKey, int> request_flows_, response_flows_;
  std::map<FlowKey, uint32_t> ud_qkeys_;
  std::vector<std::unique_ptr<Space>> spaces_;
  std::vector<Finding> findings_;
  std::map<std::pair<int, std::string_view>, uint64_t> kept_;  // findings kept per (space, rule)
  uint64_t errors_ = 0, notices_ = 0;
};

}  // namespace rocelab::trace
