// Queue pairs: creation, destruction and the accessors of the public Qp.
// Posting is in post.cc, completions in completion.cc, SGE walking in sge.cc,
// the state machine in qp_state.cc.
#include <algorithm>
#include <cerrno>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

constexpr uint32_t kMaxInline = 1024;

bool type_valid(QpType t) {
  return t == QpType::kRC || t == QpType::kUC || t == QpType::kUD || t == QpType::kXrcIni || t == QpType::kXrcTgt;
}

// Which objects a QP type takes (IBTA XRC annex; rdma-core ibv_create_qp_ex):
// an XRC initiator has a PD and a send queue only; an XRC target has an XRC
// domain and nothing else (its messages land in the domain's XRC SRQs).
std::error_code check_objects(const Engine& e, Pd* pd, const QpInitAttr& a) {
  switch (a.qp_type) {
    case QpType::kXrcTgt:
      if (!a.xrcd || !device_owns_xrcd(e, a.xrcd)) return errc(EINVAL);
      return {};
    case QpType::kXrcIni:
      if (!device_owns_pd(e, pd) || !a.send_cq || !device_owns_cq(e, a.send_cq) || a.srq) return errc(EINVAL);
      return {};
    case QpType::kRC:
    case QpType::kUC:
    case QpType::kUD:
      break;
  }
  if (!device_owns_pd(e, pd)) return errc(EINVAL);
  if (!a.send_cq || !a.recv_cq || !device_owns_cq(e, a.send_cq) || !device_owns_cq(e, a.recv_cq))
    return errc(EINVAL);
  if (a.srq && !device_owns_srq(e, a.srq)) return errc(EINVAL);
  return {};
}

}  // namespace

wire::IpUdpInfo QpImpl::ip_to(const wire::IpAddr& to) const {
  wire::IpUdpInfo ip;
  ip.src = eng->transport->local_address();
  ip.dst = to;
  ip.sport = sport;
  ip.dport = wire::kRoceV2Port;
  ip.ip_id = 0;  // what the kernel sends for DF packets from an unconnected socket
  ip.df = true;
  // RoCEv2: the GRH's traffic class is the IP TOS / traffic class (DSCP and
  // ECN), as rxe sends it; UD takes its address vector per work request.
  if (type_ != QpType::kUD) ip.tclass = attr.ah_attr.traffic_class;
  // Congestion control on: ECN-capable, ECT(0), unless the AV chose an ECN codepoint.
  if (eng->cfg.cc != cc::Algorithm::kNone && (ip.tclass & 3) == 0) ip.tclass |= 2;
  return ip;
}


Result<Qp*> Device::create_qp(Pd* pd, const QpInitAttr& a) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!type_valid(a.qp_type)) return errc(EINVAL);
  if (std::error_code ec = check_objects(e, pd, a)) return ec;
  const bool tgt = a.qp_type == QpType::kXrcTgt, ini = a.qp_type == QpType::kXrcIni;
  QpCap c = a.cap;
  if (tgt) c = QpCap{};  // no queues of its own (rdma-core ignores the caps)
  if (ini) c.max_recv_wr = c.max_recv_sge = 0;
  const auto max_wr = static_cast<uint32_t>(e.dattr.max_qp_wr);
  const auto max_sge = static_cast<uint32_t>(e.dattr.max_sge);
  if (c.max_send_wr > max_wr || c.max_recv_wr > max_wr || c.max_send_sge > max_sge ||
      c.max_recv_sge > max_sge || c.max_inline_data > kMaxInline)
    return errc(EINVAL);
  if (e.qps.size() >= static_cast<size_t>(e.dattr.max_qp)) return errc(ENOMEM);

  auto qp = std::make_unique<QpImpl>();
  QpImpl& q = *qp;
  q.eng = &e;
  q.pd = tgt ? nullptr : static_cast<PdImpl*>(pd);
  q.scq = tgt ? nullptr : static_cast<CqImpl*>(a.send_cq);
  q.rcq = tgt || ini ? nullptr : static_cast<CqImpl*>(a.recv_cq);
  q.srq_ = tgt || ini ? nullptr : static_cast<SrqImpl*>(a.srq);
  q.xrcd = tgt ? static_cast<XrcdImpl*>(a.xrcd) : nullptr;
  q.type_ = a.qp_type;
  q.sq_sig_all = a.sq_sig_all;
  q.cap_.max_send_wr = std::max<uint32_t>(c.max_send_wr, 1);
  q.cap_.max_send_sge = std::max<uint32_t>(c.max_send_sge, 1);
  const bool has_rq = !q.srq_ && !tgt && !ini;
  q.cap_.max_recv_wr = has_rq ? std::max<uint32_t>(c.max_recv_wr, 1) : 0;
  q.cap_.max_recv_sge = has_rq ? std::max<uint32_t>(c.max_recv_sge, 1) : 0;
  if (tgt) q.cap_.max_send_wr = q.cap_.max_send_sge = 0;
  q.cap_.max_inline_data = c.max_inline_data;
  for (size_t tries = 0; e.qp_by_num.count(e.next_qpn) || e.next_qpn < 2; ++tries) {
    if (tries > 0xFFFFFF) return std::make_error_code(std::errc::not_enough_memory);
    e.next_qpn = e.qpn_after(e.next_qpn);
  }
  q.qpn = e.next_qpn;
  e.next_qpn = e.qpn_after(e.next_qpn);
  // The UDP source port, reserved before any packet is built (the ICRC covers it).
  auto sport = e.transport->reserve_source_port(preferred_source_port(q.qpn));
  if (!sport) return sport.error();
  q.sport = *sport;

  q.sq.resize(std::max<uint32_t>(q.cap_.max_send_wr, 1));  // an XRC target posts nothing; never empty
  q.sq_segs.resize(q.sq.size() * q.cap_.max_send_sge);
  q.sq_inline.resize(q.sq.size() * q.cap_.max_inline_data);
  for (size_t i = 0; i < q.sq.size(); ++i) {
    q.sq[i].segs = q.sq_segs.data() + i * q.cap_.max_send_sge;
    q.sq[i].inline_buf = q.sq_inline.data() + i * q.cap_.max_inline_data;
  }
  if (has_rq) q.rq.init(q.cap_.max_recv_wr, q.cap_.max_recv_sge);
  // An XRC target takes WQEs from any XRC SRQ of its domain: room for the most SGEs one may have.
  const uint32_t srq_sge = tgt ? static_cast<uint32_t>(e.dattr.max_srq_sge) : q.srq_ ? q.srq_->rq.max_sge() : 0;
  q.resp.wqe.sge.resize(std::max<uint32_t>({q.cap_.max_recv_sge, srq_sge, 1}));
  q.resp.res.resize(1);
  QpImpl* raw = &q;
  q.comp.retrans_timer = e.transport->make_timer([raw] { comp_on_retrans_timer(*raw); });
  q.comp.rnr_timer = e.transport->make_timer([raw] { comp_on_rnr_timer(*raw); });
  cc_init(q);
  q.attr.qp_state = QpState::kReset;
  q.attr.cap = q.cap_;
  q.attr.port_num = kPortNum;
  q.attr.path_mtu = e.pattr.active_mtu;

  if (q.pd) q.pd->users++;
  if (q.scq) q.scq->users++;
  if (q.rcq) q.rcq->users++;
  if (q.srq_) q.srq_->users++;
  if (q.xrcd) q.xrcd->users++;
  e.qp_by_num[q.qpn] = raw;
  e.qps.push_back(std::move(qp));
  return static_cast<Qp*>(raw);
}

