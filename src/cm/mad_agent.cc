// The MAD agent of each device's QP 1: parses what arrives and hands it to
// the state machines (ib_cm.cc, sidr.cc); forms comm IDs and TIDs as the
// kernel does; sends MADs, keeps the last one of each connection, and resends
// it when its timer runs out (the CM timeouts, max_cm_retries).
#include "cm/impl.h"
#include "wire/cma_hdr.h"
#include "wire/frame.h"

namespace rocelab::cm {

std::string_view to_string(CmState s) {
  switch (s) {
    case CmState::kIdle: return "IDLE";
    case CmState::kReqSent: return "REQ_SENT";
    case CmState::kMraReqRcvd: return "MRA_REQ_RCVD";
    case CmState::kReqRcvd: return "REQ_RCVD";
    case CmState::kMraReqSent: return "MRA_REQ_SENT";
    case CmState::kRepSent: return "REP_SENT";
    case CmState::kMraRepRcvd: return "MRA_REP_RCVD";
    case CmState::kRepRcvd: return "REP_RCVD";
    case CmState::kMraRepSent: return "MRA_REP_SENT";
    case CmState::kEstablished: return "ESTABLISHED";
    case CmState::kDreqSent: return "DREQ_SENT";
    case CmState::kDreqRcvd: return "DREQ_RCVD";
    case CmState::kTimewait: return "TIMEWAIT";
    case CmState::kSidrReqSent: return "SIDR_REQ_SENT";
    case CmState::kSidrReqRcvd: return "SIDR_REQ_RCVD";
    case CmState::kSidrRepSent: return "SIDR_REP_SENT";
  }
  return "?";
}

// The kernel draws a comm ID with xa_alloc_cyclic and XORs a random operand
// into it; 0 is never used (a REJ to an unknown REQ carries 0). On a device
// whose address other processes share (emu::DeviceConfig::qpn_block), the top
// byte is its block, as in its QPNs: the peer's answers name the ID, and the
// address's socket group is steered by its top byte (src/host).
uint32_t Impl::new_comm_id(const DevicePort& p) {
  const int block = p.dev->qpn_block();
  for (;;) {
    uint32_t id = next_comm++ ^ comm_operand;
    if (block >= 0) id = (uint32_t(block) << 24) | (id & 0xFFFFFF);
    if (id != 0 && !conns.count(id)) return id;
  }
}

// cm_form_tid: the agent's hi_tid above the local comm ID, whose network-order
// bytes are read as a little-endian integer (comm 0xac6608b9 -> 0x...b90866ac).
uint64_t Impl::form_tid(const DevicePort& p, uint32_t local_comm_id) const {
  return (uint64_t{p.hi_tid} << 32) | __builtin_bswap32(local_comm_id);
}

Conn& Impl::new_conn(DevicePort& p) {
  auto c = std::make_unique<Conn>();
  c->port = &p;
  c->local_comm_id = new_comm_id(p);
  c->max_cm_retries = cfg.max_cm_retries;
  const uint32_t comm = c->local_comm_id;
  c->timer = p.dev->transport().make_timer([this, comm] {
    std::lock_guard lk(mu);
    on_timer(comm);
  });
  Conn& r = *c;
  conns.emplace(comm, std::move(c));
  return r;
}

Conn* Impl::find_conn(uint32_t local_comm_id) {
  auto it = conns.find(local_comm_id);
  return it == conns.end() ? nullptr : it->second.get();
}

void Impl::write_will(Conn& c) {
  if (!cfg.farewell) return;
  wire::CmDreq d;  // what send_dreq sends
  d.local_comm_id = c.local_comm_id;
  d.remote_comm_id = c.remote_comm_id;
  d.remote_qpn = wire::Qpn(c.remote_qpn);
  MadBuf mad{};
  if (!wire::encode_cm_mad(mad, wire::make_cm_mad(form_tid(*c.port, c.local_comm_id), d))) return;
  std::array<std::byte, wire::kMaxFrameLen> dg;
  auto n = c.port->dev->mad_datagram_locked(c.peer, mad, c.tclass, dg);
  if (!n) return;
  cfg.farewell(c.local_comm_id, std::span<const std::byte>(dg.data(), *n));
  c.will = true;
}

void Impl::withdraw_will(Conn& c) {
  if (!c.will) return;
  c.will = false;
  cfg.farewell(c.local_comm_id, {});
}

void Impl::erase_conn(uint32_t local_comm_id) {
  auto it = conns.find(local_comm_id);
  if (it == conns.end()) return;
  withdraw_will(*it->second);
  if (Id* id = find_id(it->second->id); id && id->conn == local_comm_id) id->conn = 0;
  conns.erase(it);  // its timer too (safe inside its own callback: timer_queue.h)
}

void Impl::send(Conn& c, const wire::CmMad& m, int retries, Nanos timeout) {
  auto n = wire::encode_cm_mad(c.last, m);
  if (!n) {
    stats.mads_dropped++;
    return;
  }
  c.have_last = true;
  c.port->dev->send_mad_locked(c.peer, c.last, c.tclass);
  stats.mads_sent++;
  if (retries > 0) {
    c.retries_left = retries;
    c.timeout = timeout;
    c.timer->arm_at(c.port->dev->transport().now() + timeout);
  }
}

void Impl::resend_last(Conn& c) {
  if (!c.have_last) return;
  c.port->dev->send_mad_locked(c.peer, c.last, c.tclass);
  stats.mads_sent++;
  stats.mads_resent++;
}

void Impl::stop_timer(Conn& c) {
  c.timer->cancel();
  c.retries_left = 0;
}

void Impl::send_unconnected(DevicePort& p, const wire::IpAddr& dst, uint8_t tclass,
                            const wire::CmMad& m) {
  MadBuf buf{};
  if (!wire::encode_cm_mad(buf, m)) return;
  p.dev->send_mad_locked(dst, buf, tclass);
  stats.mads_sent++;
}

void Impl::on_timer(uint32_t local_comm_id) {
  Conn* c = find_conn(local_comm_id);
  if (!c) return;
  if (c->state == CmState::kTimewait) return erase_conn(local_comm_id);
  if (c->retries_left > 0) {
    --c->retries_left;
    resend_last(*c);
    c->timer->arm_at(c->port->dev->transport().now() + c->timeout);
    return;
  }
  conn_timeout(*c);
}

void DevicePort::on_mad(const emu::GsiMad& g) {
  std::lock_guard lk(impl->mu);
  impl->stats.mads_received++;
  auto parsed = wire::parse_cm_mad(g.mad);
  if (!parsed || parsed->hdr.method != wire::mad_method::kSend) {
    impl->stats.mads_dropped++;  // another class (SA, PerfMgt ...), LAP/APR, garbage
    return;
  }
  const wire::MadHeader& h = parsed->hdr;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::CmReq>) impl->recv_req(*this, g, h, m);
        else if constexpr (std::is_same_v<T, wire::CmMra>) impl->recv_mra(m);
        else if constexpr (std::is_same_v<T, wire::CmRej>) impl->recv_rej(m);
        else if constexpr (std::is_same_v<T, wire::CmRep>) impl->recv_rep(*this, g, h, m);
        else if constexpr (std::is_same_v<T, wire::CmRtu>) impl->recv_rtu(m);
        else if constexpr (std::is_same_v<T, wire::CmDreq>) impl->recv_dreq(*this, g, h, m);
        else if constexpr (std::is_same_v<T, wire::CmDrep>) impl->recv_drep(m);
        else if constexpr (std::is_same_v<T, wire::CmSidrReq>) impl->recv_sidr_req(*this, g, h, m);
        else if constexpr (std::is_same_v<T, wire::CmSidrRep>) impl->recv_sidr_rep(m);
      },
      parsed->msg);
}

void DevicePort::on_unreachable(const wire::IpAddr& peer) {
  std::lock_guard lk(impl->mu);
  impl->peer_unreachable(*this, peer);
}

}  // namespace rocelab::cm
