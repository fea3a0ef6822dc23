// UD multicast: the groups of the device, attach and detach, and the delivery
// of a datagram sent to a group to every QP attached to it (as rxe's
// rxe_rcv_mcast_pkt: each QP in a state to receive, with the datagram's Q_Key,
// gets its own copy; the sending QP too, when it is attached).
#include <algorithm>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {

namespace {

Device::Engine::McastGroup* find_group(Device::Engine& e, const wire::IpAddr& a) {
  for (auto& g : e.mcast)
    if (g.addr == a) return &g;
  return nullptr;
}

}  // namespace

std::error_code Device::attach_mcast(Qp* qpp, const Gid& gid) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_qp(e, qpp)) return errc(EINVAL);
  auto* qp = static_cast<QpImpl*>(qpp);
  const wire::IpAddr group = wire::IpAddr::from_gid(gid);
  // ib_attach_mcast: a multicast GID and a UD QP.
  if (qp->type_ != QpType::kUD || !group.is_multicast()) return errc(EINVAL);
  Engine::McastGroup* g = find_group(e, group);
  if (g && std::find(g->qps.begin(), g->qps.end(), qp) != g->qps.end()) return {};
  if (e.mcast_attached >= static_cast<uint32_t>(e.dattr.max_total_mcast_qp_attach)) return errc(ENOMEM);
  if (!g) {
    if (e.mcast.size() >= static_cast<size_t>(e.dattr.max_mcast_grp)) return errc(ENOMEM);
    if (std::error_code ec = e.transport->join_group(group)) return ec;
    e.mcast.push_back({group, {}});
    g = &e.mcast.back();
  }
  if (g->qps.size() >= static_cast<size_t>(e.dattr.max_mcast_qp_attach)) return errc(ENOMEM);
  g->qps.push_back(qp);
  qp->mcast_groups++;
  e.mcast_attached++;
  return {};
}

std::error_code Device::detach_mcast(Qp* qpp, const Gid& gid) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_qp(e, qpp)) return errc(EINVAL);
  auto* qp = static_cast<QpImpl*>(qpp);
  const wire::IpAddr group = wire::IpAddr::from_gid(gid);
  Engine::McastGroup* g = find_group(e, group);
  if (!g) return errc(EINVAL);
  auto it = std::find(g->qps.begin(), g->qps.end(), qp);
  if (it == g->qps.end()) return errc(EINVAL);
  g->qps.erase(it);
  qp->mcast_groups--;
  e.mcast_attached--;
  if (g->qps.empty()) {
    e.transport->leave_group(group);
    std::erase_if(e.mcast, [&](const Engine::McastGroup& x) { return x.addr == group; });
  }
  return {};
}

void Device::Engine::mcast_receive(const wire::RocePacket& pkt, const Datagram& d) {
  // IBTA 10.5.2.x: a multicast packet names QP 0xFFFFFF, and only UD multicasts.
  if (pkt.hdr.bth.dest_qpn != wire::kMulticastQpn)
    return drop(nullptr, d, "multicast to a unicast QPN", &Counters::rcvd_hdr_err);
  if (pkt.hdr.info().transport != wire::Transport::kUD)
    return drop(nullptr, d, "opcode of another transport", &Counters::rcvd_hdr_err);
  McastGroup* g = find_group(*this, d.ip.dst);
  if (!g) return drop(nullptr, d, "multicast group not joined", &Counters::rcvd_hdr_err);
  counters.rcvd_pkts++;
  for (QpImpl* qp : g->qps) {
    const QpState s = qp->state_;
    if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd && s != QpState::kSqe) {
      drop(qp, d, "QP state", nullptr);  // this QP only: the others of the group may take it
      continue;
    }
    qp->ctr.rcvd_pkts++;
    if (logging()) log_received(*qp, pkt, d);
    resp_on_request(*qp, pkt, d);  // UD: the Q_Key check, a receive WQE, the copy
  }
}

}  // namespace rocelab::emu
