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

bool type_valid(QpType t) { return t == QpType::kRC || t == QpType::kUC || t == QpType::kUD; }

}  // namespace

wire::IpUdpInfo QpImpl::ip_to(const wire::IpAddr& to) const {
  wire::IpUdpInfo ip;
  ip.src = eng->transport->local_address();
  ip.dst = to;
  ip.sport = sport;
  ip.dport = wire::kRoceV2Port;
  ip.ip_id = 0;  // what the kernel sends for DF packets from an unconnected socket
  ip.df = true;
  return ip;
}


Result<Qp*> Device::create_qp(Pd* pd, const QpInitAttr& a) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_pd(e, pd) || !type_valid(a.qp_type)) return errc(EINVAL);
  if (!a.send_cq || !a.recv_cq || !device_owns_cq(e, a.send_cq) || !device_owns_cq(e, a.recv_cq))
    return errc(EINVAL);
  if (a.srq && !device_owns_srq(e, a.srq)) return errc(EINVAL);
  const QpCap& c = a.cap;
  const auto max_wr = static_cast<uint32_t>(e.dattr.max_qp_wr);
  const auto max_sge = static_cast<uint32_t>(e.dattr.max_sge);
  if (c.max_send_wr > max_wr || c.max_recv_wr > max_wr || c.max_send_sge > max_sge ||
      c.max_recv_sge > max_sge || c.max_inline_data > kMaxInline)
    return errc(EINVAL);
  if (e.qps.size() >= static_cast<size_t>(e.dattr.max_qp)) return errc(ENOMEM);

  auto qp = std::make_unique<QpImpl>();
  QpImpl& q = *qp;
  q.eng = &e;
  q.pd = static_cast<PdImpl*>(pd);
  q.scq = static_cast<CqImpl*>(a.send_cq);
  q.rcq = static_cast<CqImpl*>(a.recv_cq);
  q.srq_ = static_cast<SrqImpl*>(a.srq);
  q.type_ = a.qp_type;
  q.sq_sig_all = a.sq_sig_all;
  q.cap_.max_send_wr = std::max<uint32_t>(c.max_send_wr, 1);
  q.cap_.max_send_sge = std::max<uint32_t>(c.max_send_sge, 1);
  q.cap_.max_recv_wr = q.srq_ ? 0 : std::max<uint32_t>(c.max_recv_wr, 1);
  q.cap_.max_recv_sge = q.srq_ ? 0 : std::max<uint32_t>(c.max_recv_sge, 1);
  q.cap_.max_inline_data = c.max_inline_data;
  while (e.qp_by_num.count(e.next_qpn) || e.next_qpn < 2) e.next_qpn = (e.next_qpn + 1) & 0xFFFFFF;
  q.qpn = e.next_qpn;
  e.next_qpn = (e.next_qpn + 1) & 0xFFFFFF;
  // RoCEv2 UDP source port: 0xC000 | 14 bits of the QPN hash (as rxe's older scheme)
  q.sport = static_cast<uint16_t>(0xC000 | ((q.qpn ^ (q.qpn >> 14) ^ (q.qpn * 2654435761u >> 18)) & 0x3FFF));

  q.sq.resize(q.cap_.max_send_wr);
  for (SendWqe& w : q.sq) {
    w.segs.resize(q.cap_.max_send_sge);
    w.inline_buf.resize(q.cap_.max_inline_data);
  }
  if (!q.srq_) q.rq.init(q.cap_.max_recv_wr, q.cap_.max_recv_sge);
  q.resp.wqe.sge.resize(std::max<uint32_t>({q.cap_.max_recv_sge, q.srq_ ? q.srq_->rq.max_sge() : 0, 1}));
  q.resp.res.resize(1);
  QpImpl* raw = &q;
  q.comp.retrans_timer = e.transport->make_timer([raw] { comp_on_retrans_timer(*raw); });
  q.comp.rnr_timer = e.transport->make_timer([raw] { comp_on_rnr_timer(*raw); });
  q.attr.qp_state = QpState::kReset;
  q.attr.cap = q.cap_;
  q.attr.port_num = kPortNum;
  q.attr.path_mtu = e.pattr.active_mtu;

  q.pd->users++;
  q.scq->users++;
  q.rcq->users++;
  if (q.srq_) q.srq_->users++;
  e.qp_by_num[q.qpn] = raw;
  e.qps.push_back(std::move(qp));
  return static_cast<Qp*>(raw);
}

std::error_code Device::destroy_qp(Qp* qpp) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_qp(e, qpp)) return errc(EINVAL);
  auto* qp = static_cast<QpImpl*>(qpp);
  // Type 2 windows bound to it go back to free (rxe drops them with the QP).
  for (auto& w : e.mws)
    if (w->qp == qp) invalidate_rkey(*qp, w->key);
  e.qp_by_num.erase(qp->qpn);
  qp->pd->users--;
  qp->scq->users--;
  qp->rcq->users--;
  if (qp->srq_) qp->srq_->users--;
  std::erase(e.ack_list, qp);
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
    init->sq_sig_all = q->sq_sig_all;
  }
  return {};
}

}  // namespace rocelab::emu
