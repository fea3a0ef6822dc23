// Device::snapshot: the engine's objects copied out under its lock.
#include "emu/engine.h"

namespace rocelab::emu {
namespace {

uint32_t cqn(const CqImpl* cq) { return cq ? cq->num : 0; }

QpSnapshot snapshot_of(const QpImpl& q) {
  QpSnapshot s;
  s.qpn = q.qpn;
  s.type = q.type_;
  s.state = q.state_;
  s.pd = q.pd ? q.pd->handle : 0;
  s.send_cq = cqn(q.scq);
  s.recv_cq = cqn(q.rcq);
  s.srq = q.srq_ ? q.srq_->num : 0;
  s.path_mtu = q.attr.path_mtu;
  const bool past_init = q.state_ != QpState::kReset && q.state_ != QpState::kInit;
  s.connected = q.type_ != QpType::kUD && past_init;
  if (s.connected) {
    s.peer = q.dst;
    s.dest_qpn = q.attr.dest_qp_num;
  }
  s.sq_psn = q.req.next_psn.value();
  s.unacked_psn = q.reliable() ? q.comp.psn.value() : s.sq_psn;
  s.epsn = q.resp.epsn.value();
  s.retry_cnt = q.attr.retry_cnt;
  s.rnr_retry = q.attr.rnr_retry;
  s.retry_left = q.comp.retry_left;
  s.rnr_retry_left = q.comp.rnr_retry_left;
  s.timeout = q.attr.timeout;
  s.sq_outstanding = static_cast<uint32_t>(q.sq_tail - q.sq_head);
  s.rq_posted = q.srq_ ? 0 : q.rq.size();
  s.max_send_wr = q.cap_.max_send_wr;
  s.max_recv_wr = q.cap_.max_recv_wr;
  s.counters = q.ctr;
  return s;
}

}  // namespace

DeviceSnapshot Device::snapshot() const {
  const Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  DeviceSnapshot s;
  s.name = e.cfg.name;
  s.address = e.transport->local_address();
  s.node_guid = e.dattr.node_guid;
  s.qpn_block = e.cfg.qpn_block;
  s.active_mtu = e.pattr.active_mtu;
  s.pds = static_cast<uint32_t>(e.pds.size());
  s.ahs = static_cast<uint32_t>(e.ahs.size());
  s.mws = static_cast<uint32_t>(e.mws.size());
  s.channels = static_cast<uint32_t>(e.channels.size());
  s.xrcds = static_cast<uint32_t>(e.xrcds.size());
  s.inflight_psns = e.inflight_psns;
  s.counters = e.counters;
  s.qps.reserve(e.qps.size());
  for (const auto& q : e.qps) s.qps.push_back(snapshot_of(*q));
  for (const auto& c : e.cqs) {
    CqSnapshot cs;
    cs.cqn = c->num;
    cs.capacity = static_cast<uint32_t>(c->cap);
    cs.completions = static_cast<uint32_t>(c->count);
    cs.has_channel = c->ch != nullptr;
    cs.armed = c->arm != CqImpl::Arm::kNone;
    cs.overflowed = c->overflowed;
    // QPs, not uses: a QP whose send and receive CQ are this one counts once.
    for (const auto& q : e.qps) cs.qps += (q->scq == c.get() || q->rcq == c.get()) ? 1 : 0;
    s.cqs.push_back(cs);
  }
  for (const auto& m : e.mrs) {
    MrSnapshot ms;
    ms.lkey = m->lkey();
    ms.rkey = m->rkey();
    ms.addr = reinterpret_cast<uint64_t>(m->addr);
    ms.length = m->length;
    ms.iova = m->iova;
    ms.access = m->access;
    ms.pd = m->pd ? m->pd->handle : 0;
    s.mrs.push_back(ms);
  }
  for (const auto& r : e.srqs) {
    SrqSnapshot ss;
    ss.srq_num = r->num;
    ss.xrc = r->type_ == SrqType::kXrc;
    ss.pd = r->pd ? r->pd->handle : 0;
    ss.max_wr = r->rq.max_wr();
    ss.posted = r->rq.size();
    ss.limit = r->limit;
    ss.qps = static_cast<uint32_t>(r->users);
    s.srqs.push_back(ss);
  }
  for (const Engine::McastGroup& g : e.mcast) {
    McastSnapshot ms;
    ms.group = g.addr;
    for (const QpImpl* q : g.qps) ms.qpns.push_back(q->qpn);
    s.mcast.push_back(std::move(ms));
  }
  return s;
}

}  // namespace rocelab::emu
