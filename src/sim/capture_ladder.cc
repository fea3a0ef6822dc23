#include "sim/capture_ladder.h"

#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "capture/frames.h"
#include "present/headers.h"
#include "wire/cm_mad.h"
#include "wire/frame.h"
#include "wire/gsi.h"

namespace rocelab::sim {
namespace {

// A CM MAD in a few words, and what identifies it for "(again)": attribute,
// TID and the sender's comm ID.
std::string mad_label(std::span<const std::byte> mad, std::tuple<uint16_t, uint64_t, uint32_t>* key) {
  auto m = wire::parse_cm_mad(mad);
  if (!m) {
    auto h = wire::parse_mad_header(mad);
    if (!h) return "MAD (unreadable)";
    char b[64];
    std::snprintf(b, sizeof b, "MAD class 0x%02x attr 0x%04x", h->mgmt_class, h->attr_id);
    return b;
  }
  const wire::CmAttr attr = wire::attr_of(m->msg);
  std::string s = "CM " + std::string(wire::short_name(attr));
  char b[96] = "";
  uint32_t comm = 0;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, wire::CmReq>) {
          comm = x.local_comm_id;
          std::snprintf(b, sizeof b, " qpn 0x%06x psn %u", x.local_qpn.value(), x.starting_psn.value());
        } else if constexpr (std::is_same_v<T, wire::CmRep>) {
          comm = x.local_comm_id;
          std::snprintf(b, sizeof b, " qpn 0x%06x psn %u", x.local_qpn.value(), x.starting_psn.value());
        } else if constexpr (std::is_same_v<T, wire::CmRej>) {
          comm = x.local_comm_id;
          std::snprintf(b, sizeof b, " reason %u", x.reason);
        } else if constexpr (std::is_same_v<T, wire::CmSidrReq>) {
          comm = x.request_id;
        } else if constexpr (std::is_same_v<T, wire::CmSidrRep>) {
          comm = x.request_id;
          std::snprintf(b, sizeof b, " status %u qpn 0x%06x", x.status, x.qpn.value());
        } else {
          comm = x.local_comm_id;
        }
      },
      m->msg);
  *key = {static_cast<uint16_t>(attr), m->hdr.tid, comm};
  return s + b;
}

}  // namespace

bool ladder_from_capture(const std::string& path, size_t max_packets, CaptureLadder* out, std::string* error) {
  auto reader = capture::FrameReader::open(path, error);
  if (!reader) {
    *error = path + ": " + *error;
    return false;
  }
  const int link = reader->link_type();
  Ladder& l = out->ladder;
  std::map<std::string, int> lanes;
  auto lane = [&](const wire::IpAddr& a) {
    auto [it, fresh] = lanes.emplace(a.to_string(), static_cast<int>(lanes.size()));
    if (fresh) l.lanes.push_back(a.to_string());
    return it->second;
  };
  std::set<std::tuple<int, uint32_t, uint32_t>> requests;  // (from, dest QPN, PSN) seen
  std::set<std::tuple<int, uint16_t, uint64_t, uint32_t>> mads;  // (from, attribute, TID, comm ID) seen
  std::chrono::nanoseconds t0{-1};
  while (const capture::Frame* f = reader->next()) {
    const capture::Frame& cf = *f;
    auto d = wire::decode_frame(link, cf.data);
    const bool roce_port = d || (d.error() != wire::WireErrc::kNotRoce &&
                                 d.error() != wire::WireErrc::kUnsupportedLinkType);
    if (roce_port && t0.count() < 0) t0 = cf.ts;  // time 0: the first RoCEv2 packet
    const Nanos t = roce_port ? cf.ts - t0 : Nanos(0);
    if (!d) {
      if (d.error() == wire::WireErrc::kNotRoce || d.error() == wire::WireErrc::kUnsupportedLinkType) {
        ++out->other_frames;
      } else {
        ++out->bad_packets;
        if (out->roce_packets + out->bad_packets <= max_packets)
          l.note(t, -1, "an undecodable packet on UDP 4791: " + d.error().message());
      }
      continue;
    }
    ++out->roce_packets;
    if (out->roce_packets > max_packets) {
      ++out->not_drawn;
      continue;
    }
    const wire::RoceHeaders& h = d->roce.hdr;
    LadderPacket p;
    p.from = lane(d->ip.info.src);
    p.to = lane(d->ip.info.dst);
    p.sent = p.arrived = t;
    p.fate = LadderPacket::Fate::kDelivered;
    p.opcode = h.bth.opcode;
    p.psn = h.bth.psn.value();
    p.dest_qpn = h.bth.dest_qpn.value();
    p.payload_len = static_cast<uint32_t>(d->roce.payload.size());
    p.ack_req = h.bth.ack_req;
    p.bad_icrc = !d->icrc_ok();
    p.headers = present::header_lines(d->roce);
    if (h.info().carries(wire::Hdr::kAeth)) {
      p.aeth_syndrome = h.aeth.syndrome;
      p.msn = h.aeth.msn;
    }
    if (wire::is_gsi_mad(d->roce)) {
      std::tuple<uint16_t, uint64_t, uint32_t> key{};
      p.mad = mad_label(d->roce.payload, &key);
      p.retransmission = !mads.insert({p.from, std::get<0>(key), std::get<1>(key), std::get<2>(key)}).second;
    } else if (h.info().is(wire::OpClass::kRequest)) {
      p.retransmission = !requests.insert({p.from, p.dest_qpn, p.psn}).second;
    }
    const size_t idx = l.packets.size();
    l.packets.push_back(p);
    l.entries.push_back({t, l.entries.size(), p.from, idx, {}, std::nullopt});
  }
  out->damaged = reader->damaged();
  return true;
}

}  // namespace rocelab::sim
