// DCQCN at the QP (docs/congestion.md, "DCQCN in the engine"): the glue
// between the verbs engine and src/cc's algorithms, which know nothing of
// packets or clocks.
//
// Notification point: a packet that arrives for a QP with ECN CE (a switch
// marked it) is answered with a CNP — BTH opcode 0x81, BECN set, 16 zero
// bytes — to the QP that sent it, at most one per min_time_between_cnps.
// Reaction point: the QP's requests leave no faster than its RateControl's
// rate. A pacer keeps, per QP, the time the next request may leave; a packet
// due later is held, and the QP's one timer sends it when its time comes. The
// same timer runs the algorithm's own timers (rate increase, alpha update).
// Responses (ACKs, READ responses, atomic ACKs) are not paced.
#include <algorithm>
#include <limits>

#include "emu/engine.h"
#include "emu/roles.h"
#include "wire/frame.h"

namespace rocelab::emu {
namespace {

// DSCP 48 and ECT(0): what a ConnectX-4 Lx sends its CNPs with (mlx5's
// cnp_dscp default, in the CNP capture of traces/public).
constexpr uint8_t kCnpTrafficClass = 48 << 2 | 2;
constexpr int64_t kPsPerNs = 1000;

int64_t now_ps(const Engine& e) { return static_cast<int64_t>(e.transport->now().count()) * kPsPerNs; }

// Time `bytes` take on the wire at `bps`, in ps.
int64_t wire_ps(uint64_t bytes, uint64_t bps) {
  return static_cast<int64_t>(bytes * 8'000'000'000'000ull / std::max<uint64_t>(bps, 1));
}

// The next packet may leave once the last one's bytes have gone at the rate
// the QP has now: a cut lengthens the gap, an increase shortens it at once
// (a QP cut to its floor would otherwise wait out one packet at the floor).
void repace(QpImpl& qp) {
  Congestion& c = qp.cong;
  c.next_send_ps = c.last_ps + wire_ps(c.last_bytes, c.rate->rate_bps());
}

// Arms the QP's timer at the earlier of the algorithm's next timer and, when
// a packet is held, the pacer's time; cancels it when neither is pending.
void arm(QpImpl& qp) {
  Congestion& c = qp.cong;
  Nanos at = c.rate->next_timer();
  if (c.held) at = std::min(at, Nanos((c.next_send_ps + kPsPerNs - 1) / kPsPerNs));
  if (at == Nanos::max()) {
    if (c.timer->armed()) c.timer->cancel();
  } else {
    c.timer->arm_at(at);
  }
}

void on_timer(QpImpl& qp) {
  Congestion& c = qp.cong;
  c.rate->on_timer(qp.eng->transport->now());
  repace(qp);
  if (c.held && c.next_send_ps <= now_ps(*qp.eng)) {
    c.held = false;
    req_run(qp);  // may hold the next packet again (and arm)
  }
  arm(qp);
}

}  // namespace

void cc_init(QpImpl& qp) {
  Engine& e = *qp.eng;
  if (e.cfg.cc == cc::Algorithm::kNone) return;
  Congestion& c = qp.cong;
  std::string error;
  c.rate = cc::make_rate_control(e.cfg.cc, e.cfg.dcqcn, e.cfg.line_rate_bps, &error);
  if (!c.rate) return;  // not reached: Device::create checked the configuration
  c.np = cc::NotificationPoint(e.cfg.min_time_between_cnps);
  // Idle since long before now: its first packet may start a full burst.
  c.last_ps = c.next_send_ps = std::numeric_limits<int64_t>::min() / 4;
  c.last_bytes = 0;
  c.held = false;
  if (c.timer) {
    c.timer->cancel();
  } else {
    QpImpl* raw = &qp;
    c.timer = e.transport->make_timer([raw] { on_timer(*raw); });
  }
}

bool cc_may_send(QpImpl& qp) {
  Congestion& c = qp.cong;
  if (!c.rate) return true;
  if (c.next_send_ps <= now_ps(*qp.eng)) {
    c.held = false;
    return true;
  }
  if (!c.held) {
    c.held = true;
    arm(qp);
  }
  return false;
}

void cc_sent(QpImpl& qp) {
  Congestion& c = qp.cong;
  if (!c.rate) return;
  Engine& e = *qp.eng;
  if (e.tx.n == 0) return;  // nothing was built
  const Datagram& d = e.tx.batch[e.tx.n - 1];
  const auto wire_bytes = static_cast<uint32_t>(d.payload.size() + wire::ip_udp_header_len(d.ip.dst.v6) +
                                                wire::kEthernetWireOverhead);
  const Nanos now = e.transport->now();
  c.rate->on_sent(now, wire_bytes);
  // A QP that was idle counts from now, less the burst it may send at once.
  const int64_t burst_ps = std::max<int64_t>(wire_ps(e.cfg.pacing_burst_bytes, c.rate->rate_bps()),
                                             e.cfg.pacing_burst_time.count() * 1000);
  c.last_ps = std::max(c.next_send_ps, now_ps(e) - burst_ps);
  c.last_bytes = wire_bytes;
  repace(qp);
  arm(qp);
}

void cc_on_ce(QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d) {
  Congestion& c = qp.cong;
  if (!c.rate) return;
  Engine& e = *qp.eng;
  if (!c.np.on_ce_marked(e.transport->now())) return;
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kCnp;
  h.bth.becn = true;
  wire::IpUdpInfo ip;
  if (qp.type_ == QpType::kUD) {  // the sender is named by the datagram
    h.bth.dest_qpn = pkt.hdr.deth.src_qpn;
    ip = qp.ip_to(d.ip.src);
  } else {
    h.bth.dest_qpn = wire::Qpn(qp.attr.dest_qp_num);
    ip = qp.ip_to(qp.dst);
  }
  ip.tclass = kCnpTrafficClass;
  e.emit(qp, ip, h, 0, [](std::byte*) {});
  e.counters.np_cnp_sent++;
  qp.ctr.np_cnp_sent++;
}

void cc_on_cnp(Engine& e, const wire::RocePacket& pkt, const Datagram& d) {
  QpImpl* qp = e.find_qp(pkt.hdr.bth.dest_qpn.value());
  if (!qp) return e.drop(nullptr, d, "unknown QP", &Counters::rcvd_hdr_err);
  // A connected QP takes CNPs only from its peer, as it takes responses.
  if (qp->type_ != QpType::kUD && !(d.ip.src == qp->dst))
    return e.drop(qp, d, "source address", &Counters::rcvd_hdr_err);
  e.counters.rcvd_pkts++;
  qp->ctr.rcvd_pkts++;
  if (e.logging()) e.log_received(*qp, pkt, d);
  if (!qp->cong.rate) {
    e.counters.rp_cnp_ignored++;
    qp->ctr.rp_cnp_ignored++;
    return;
  }
  e.counters.rp_cnp_handled++;
  qp->ctr.rp_cnp_handled++;
  qp->cong.rate->on_cnp(e.transport->now());
  repace(*qp);
  arm(*qp);
}

}  // namespace rocelab::emu
