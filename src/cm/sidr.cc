// Service ID Resolution (IBTA 12.11; the kernel's cm.c SIDR part), which
// rdma_cm uses for RDMA_PS_UDP: one SIDR_REQ / SIDR_REP exchange tells the
// active side the passive side's QPN and Q_Key. Device lock and Impl::mu held.
#include <algorithm>
#include <cerrno>

#include "cm/impl.h"
#include "wire/cma_hdr.h"

namespace rocelab::cm {
namespace {

std::error_code err(int e) { return {e, std::generic_category()}; }

emu::AhAttr ah_towards(const wire::IpAddr& peer, uint8_t hop_limit, uint8_t tclass) {
  emu::AhAttr a;
  a.is_global = true;
  a.dgid = peer.gid();
  a.sgid_index = 0;
  a.hop_limit = hop_limit;
  a.traffic_class = tclass;
  a.port_num = 1;
  return a;
}

}  // namespace

std::error_code Impl::send_sidr_req(Id& id, const ConnParam& p) {
  if (p.private_data.size() > kSidrReqPrivate - wire::kCmaHdrLen) return err(EINVAL);
  DevicePort& port = *id.port;
  Conn& c = new_conn(port);
  c.id = id.h;
  c.active = true;
  c.udp = true;
  c.tid = form_tid(port, c.local_comm_id);
  c.peer = id.dst.ip;
  c.tclass = id.opt.tos;
  c.service_id = wire::rdma_cm_service_id(static_cast<uint16_t>(id.ps), id.dst.port);
  c.qp_type = emu::QpType::kUD;
  c.local_qpn = p.qp_num & 0xFFFFFF;
  c.peer_cm_timeout = cfg.cm_response_timeout;
  wire::CmSidrReq r;
  r.request_id = c.local_comm_id;
  r.pkey = 0xFFFF;
  r.service_id = c.service_id;
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
  c.state = CmState::kSidrReqSent;
  id.conn = c.local_comm_id;
  send(c, wire::make_cm_mad(c.tid, r), cfg.max_cm_retries,
       iba_time(c.peer_cm_timeout) + 2 * iba_time(cfg.packet_life_time));
  return {};
}

void Impl::recv_sidr_req(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h,
                         const wire::CmSidrReq& r) {
  // A repeated SIDR_REQ (our SIDR_REP was lost, or the application is slow):
  // the same answer again, or nothing while the application decides.
  for (auto& [comm, cp] : conns) {
    Conn& c = *cp;
    if (c.active || !c.udp || c.remote_comm_id != r.request_id || !(c.peer == g.ip.src)) continue;
    stats.duplicates++;
    if (c.state == CmState::kSidrRepSent) resend_last(c);
    return;
  }
  auto refuse = [&](uint8_t status) {
    wire::CmSidrRep rep;
    rep.request_id = r.request_id;
    rep.status = status;
    rep.service_id = r.service_id;
    send_unconnected(p, g.ip.src, 0, wire::make_cm_mad(h.tid, rep));
  };
  const auto svc = wire::parse_rdma_cm_service_id(r.service_id);
  auto hdr = wire::parse_cma_hdr(std::as_bytes(std::span(r.private_data)));
  if (!svc || !hdr) return refuse(wire::sidr_status::kServiceIdNotSupported);
  const auto ps = static_cast<PortSpace>(svc->port_space);
  Id* l = find_listener(ps, svc->port, p, hdr->dst);
  if (!l) return refuse(wire::sidr_status::kServiceIdNotSupported);
  if (l->qp_type != emu::QpType::kUD || l->pending >= l->backlog)
    return refuse(wire::sidr_status::kRejected);

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
  c.udp = true;
  c.state = CmState::kSidrReqRcvd;
  c.remote_comm_id = r.request_id;
  c.tid = h.tid;
  c.peer = g.ip.src;
  c.tclass = g.ip.tclass;
  c.service_id = r.service_id;
  c.qp_type = emu::QpType::kUD;
  n.conn = c.local_comm_id;

  Event ev;
  ev.type = EventType::kConnectRequest;
  ev.listen_id = lh;
  ev.ud.ah_attr = ah_towards(hdr->src, 64, c.tclass);
  set_private(ev, r.private_data, wire::kCmaHdrLen);
  queue_event(n, ev);
}

std::error_code Impl::send_sidr_rep(Id& id, Conn& c, uint8_t status, uint32_t qpn,
                                    std::span<const uint8_t> pd) {
  if (c.state != CmState::kSidrReqRcvd) return err(EINVAL);
  if (pd.size() > kSidrRepPrivate) return err(EINVAL);
  wire::CmSidrRep rep;
  rep.request_id = c.remote_comm_id;
  rep.status = status;
  rep.service_id = c.service_id;
  if (status == wire::sidr_status::kValid) {
    rep.qpn = wire::Qpn(qpn & 0xFFFFFF);
    rep.qkey = kRdmaUdpQkey;
    c.local_qpn = qpn & 0xFFFFFF;
    c.qkey = kRdmaUdpQkey;
  }
  copy_private(rep.private_data, pd);
  c.state = CmState::kSidrRepSent;
  id.state = status == wire::sidr_status::kValid ? IdState::kEstablished : IdState::kIdle;
  send(c, wire::make_cm_mad(c.tid, rep), 0, Nanos(0));
  return {};
}

void Impl::recv_sidr_rep(const wire::CmSidrRep& m) {
  Conn* c = find_conn(m.request_id);
  if (!c || !c->udp || !c->active || c->state != CmState::kSidrReqSent) {
    stats.mads_dropped++;
    return;
  }
  stop_timer(*c);
  if (Id* id = find_id(c->id)) {
    Event ev;
    set_private(ev, m.private_data);
    if (m.status != wire::sidr_status::kValid) {
      // cma_sidr_rep_handler: UNREACHABLE with the SIDR status.
      ev.type = EventType::kUnreachable;
      ev.status = m.status;
    } else {
      ev.type = EventType::kEstablished;
      ev.ud.ah_attr = ah_towards(c->peer, 64, c->tclass);
      ev.ud.qp_num = m.qpn.value();
      ev.ud.qkey = m.qkey;
      id->state = IdState::kEstablished;
    }
    queue_event(*id, ev);
  }
  erase_conn(c->local_comm_id);
}

}  // namespace rocelab::cm
