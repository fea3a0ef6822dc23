// `rocelab decode --summary`: tallies per PSN space — one requester's requests
// and its responder's responses, the model of `rocelab check` (src/trace) — so
// that a QP's requests and the ACKs it sends for the other direction are never
// mixed; UD traffic per flow (source, destination, destination QP).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "decode/decode_format.h"
#include "trace/check.h"
#include "wire/packet.h"

namespace rocelab::decode {

struct SpaceStats {
  std::string transport;
  std::string src, dst;  // UD flows: source and destination
  uint32_t ud_qpn = 0;
  int space = -1;        // the analyzer's PSN space, -1 for a UD flow
  uint64_t packets = 0, requests = 0, responses = 0, bad_icrc = 0;
  std::map<uint8_t, uint64_t> per_opcode;
  bool have_psn = false;
  wire::Psn psn_lo, psn_hi;  // modular range of the request PSNs
  std::unordered_set<uint32_t> request_psns;
  std::vector<uint32_t> retransmitted;     // request PSNs seen again, in order of repetition
  std::array<uint64_t, 32> naks{};         // by NAK code (AETH syndrome bits 4-0)
  uint64_t rnr_naks = 0;
};

class Summary {
 public:
  void add(const Endpoints& e, const wire::RocePacket& p, bool icrc_ok, std::chrono::nanoseconds ts);
  bool empty() const { return stats_.empty(); }
  std::string text();
  std::vector<std::string> json();  // one object per PSN space / UD flow, "type":"psn_space" or "ud_flow"

 private:
  std::string title(const SpaceStats& s) const;
  trace::Analyzer analyzer_;
  std::vector<trace::SpaceSummary> spaces_;  // filled by text()/json()
  std::map<int, size_t> by_space_;
  std::map<std::tuple<std::string, std::string, uint32_t>, size_t> by_ud_flow_;
  std::vector<SpaceStats> stats_;  // in order of first appearance
  uint64_t number_ = 0;
};

}  // namespace rocelab::decode
