// What `rocelab replay` learns of a capture before it re-enacts anything
// (replay.h): which connection, what its responder needs (memory regions per
// R_Key, receives, the path MTU, where the first message starts). Shared by
// the replay and by --to-scenario. Internal to src/replay.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "capture/frames.h"
#include "present/fields.h"
#include "replay/replay.h"
#include "wire/frame.h"

namespace rocelab::replay::detail {

using wire::OpClass;

using present::qpn_text;
using present::rkey_text;

struct ReadPass {
  bool ok = true;
  std::string error, damaged;
  uint64_t frames = 0, packets = 0;
};

// Streams a capture: f(frame number, time, decoded RoCEv2 frame) for each
// RoCEv2 packet; other frames are counted and skipped.
template <class F>
inline ReadPass for_each_packet(const std::string& path, F&& f) {
  ReadPass r;
  // The ICRC is not judged here: decode_frame need not compute it.
  const capture::CaptureRead c = capture::for_each_roce_frame(path, false, &r.error, std::forward<F>(f));
  r.ok = c.readable;
  r.damaged = c.damaged;
  r.frames = c.frames;
  r.packets = c.packets;
  return r;
}

// A message starts here: First, Only, or a READ or atomic request.
inline bool starts_message(const wire::OpInfo& info) {
  return info.is(OpClass::kFirst) || (!info.is(OpClass::kMiddle) && !info.is(OpClass::kLast));
}

// The VA range one R_Key's requests reach.
struct Region {
  uint64_t lo = UINT64_MAX, hi = 0;
};

// What the first pass learns of each PSN space.
struct SpaceInfo {
  wire::IpAddr req_addr, resp_addr;
  uint32_t resp_qpn = 0;
  std::optional<uint32_t> req_qpn;
  wire::Transport transport = wire::Transport::kRC;
  uint64_t requests = 0, responses = 0;
  uint32_t mtu_seen = 0, max_payload = 0;
  std::set<uint32_t> refused;  // request PSNs the responder NAKed (invalid request, access, operational)
  // What its responder needs, from the first request that starts a message on.
  bool started = false;
  uint32_t start_psn = 0;
  int64_t ref_rel = 0;   // the newest request, relative to start_psn
  uint32_t ref_psn = 0;
  struct Use {
    uint32_t rkey = 0;
    uint64_t lo = 0, hi = 0;
  };
  // The memory requests reach, by PSN, until the responder accepts them (an
  // ACK covers them: into regions) or refuses them (a NAK names them: gone).
  std::map<int64_t, Use> pending;
  std::map<uint32_t, Region> regions;  // by R_Key
  uint64_t recv_needed = 0, max_send = 0, send_len = 0;

  void accept(const Use& u) {
    Region& g = regions[u.rkey];
    g.lo = std::min(g.lo, u.lo);
    g.hi = std::max(g.hi, u.hi);
  }
  void accept_upto(int64_t rel) {  // every pending request at or before rel
    auto end = pending.upper_bound(rel);
    for (auto it = pending.begin(); it != end; ++it) accept(it->second);
    pending.erase(pending.begin(), end);
  }

  std::string name() const {
    return req_addr.to_string() + (req_qpn ? " qp " + qpn_text(*req_qpn) : std::string()) + " -> " +
           resp_addr.to_string() + " qp " + qpn_text(resp_qpn);
  }
  bool connected_to(const SpaceInfo& o) const {
    return req_addr == o.resp_addr && resp_addr == o.req_addr && req_qpn && *req_qpn == o.resp_qpn &&
           (!o.req_qpn || *o.req_qpn == resp_qpn);
  }
};


struct Plan {
  SpaceInfo sp;                        // the connection's PSN space replayed
  std::map<uint32_t, Region> regions;  // by the capture's R_Key
  uint32_t start_psn = 0;              // the first request that starts a message
  uint32_t mtu = 1024;
  uint64_t recv_needed = 0, max_send = 0;  // receives (SENDs, WRITEs with Immediate), the largest SEND

  bool is_request(const wire::DecodedFrame& d) const {
    return d.roce.hdr.info().is(OpClass::kRequest) && d.ip.info.src == sp.req_addr && d.ip.info.dst == sp.resp_addr &&
           d.roce.hdr.bth.dest_qpn.value() == sp.resp_qpn && d.roce.hdr.info().transport == sp.transport;
  }
  bool is_response(const wire::DecodedFrame& d) const {
    return sp.transport == wire::Transport::kRC && sp.req_qpn && d.roce.hdr.info().is(OpClass::kResponse) &&
           d.ip.info.src == sp.resp_addr && d.ip.info.dst == sp.req_addr &&
           d.roce.hdr.bth.dest_qpn.value() == *sp.req_qpn;
  }
};

inline uint32_t round_mtu(uint32_t n) {
  for (uint32_t m : {256u, 512u, 1024u, 2048u, 4096u})
    if (n <= m) return m;
  return 4096;
}

// The first pass. False with r.status 2 and r.error when there is nothing to
// replay (or the file cannot be read); fills r's connection fields.
bool make_plan(const ReplayOptions& o, ReplayResult& r, Plan& plan);

}  // namespace rocelab::replay::detail
