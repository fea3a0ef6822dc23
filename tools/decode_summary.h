// `rocelab decode --summary`: per-QP tallies over every decoded packet, keyed by
// source, destination (IP, or LID/GID for native InfiniBand) and destination QP
// (one direction of a connection).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "tools/decode_format.h"
#include "wire/packet.h"

namespace rocelab::tools {

struct QpStats {
  std::string src, dst;
  wire::Qpn dest_qpn;
  uint64_t packets = 0, bad_icrc = 0;
  std::map<uint8_t, uint64_t> per_opcode;
  wire::Psn psn_lo, psn_hi;  // modular range of every PSN seen
  std::unordered_set<uint32_t> request_psns;
  std::vector<uint32_t> retransmitted;     // request PSNs seen again, in order of repetition
  std::array<uint64_t, 32> naks{};         // by NAK code (AETH syndrome bits 4-0)
  uint64_t rnr_naks = 0;
};

class Summary {
 public:
  void add(const Endpoints& e, const wire::RocePacket& p, bool icrc_ok);
  bool empty() const { return qps_.empty(); }
  std::string text() const;
  std::vector<std::string> json() const;  // one object per QP, "type":"qp"

 private:
  using Key = std::tuple<std::string, std::string, uint32_t>;
  std::map<Key, size_t> index_;
  std::vector<QpStats> qps_;  // in order of first appearance
};

}  // namespace rocelab::tools
