// The receive path: ICRC and header checks, then demux to the QP's responder
// (requests) or completer (responses). Bad input is counted and dropped
// (drop.cc).
#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "emu/engine.h"
#include "emu/roles.h"
#include "wire/byte_order.h"
#include "wire/icrc.h"

namespace rocelab::emu {

namespace {

enum class Icrc { kOk, kRecovered, kBad };

// The ICRC over the IP/UDP headers the datagram arrived with, rebuilt from
// *ip. A UDP socket does not see the IPv4 Identification and DF bit: when the
// ICRC does not match them as given (our own senders: ID 0, DF), they are
// recovered from the ICRC itself and written to *ip (wire/icrc.h).
// A datagram whose ICRC was left out (Datagram::icrc_omitted) is intact.
Icrc check_icrc(const Datagram& d, uint32_t carried, wire::IpUdpInfo* ip) {
  if (d.icrc_omitted) return Icrc::kOk;
  const uint32_t computed = wire::roce_icrc(*ip, d.payload);
  if (computed == carried) return Icrc::kOk;
  if (ip->dst.v6) return Icrc::kBad;  // IPv6: every field the ICRC covers is known
  const size_t ip_hlen = wire::kIpv4HeaderLen;
  const size_t rest = d.payload.size() - wire::kBthLen - wire::kIcrcLen;
  auto unseen = wire::solve_ipv4_unseen(computed ^ carried, ip_hlen, rest);
  if (!unseen) return Icrc::kBad;
  ip->ip_id ^= unseen->id;
  ip->df = ip->df != unseen->df;
  return Icrc::kRecovered;
}

bool transport_matches(QpType t, wire::Transport w) {
  switch (t) {
    case QpType::kRC: return w == wire::Transport::kRC;
    case QpType::kUC: return w == wire::Transport::kUC;
    case QpType::kUD: return w == wire::Transport::kUD;
    case QpType::kXrcIni:
    case QpType::kXrcTgt: return w == wire::Transport::kXRC;
  }
  return false;
}

}  // namespace

void Device::Engine::log_received(const QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d) {
  EngineEvent e;
  e.kind = EventKind::kPacketReceived;
  e.qpn = qp.qpn;
  e.bth_opcode = pkt.hdr.bth.opcode;
  e.psn = pkt.hdr.bth.psn.value();
  e.dest_qpn = pkt.hdr.bth.dest_qpn.value();
  e.length = static_cast<uint32_t>(d.payload.size());
  log(e);
}

void Device::Engine::tap_received(const Datagram& d) {
  if (!d.icrc_omitted || d.payload.size() < wire::kBthLen + wire::kIcrcLen || d.payload.size() > wire::kMaxFrameLen) {
    cfg.tap->on_packet(Direction::kRx, transport->now(), d);
    return;
  }
  if (!rx_filled) rx_filled = std::make_unique_for_overwrite<std::array<std::byte, wire::kMaxFrameLen>>();
  std::byte* p = rx_filled->data();
  const size_t len = d.payload.size();
  std::memcpy(p, d.payload.data(), len);
  const std::span<const std::byte> filled(p, len);
  wire::store_le32(p + len - wire::kIcrcLen, wire::roce_icrc(d.ip, filled));
  cfg.tap->on_packet(Direction::kRx, transport->now(), Datagram{d.ip, filled, false});
}

void Device::Engine::receive(const Datagram& arrived) {
  auto parsed = wire::parse_roce(arrived.payload);
  if (!parsed) {
    if (cfg.tap) tap_received(arrived);
    return drop(nullptr, arrived, "malformed", &Counters::rcvd_hdr_err);
  }
  const wire::RocePacket& pkt = *parsed;
  // The capture records the header the sender sent: with the recovered ID.
  Datagram d = arrived;
  const Icrc icrc = check_icrc(arrived, pkt.icrc, &d.ip);
  if (cfg.tap) tap_received(d);
  // IBTA A17.3.3 / rxe: a packet whose ICRC does not match is dropped silently.
  if (icrc == Icrc::kBad) return drop(nullptr, d, "bad ICRC", &Counters::rcvd_icrc_err);
  if (icrc == Icrc::kRecovered) counters.icrc_ip_recovered += 1;
  const bool ce = (d.ip.tclass & 3) == 3;  // CE: a switch marked it
  if (ce) counters.np_ecn_marked_roce_packets += 1;
  const wire::OpInfo& info = pkt.hdr.info();
  if (pkt.hdr.bth.pkey != wire::kDefaultPkey)
    return drop(nullptr, d, "P_Key", &Counters::rcvd_hdr_err);
  if (d.ip.dst.is_multicast()) return mcast_receive(pkt, d);  // mcast.cc
  if (!(d.ip.dst == transport->local_address()))
    return drop(nullptr, d, "not our address", &Counters::rcvd_hdr_err);
  if (!gone_peers.empty()) gone_peers.erase(d.ip.src);  // it is back (or never left)
  if (info.transport == wire::Transport::kCNP) return cc_on_cnp(*this, pkt, d);  // congestion.cc
  if (pkt.hdr.bth.dest_qpn == wire::kGsiQpn && gsi) return gsi_receive(pkt, d);  // gsi.cc
  QpImpl* qp = find_qp(pkt.hdr.bth.dest_qpn.value());
  if (!qp) return drop(nullptr, d, "unknown QP", &Counters::rcvd_hdr_err);
  if (!transport_matches(qp->type_, info.transport))
    return drop(qp, d, "opcode of another transport", &Counters::rcvd_hdr_err);
  const QpState s = qp->state_;
  const bool is_request = info.is(wire::OpClass::kRequest);
  // XRC: requests go to a target QP, responses to an initiator.
  if ((qp->type_ == QpType::kXrcIni && is_request) || (qp->type_ == QpType::kXrcTgt && !is_request))
    return drop(qp, d, is_request ? "XRC request to an initiator QP" : "XRC response to a target QP",
                &Counters::rcvd_hdr_err);
  // IBTA 10.3.1: a QP receives in RTR and later; it answers (as requester) from RTS.
  const bool can_receive = s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd ||
                           s == QpState::kSqe;
  if (!can_receive || (!is_request && s == QpState::kRtr))
    return drop(qp, d, "QP state", &Counters::rcvd_hdr_err);
  // rxe: a connected QP takes packets only from the address of its path.
  if (qp->type_ != QpType::kUD && !(d.ip.src == qp->dst))
    return drop(qp, d, "source address", &Counters::rcvd_hdr_err);
  // A response acknowledges only what was sent. One naming a PSN at or after
  // the next PSN the requester has never used is a ghost (forged, or from an
  // older incarnation of the connection): since a response beyond a WQE
  // completes it implicitly, it would complete every outstanding SEND and
  // WRITE. (req.next_psn only moves forward: retries resend below it.)
  if (!is_request && qp->reliable() && !pkt.hdr.bth.psn.before(qp->req.next_psn))
    return drop(qp, d, "response for a PSN never sent", &Counters::rcvd_hdr_err);
  counters.rcvd_pkts++;
  qp->ctr.rcvd_pkts++;
  if (logging()) log_received(*qp, pkt, d);
  if (ce) cc_on_ce(*qp, pkt, d);  // the notification point (congestion.cc)
  if (is_request) {
    resp_on_request(*qp, pkt, d);
  } else {
    comp_on_response(*qp, pkt);
  }
}

}  // namespace rocelab::emu
