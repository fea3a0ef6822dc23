// The IB CM connection state machine (IBTA 12.9; the kernel's cm.c), for the
// connected port spaces: REQ, MRA, REJ, REP, RTU, DREQ, DREP, timewait.
// Fields are filled as the kernel's CM and rdma_cm fill them (docs/rdma-cm.md
// "What rdma_cm puts into the MADs"). Every function here runs with the
// device lock and Impl::mu held.
#include <algorithm>
#include <cerrno>

#include "cm/impl.h"
#include "wire/cma_hdr.h"

namespace rocelab::cm {
namespace {

std::error_code err(int e) { return {e, std::generic_category()}; }

EventConnParam conn_param_of(const Conn& c) {
  EventConnParam p;
  p.responder_resources = c.responder_resources;
  p.initiator_depth = c.initiator_depth;
  p.flow_control = c.flow_control;
  p.retry_count = c.retry_count;
  p.rnr_retry_count = c.rnr_retry_count;
  p.srq = c.srq;
  p.qp_num = c.remote_qpn;
  return p;
}

// How long to wait for the answer to a MAD: the peer's CM response timeout
// plus twice the packet life time (the kernel's cm_id_priv->timeout_ms).
Nanos mad_timeout(const Impl& impl, uint8_t peer_cm_timeout) {
  return iba_time(peer_cm_timeout) + 2 * iba_time(impl.cfg.packet_life_time);
}

// RoCEv2 flow label of the path: rdma_cm's cma_get_roce_udp_flow_label.
uint32_t roce_flow_label(uint16_t sport, uint16_t dport) {
  return (uint32_t{sport} * 31 + dport) & 0xFFFFF;
}

}  // namespace

// ---- active side ----

std::error_code Impl::send_req(Id& id, const ConnParam& p) {
  if (p.private_data.size() > kReqPrivate - wire::kCmaHdrLen) return err(EINVAL);
  DevicePort& port = *id.port;
  Conn& c = new_conn(port);
  c.id = id.h;
  c.active = true;
  c.tid = form_tid(port, c.local_comm_id);
  c.peer = id.dst.ip;
  c.tclass = id.opt.tos;
  c.hop_limit = 64;
  c.service_id = wire::rdma_cm_service_id(static_cast<uint16_t>(id.ps), id.dst.port);
  c.qp_type = id.qp_type;
  c.local_qpn = p.qp_num & 0xFFFFFF;
  c.local_psn = random24();
  c.responder_resources = p.responder_resources;
  c.initiator_depth = p.initiator_depth;
  c.retry_count = p.retry_count & 7;
  c.rnr_retry_count = p.rnr_retry_count & 7;
  c.srq = p.srq != 0;
  c.flow_control = p.flow_control != 0;
  c.path_mtu = port.mtu;
  c.ack_timeout = id.opt.has_ack_timeout ? id.opt.ack_timeout
                                         : cm_ack_timeout(port.ack_delay, cfg.packet_life_time);
  c.peer_cm_timeout = cfg.cm_response_timeout;

  wire::CmReq r;
  r.local_comm_id = c.local_comm_id;
  r.service_id = c.service_id;
  r.local_ca_guid = port.guid;
  r.local_qkey = 0;
  r.local_qpn = wire::Qpn(c.local_qpn);
  r.responder_resources = c.responder_resources;
  r.initiator_depth = c.initiator_depth;
  r.remote_cm_response_timeout = cfg.cm_response_timeout;
  r.transport = c.qp_type == emu::QpType::kUC ? wire::CmTransport::kUc : wire::CmTransport::kRc;
  r.end_to_end_flow_control = c.flow_control;
  r.starting_psn = wire::Psn(c.local_psn);
  r.local_cm_response_timeout = cfg.cm_response_timeout;
  r.retry_count = c.retry_count;
  r.pkey = 0xFFFF;
  r.path_mtu = static_cast<uint8_t>(c.path_mtu);
  r.rnr_retry_count = c.rnr_retry_count;
  r.max_cm_retries = cfg.max_cm_retries;
  r.srq = c.srq;
  r.primary.local_gid = id.src.ip.gid();
  r.primary.remote_gid = id.dst.ip.gid();
  r.primary.flow_label = roce_flow_label(id.src.port, id.dst.port);
  r.primary.traffic_class = c.tclass;
  r.primary.hop_limit = c.hop_limit;
  r.primary.local_ack_timeout = c.ack_timeout;
  r.alternate.local_lid = r.alternate.remote_lid = 0;  // no alternate path
  wire::CmaHdr hdr;
  hdr.port = id.src.port;
  hdr.src = id.src.ip;
  hdr.dst = id.dst.ip;
  std::array<std::byte, wire::kCmaHdrLen> hb{};
  if (!wire::encode_cma_hdr(hb, hdr)) {
    erase_conn(c.local_comm_id);
    return err(EINVAL);
  }
  std::transform(hb.begin(), hb.end(), r.private_data.begin(), [](std::byte b) { return uint8_t(b); });
  copy_private(r.private_data, p.private_data, wire::kCmaHdrLen);

  c.state = CmState::kReqSent;
  id.conn = c.local_comm_id;
  send(c, wire::make_cm_mad(c.tid, r), cfg.max_cm_retries, mad_timeout(*this, c.peer_cm_timeout));
  return {};
}

void Impl::recv_rep(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h,
                    const wire::CmRep& m) {
  Conn* c = find_conn(m.remote_comm_id);
  if (!c || !c->active || c->udp || (c->remote_comm_id != 0 && c->remote_comm_id != m.local_comm_id)) {
    // cm_rep_handler: a REP for no connection of ours gets REJ "invalid comm ID".
    wire::CmRej rej;
    rej.local_comm_id = m.remote_comm_id;
    rej.remote_comm_id = m.local_comm_id;
    rej.message_rejected = wire::CmMsgRef::kRep;
    rej.reason = wire::rej_reason::kInvalidCommId;
    stats.rej_sent++;
    return send_unconnected(p, g.ip.src, 0, wire::make_cm_mad(h.tid, rej));
  }
  switch (c->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd: {
      stop_timer(*c);
      c->remote_comm_id = m.local_comm_id;
      c->remote_qpn = m.local_qpn.value();
      c->remote_psn = m.starting_psn.value();
      // cm_rep_handler: seen from this side, the peer's initiator depth is
      // what we must answer as responder, and the other way round.
      c->responder_resources = m.initiator_depth;
      c->initiator_depth = m.responder_resources;
      c->rnr_retry_count = m.rnr_retry_count;
      c->srq = m.srq;
      c->flow_control = m.end_to_end_flow_control;
      c->ack_timeout = cm_ack_timeout(m.target_ack_delay, static_cast<uint8_t>(c->ack_timeout - 1));
      c->state = CmState::kRepRcvd;
      c->mra_delay = true;
      Id* id = find_id(c->id);
      if (!id) return;
      id->state = IdState::kConnectResponse;
      Event ev;
      ev.type = EventType::kConnectResponse;
      ev.conn = conn_param_of(*c);
      set_private(ev, m.private_data);
      queue_event(*id, ev);
      return;
    }
    case CmState::kRepRcvd:
    case CmState::kMraRepSent: {
      // A duplicate REP while the application has not yet established: ask
      // the passive side to wait (the kernel's delayed MRA).
      stats.duplicates++;
      wire::CmMra mra;
      mra.local_comm_id = c->local_comm_id;
      mra.remote_comm_id = c->remote_comm_id;
      mra.message_mraed = wire::CmMsgRef::kRep;
      mra.service_timeout = cfg.mra_service_timeout;
      c->state = CmState::kMraRepSent;
      return send_unconnected(*c->port, c->peer, c->tclass, wire::make_cm_mad(c->tid, mra));
    }
    case CmState::kEstablished:
      stats.duplicates++;  // our RTU was lost: send it again
      return resend_last(*c);
    case CmState::kIdle:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kDreqSent:
    case CmState::kDreqRcvd:
    case CmState::kTimewait:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kSidrRepSent:
      stats.mads_dropped++;
      return;
  }
}

std::error_code Impl::send_rtu(Conn& c) {
  if (c.state != CmState::kRepRcvd && c.state != CmState::kMraRepSent) return err(EINVAL);
  wire::CmRtu r;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  c.state = CmState::kEstablished;
  c.mra_delay = false;
  send(c, wire::make_cm_mad(c.tid, r), 0, Nanos(0));
  write_will(c);
  return {};
}

void Impl::recv_mra(const wire::CmMra& m) {
  Conn* c = find_conn(m.remote_comm_id);
  if (!c) {
    stats.mads_dropped++;
    return;
  }
  // cm_mra_handler: wait the service timeout plus the path's ACK timeout
  // before resending (the retries left stay as they were).
  const Nanos wait = iba_time(m.service_timeout) + iba_time(c->ack_timeout);
  if (m.message_mraed == wire::CmMsgRef::kReq && c->state == CmState::kReqSent) {
    c->state = CmState::kMraReqRcvd;
    c->remote_comm_id = m.local_comm_id;
  } else if (m.message_mraed == wire::CmMsgRef::kRep && c->state == CmState::kRepSent) {
    c->state = CmState::kMraRepRcvd;
  } else {
    stats.mads_dropped++;
    return;
  }
  c->timeout = wait;
  c->timer->arm_at(c->port->dev->transport().now() + wait);
}

// ---- passive side ----

void Impl::recv_req(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h,
                    const wire::CmReq& r) {
  // A duplicate: the same active side (comm ID and address) again.
  for (auto& [comm, cp] : conns) {
    Conn& c = *cp;
    if (c.active || c.udp || c.remote_comm_id != r.local_comm_id || !(c.peer == g.ip.src)) continue;
    stats.duplicates++;
    switch (c.state) {
      case CmState::kReqRcvd:
      case CmState::kMraReqSent: {
        // The application has not answered yet: MRA, "wait longer".
        wire::CmMra mra;
        mra.local_comm_id = c.local_comm_id;
        mra.remote_comm_id = c.remote_comm_id;
        mra.message_mraed = wire::CmMsgRef::kReq;
        mra.service_timeout = cfg.mra_service_timeout;
        c.state = CmState::kMraReqSent;
        send(c, wire::make_cm_mad(c.tid, mra), 0, Nanos(0));
        return;
      }
      case CmState::kRepSent:
      case CmState::kMraRepRcvd:
        return resend_last(c);  // our REP was lost
      case CmState::kTimewait: {
        wire::CmRej rej;
        rej.local_comm_id = c.local_comm_id;
        rej.remote_comm_id = c.remote_comm_id;
        rej.reason = wire::rej_reason::kStaleConn;
        stats.rej_sent++;
        return send_unconnected(p, g.ip.src, c.tclass, wire::make_cm_mad(h.tid, rej));
      }
      case CmState::kIdle:
      case CmState::kReqSent:
      case CmState::kMraReqRcvd:
      case CmState::kRepRcvd:
      case CmState::kMraRepSent:
      case CmState::kEstablished:
      case CmState::kDreqSent:
      case CmState::kDreqRcvd:
      case CmState::kSidrReqSent:
      case CmState::kSidrReqRcvd:
      case CmState::kSidrRepSent:
        return;
    }
  }

  auto reject = [&](uint16_t reason) {
    wire::CmRej rej;
    rej.local_comm_id = 0;
    rej.remote_comm_id = r.local_comm_id;
    rej.message_rejected = wire::CmMsgRef::kReq;
    rej.reason = reason;
    stats.rej_sent++;
    send_unconnected(p, g.ip.src, r.primary.traffic_class, wire::make_cm_mad(h.tid, rej));
  };
  const auto svc = wire::parse_rdma_cm_service_id(r.service_id);
  auto hdr = wire::parse_cma_hdr(std::as_bytes(std::span(r.private_data)));
  if (!svc || !hdr) return reject(wire::rej_reason::kInvalidServiceId);
  const auto ps = static_cast<PortSpace>(svc->port_space);
  Id* l = find_listener(ps, svc->port, p, hdr->dst);
  // The kernel's ib_cm matches the service ID (no listener: REJ 8); rdma_cm
  // then refuses what it cannot take (wrong address, QP type, full backlog)
  // by failing the new id, which ib_cm answers with REJ 28.
  if (!l) {
    for (const auto& [hh, o] : ids)
      if (o.state == IdState::kListen && o.ps == ps && o.src.port == svc->port)
        return reject(wire::rej_reason::kConsumerReject);
    return reject(wire::rej_reason::kInvalidServiceId);
  }
  const bool uc = r.transport == wire::CmTransport::kUc;
  if ((uc ? emu::QpType::kUC : emu::QpType::kRC) != l->qp_type || l->ps == PortSpace::kUdp)
    return reject(wire::rej_reason::kConsumerReject);
  if (l->pending >= l->backlog) return reject(wire::rej_reason::kConsumerReject);

  const IdHandle lh = l->h;
  const IdHandle nh = new_id(l->ch, l->ps, l->qp_type);
  l = find_id(lh);
  Id& n = *find_id(nh);
  n.opt = l->opt;
  n.opt.reuseaddr = false;
  n.port = &p;
  n.src = {hdr->dst, svc->port};
  n.dst = {hdr->src, hdr->port};
  n.routed = true;
  n.state = IdState::kConnectRequest;
  n.listener = lh;
  n.counted = true;
  l->pending++;

  Conn& c = new_conn(p);
  c.id = nh;
  c.active = false;
  c.state = CmState::kReqRcvd;
  c.mra_delay = true;
  c.remote_comm_id = r.local_comm_id;
  c.tid = h.tid;
  c.peer = g.ip.src;
  c.tclass = r.primary.traffic_class;
  c.hop_limit = r.primary.hop_limit ? r.primary.hop_limit : 64;
  c.service_id = r.service_id;
  c.qp_type = n.qp_type;
  c.remote_qpn = r.local_qpn.value();
  c.remote_psn = r.starting_psn.value();
  c.local_psn = random24();
  c.responder_resources = r.initiator_depth;
  c.initiator_depth = r.responder_resources;
  c.retry_count = r.retry_count;
  c.rnr_retry_count = r.rnr_retry_count;
  c.srq = r.srq;
  c.flow_control = r.end_to_end_flow_control;
  c.path_mtu = static_cast<emu::Mtu>(std::clamp<uint8_t>(std::min<uint8_t>(r.path_mtu, static_cast<uint8_t>(p.mtu)), 1, 5));
  c.ack_timeout = r.primary.local_ack_timeout;
  c.peer_cm_timeout = r.local_cm_response_timeout;
  c.max_cm_retries = r.max_cm_retries;
  n.conn = c.local_comm_id;

  Event ev;
  ev.type = EventType::kConnectRequest;
  ev.listen_id = lh;
  ev.conn = conn_param_of(c);
  set_private(ev, r.private_data, wire::kCmaHdrLen);
  queue_event(n, ev);
}

std::error_code Impl::send_rep(Id& id, Conn& c, const ConnParam& p) {
  if (c.state != CmState::kReqRcvd && c.state != CmState::kMraReqSent) return err(EINVAL);
  if (p.private_data.size() > kRepPrivate) return err(EINVAL);
  c.local_qpn = p.qp_num & 0xFFFFFF;
  c.responder_resources = p.responder_resources;
  c.initiator_depth = p.initiator_depth;
  wire::CmRep r;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.local_qkey = 0;
  r.local_qpn = wire::Qpn(c.local_qpn);
  r.starting_psn = wire::Psn(c.local_psn);
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.target_ack_delay = c.port->ack_delay;
  r.end_to_end_flow_control = p.flow_control != 0;
  r.rnr_retry_count = p.rnr_retry_count & 7;
  r.srq = p.srq != 0;
  r.local_ca_guid = c.port->guid;
  copy_private(r.private_data, p.private_data);
  c.state = CmState::kRepSent;
  c.mra_delay = false;
  id.state = IdState::kAccepted;
  send(c, wire::make_cm_mad(c.tid, r), c.max_cm_retries, mad_timeout(*this, c.peer_cm_timeout));
  return {};
}

void Impl::recv_rtu(const wire::CmRtu& m) {
  Conn* c = find_conn(m.remote_comm_id);
  if (!c || c->active || c->remote_comm_id != m.local_comm_id) {
    stats.mads_dropped++;
    return;
  }
  if (c->state != CmState::kRepSent && c->state != CmState::kMraRepRcvd) {
    stats.duplicates++;  // late (data arrived first: notify) or repeated
    return;
  }
  stop_timer(*c);
  c->state = CmState::kEstablished;
  write_will(*c);
  if (Id* id = find_id(c->id)) {
    id->state = IdState::kEstablished;
    Event ev;
    ev.type = EventType::kEstablished;
    ev.conn = conn_param_of(*c);
    queue_event(*id, ev);
  }
}

// ---- reject ----

std::error_code Impl::send_rej(Conn& c, uint16_t reason, std::span<const uint8_t> pd) {
  if (pd.size() > kRejPrivate) return err(EINVAL);
  wire::CmRej rej;
  rej.local_comm_id = c.local_comm_id;
  rej.remote_comm_id = c.remote_comm_id;
  const bool rep_side = c.state == CmState::kRepRcvd || c.state == CmState::kMraRepSent;
  rej.message_rejected = rep_side ? wire::CmMsgRef::kRep : wire::CmMsgRef::kReq;
  rej.reason = reason;
  if (reason == wire::rej_reason::kTimeout) {
    // ARI: the rejecting CA's GUID (ib_destroy_cm_id in REQ_SENT).
    for (int i = 0; i < 8; ++i) rej.ari[i] = static_cast<uint8_t>(c.port->guid >> (56 - 8 * i));
    rej.reject_info_length = 8;
  }
  copy_private(rej.private_data, pd);
  stop_timer(c);
  stats.rej_sent++;
  send(c, wire::make_cm_mad(c.tid, rej), 0, Nanos(0));
  return {};
}

void Impl::recv_rej(const wire::CmRej& m) {
  Conn* c = find_conn(m.remote_comm_id);
  if (!c || c->udp || (c->remote_comm_id != 0 && m.local_comm_id != 0 && c->remote_comm_id != m.local_comm_id)) {
    stats.mads_dropped++;
    return;
  }
  bool timewait = m.reason == wire::rej_reason::kStaleConn;
  switch (c->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      break;
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
    case CmState::kEstablished:
      timewait = true;
      break;
    case CmState::kIdle:
    case CmState::kDreqSent:
    case CmState::kDreqRcvd:
    case CmState::kTimewait:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kSidrRepSent:
      stats.mads_dropped++;
      return;
  }
  stop_timer(*c);
  if (Id* id = find_id(c->id)) {
    Event ev;
    ev.type = EventType::kRejected;
    ev.status = m.reason;
    set_private(ev, m.private_data);
    queue_event(*id, ev);
    id->conn = 0;
  }
  c->id = kNoId;
  if (timewait)
    enter_timewait(*c);
  else
    erase_conn(c->local_comm_id);
}

// ---- disconnect ----

std::error_code Impl::send_dreq(Conn& c) {
  if (c.state != CmState::kEstablished) return err(EINVAL);
  wire::CmDreq d;
  d.local_comm_id = c.local_comm_id;
  d.remote_comm_id = c.remote_comm_id;
  d.remote_qpn = wire::Qpn(c.remote_qpn);
  withdraw_will(c);
  c.state = CmState::kDreqSent;
  send(c, wire::make_cm_mad(form_tid(*c.port, c.local_comm_id), d), c.max_cm_retries,
       mad_timeout(*this, c.peer_cm_timeout));
  return {};
}

std::error_code Impl::send_drep(Conn& c) {
  if (c.state != CmState::kDreqRcvd && c.state != CmState::kTimewait) return err(EINVAL);
  wire::CmDrep d;
  d.local_comm_id = c.local_comm_id;
  d.remote_comm_id = c.remote_comm_id;
  send(c, wire::make_cm_mad(c.dreq_tid, d), 0, Nanos(0));
  if (c.state == CmState::kDreqRcvd) enter_timewait(c);
  return {};
}

void Impl::recv_dreq(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h,
                     const wire::CmDreq& m) {
  Conn* c = find_conn(m.remote_comm_id);
  if (!c || c->udp || c->remote_comm_id != m.local_comm_id) {
    // cm_dreq_handler: an unmatched DREQ gets a DREP (the peer may have
    // missed ours and be resending).
    wire::CmDrep d;
    d.local_comm_id = m.remote_comm_id;
    d.remote_comm_id = m.local_comm_id;
    return send_unconnected(p, g.ip.src, 0, wire::make_cm_mad(h.tid, d));
  }
  if (m.remote_qpn.value() != c->local_qpn) {
    stats.mads_dropped++;  // not for our QP (as the kernel: dropped)
    return;
  }
  c->dreq_tid = h.tid;
  Id* id = find_id(c->id);
  switch (c->state) {
    case CmState::kEstablished:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      stop_timer(*c);
      withdraw_will(*c);
      c->state = CmState::kDreqRcvd;
      if (!id) {
        send_drep(*c);  // the id is gone: answer for it
        return;
      }
      id->state = IdState::kDisconnect;
      {
        Event ev;
        ev.type = EventType::kDisconnected;
        queue_event(*id, ev);
      }
      return;
    case CmState::kDreqSent:
      // Crossed DREQs: answer at once; ours is done too.
      stop_timer(*c);
      withdraw_will(*c);
      c->state = CmState::kDreqRcvd;
      send_drep(*c);
      if (id) {
        Event ev;
        ev.type = EventType::kDisconnected;
        queue_event(*id, ev);
      }
      return;
    case CmState::kTimewait:
      stats.duplicates++;
      send_drep(*c);
      return;
    case CmState::kDreqRcvd:
      stats.duplicates++;
      return;
    case CmState::kIdle:
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kSidrRepSent:
      stats.mads_dropped++;
      return;
  }
}

void Impl::recv_drep(const wire::CmDrep& m) {
  Conn* c = find_conn(m.remote_comm_id);
  if (!c || c->remote_comm_id != m.local_comm_id || c->state != CmState::kDreqSent) {
    stats.mads_dropped++;
    return;
  }
  stop_timer(*c);
  if (Id* id = find_id(c->id)) {
    Event ev;
    ev.type = EventType::kDisconnected;
    queue_event(*id, ev);
  }
  enter_timewait(*c);
}

void Impl::enter_timewait(Conn& c) {
  stop_timer(c);
  withdraw_will(c);
  c.state = CmState::kTimewait;
  // cm_enter_timewait: the path's ACK timeout, after which the comm ID and
  // the QP's PSNs can no longer be confused with a new connection's.
  c.timer->arm_at(c.port->dev->transport().now() + iba_time(c.ack_timeout));
}

void Impl::abandon(Conn& c) {
  switch (c.state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
      send_rej(c, wire::rej_reason::kTimeout, {});
      return erase_conn(c.local_comm_id);
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      send_rej(c, wire::rej_reason::kConsumerReject, {});
      return erase_conn(c.local_comm_id);
    case CmState::kEstablished:
      send_dreq(c);
      return;
    case CmState::kDreqRcvd:
      send_drep(c);
      return;
    case CmState::kDreqSent:
    case CmState::kTimewait:
      return;
    case CmState::kIdle:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kSidrRepSent:
      return erase_conn(c.local_comm_id);
  }
}

// ---- failures ----

void Impl::conn_timeout(Conn& c) {
  Id* id = find_id(c.id);
  Event ev;
  ev.status = -ETIMEDOUT;
  switch (c.state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kSidrReqSent:
      ev.type = EventType::kUnreachable;
      if (id) queue_event(*id, ev);
      return erase_conn(c.local_comm_id);
    case CmState::kDreqSent:
      ev.type = EventType::kDisconnected;
      if (id) queue_event(*id, ev);
      return enter_timewait(c);
    case CmState::kIdle:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
    case CmState::kEstablished:
    case CmState::kDreqRcvd:
    case CmState::kTimewait:
    case CmState::kSidrReqRcvd:
    case CmState::kSidrRepSent:
      return;
  }
}

void Impl::peer_unreachable(DevicePort& p, const wire::IpAddr& peer) {
  std::vector<uint32_t> hit;
  for (const auto& [comm, c] : conns)
    if (c->port == &p && c->peer == peer && c->timer->armed() && c->state != CmState::kTimewait)
      hit.push_back(comm);
  for (uint32_t comm : hit) {
    Conn* c = find_conn(comm);
    if (!c) continue;
    c->retries_left = 0;  // nothing listens there any more: no point resending
    conn_timeout(*c);
  }
}

}  // namespace rocelab::cm