std::error_code Device::destroy_qp(Qp* qpp) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_qp(e, qpp)) return errc(EINVAL);
  auto* qp = static_cast<QpImpl*>(qpp);
  // An XRC target QP goes with its last handle (ibv_open_qp adds handles).
  // uverbs: a QP still attached to a multicast group cannot be destroyed.
  if (qp->mcast_groups != 0) return errc(EBUSY);
  if (qp->type_ == QpType::kXrcTgt && --qp->handles > 0) return {};
  // An ACK held for a reply that will not come leaves now: the program has
  // its completion, and the peer must have its ACK.
  resp_flush_ack(*qp);
  e.tx_flush();
  // Type 2 windows bound to it go back to free (rxe drops them with the QP).
  for (auto& w : e.mws)
    if (w->qp == qp) invalidate_rkey(*qp, w->key);
  e.qp_by_num.erase(qp->qpn);
  e.forget_async(static_cast<Qp*>(qp));
  if (qp->pd) qp->pd->users--;
  if (qp->scq) qp->scq->users--;
  if (qp->rcq) qp->rcq->users--;
  if (qp->srq_) qp->srq_->users--;
  if (qp->xrcd) qp->xrcd->users--;
  std::erase(e.ack_list, qp);
  e.inflight_psns -= qp->req.counted;
  if (qp->req.starved) std::erase(e.starved, qp);
  for (auto it = e.qps.begin(); it != e.qps.end(); ++it) {
    if (it->get() == qp) {
      e.qps.erase(it);
      break;
    }
  }
  return {};
}

uint32_t Qp::qp_num() const { return static_cast<const QpImpl*>(this)->qpn; }
QpType Qp::type() const { return static_cast<const QpImpl*>(this)->type_; }
QpState Qp::state() const {
  auto* q = static_cast<const QpImpl*>(this);
  std::lock_guard lk(q->eng->mu);
  return q->state_;
}
const QpCap& Qp::cap() const { return static_cast<const QpImpl*>(this)->cap_; }
Pd* Qp::pd() const { return static_cast<const QpImpl*>(this)->pd; }
Cq* Qp::send_cq() const { return static_cast<const QpImpl*>(this)->scq; }
Cq* Qp::recv_cq() const { return static_cast<const QpImpl*>(this)->rcq; }
Srq* Qp::srq() const { return static_cast<const QpImpl*>(this)->srq_; }

Counters Qp::counters() const {
  auto* q = static_cast<const QpImpl*>(this);
  std::lock_guard lk(q->eng->mu);
  return q->ctr;
}

std::error_code Qp::query(QpAttr* attr, QpInitAttr* init) const {
  auto* q = static_cast<const QpImpl*>(this);
  std::lock_guard lk(q->eng->mu);
  if (attr) {
    *attr = q->attr;
    attr->qp_state = attr->cur_qp_state = q->state_;
    attr->cap = q->cap_;
    attr->sq_draining = q->state_ == QpState::kSqd && q->sq_head != q->req.cur;
  }
  if (init) {
    init->send_cq = q->scq;
    init->recv_cq = q->rcq;
    init->srq = q->srq_;
    init->cap = q->cap_;
    init->qp_type = q->type_;
    init->xrcd = q->xrcd;
    init->sq_sig_all = q->sq_sig_all;
  }
  return {};
}

}  // namespace rocelab::emu
