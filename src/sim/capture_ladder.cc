#include "sim/capture_ladder.h"

#include <map>
#include <set>
#include <tuple>

#include "wire/frame.h"
#include "wire/pcap_reader.h"

namespace rocelab::sim {

bool ladder_from_capture(const std::string& path, size_t max_packets, CaptureLadder* out, std::string* error) {
  std::string detail;
  auto reader = wire::PcapReader::open(path, &detail);
  if (!reader) {
    *error = path + ": " + (detail.empty() ? reader.error().message() : detail);
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
  std::chrono::nanoseconds t0{-1};
  for (;;) {
    auto f = reader->next(&detail);
    if (!f) {
      out->damaged = detail.empty() ? f.error().message() : detail;
      break;
    }
    if (!*f) break;
    const wire::CapturedFrame& cf = **f;
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
    p.headers = header_lines(d->roce);
    if (h.info().carries(wire::Hdr::kAeth)) {
      p.aeth_syndrome = h.aeth.syndrome;
      p.msn = h.aeth.msn;
    }
    if (h.info().is(wire::OpClass::kRequest)) p.retransmission = !requests.insert({p.from, p.dest_qpn, p.psn}).second;
    const size_t idx = l.packets.size();
    l.packets.push_back(p);
    l.entries.push_back({t, l.entries.size(), p.from, idx, {}});
  }
  return true;
}

}  // namespace rocelab::sim
