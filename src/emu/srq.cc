// Receive queues: the ring shared by a QP's RQ and an SRQ; the SRQ object and
// its limit event (IBTA 10.2.9.5).
#include <cerrno>

#include "emu/engine.h"
#include "emu/qp_impl.h"

namespace rocelab::emu {

void RecvQueue::init(uint32_t max_wr, uint32_t max_sge) {
  ring_.assign(max_wr, RecvWqe{});
  for (RecvWqe& w : ring_) w.sge.resize(max_sge);
  max_sge_ = max_sge;
  head_ = tail_ = 0;
}

std::error_code RecvQueue::push(const RecvWr& wr) {
  if (wr.sg_list.size() > max_sge_) return errc(EINVAL);
  if (full()) return errc(ENOMEM);
  RecvWqe& w = ring_[tail_ % ring_.size()];
  w.wr_id = wr.wr_id;
  w.num_sge = static_cast<uint32_t>(wr.sg_list.size());
  for (uint32_t i = 0; i < w.num_sge; ++i) w.sge[i] = wr.sg_list[i];
  ++tail_;
  return {};
}

namespace {

// Device lock held: a new SRQ (basic, or XRC when xrcd is set) after the checks.
Result<Srq*> make_srq(Engine& e, Pd* pd, Xrcd* xrcd, Cq* cq, const SrqAttr& attr) {
  if (!device_owns_pd(e, pd)) return errc(EINVAL);
  if (xrcd && (!device_owns_xrcd(e, xrcd) || !cq || !device_owns_cq(e, cq))) return errc(EINVAL);
  if (attr.max_wr < 1 || attr.max_wr > static_cast<uint32_t>(e.dattr.max_srq_wr) ||
      attr.max_sge > static_cast<uint32_t>(e.dattr.max_srq_sge) || attr.srq_limit > attr.max_wr)
    return errc(EINVAL);
  if (e.srqs.size() >= static_cast<size_t>(e.dattr.max_srq)) return errc(ENOMEM);
  auto srq = std::make_unique<SrqImpl>();
  srq->eng = &e;
  srq->pd = static_cast<PdImpl*>(pd);
  srq->rq.init(attr.max_wr, std::max<uint32_t>(attr.max_sge, 1));
  srq->pd->users++;
  if (xrcd) {
    srq->type_ = SrqType::kXrc;
    srq->xrcd = static_cast<XrcdImpl*>(xrcd);
    srq->cq = static_cast<CqImpl*>(cq);
    srq->xrcd->users++;
    srq->cq->users++;
  }
  while (e.srq_by_num.count(e.next_srq_num) || e.next_srq_num == 0)
    e.next_srq_num = (e.next_srq_num + 1) & 0xFFFFFF;
  srq->num = e.next_srq_num;
  e.next_srq_num = (e.next_srq_num + 1) & 0xFFFFFF;
  e.srq_by_num[srq->num] = srq.get();
  Srq* r = srq.get();
  e.srqs.push_back(std::move(srq));
  return r;
}

}  // namespace

Result<Srq*> Device::create_srq(Pd* pd, const SrqAttr& attr) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  return make_srq(e, pd, nullptr, nullptr, attr);
}

Result<Srq*> Device::create_xrc_srq(Pd* pd, Xrcd* xrcd, Cq* cq, const SrqAttr& attr) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!xrcd) return errc(EINVAL);
  return make_srq(e, pd, xrcd, cq, attr);
}

std::error_code Device::destroy_srq(Srq* s) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_srq(e, s)) return errc(EINVAL);
  auto* srq = static_cast<SrqImpl*>(s);
  if (srq->users > 0) return errc(EBUSY);
  srq->pd->users--;
  if (srq->xrcd) srq->xrcd->users--;
  if (srq->cq) srq->cq->users--;
  e.srq_by_num.erase(srq->num);
  e.forget_async(static_cast<Srq*>(srq));
  // An XRC target QP in the middle of a message to it forgets it.
  for (auto& q : e.qps)
    if (q->resp.xrc_srq == srq) {
      q->resp.xrc_srq = nullptr;
      q->resp.have_wqe = false;
      q->resp.seq = Responder::Seq::kNone;
    }
  for (auto it = e.srqs.begin(); it != e.srqs.end(); ++it) {
    if (it->get() == srq) {
      e.srqs.erase(it);
      break;
    }
  }
  return {};
}

std::error_code Srq::post_recv(std::span<const RecvWr> wrs, size_t* n_posted) {
  auto* srq = static_cast<SrqImpl*>(this);
  std::lock_guard lk(srq->eng->mu);
  size_t n = 0;
  std::error_code ec;
  for (const RecvWr& wr : wrs) {
    if ((ec = srq->rq.push(wr))) break;
    ++n;
  }
  if (n_posted) *n_posted = n;
  return ec;
}

std::error_code Srq::modify(const SrqAttr& attr, uint32_t mask) {
  auto* srq = static_cast<SrqImpl*>(this);
  std::lock_guard lk(srq->eng->mu);
  if (mask & ~(srq_attr::kMaxWr | srq_attr::kLimit)) return errc(EINVAL);
  if (mask & srq_attr::kMaxWr) return errc(EOPNOTSUPP);  // no SRQ resize (not advertised)
  if (mask & srq_attr::kLimit) {
    if (attr.srq_limit > srq->rq.max_wr()) return errc(EINVAL);
    srq->limit = attr.srq_limit;
  }
  return {};
}

uint32_t Srq::srq_num() const { return static_cast<const SrqImpl*>(this)->num; }
SrqType Srq::type() const { return static_cast<const SrqImpl*>(this)->type_; }
Xrcd* Srq::xrcd() const { return static_cast<const SrqImpl*>(this)->xrcd; }
Cq* Srq::cq() const { return static_cast<const SrqImpl*>(this)->cq; }

SrqAttr Srq::query() const {
  auto* srq = static_cast<const SrqImpl*>(this);
  std::lock_guard lk(srq->eng->mu);
  return {srq->rq.max_wr(), srq->rq.max_sge(), srq->limit};
}

// Takes the next receive WQE of an SRQ; raises SRQ_LIMIT_REACHED once when the
// number of posted WQEs falls below the armed limit (IBTA 10.2.9.5, then disarms).
bool srq_take(SrqImpl& srq, RecvWqe* out) {
  if (srq.rq.empty()) return false;
  RecvWqe& w = srq.rq.front();
  out->wr_id = w.wr_id;
  out->num_sge = w.num_sge;
  for (uint32_t i = 0; i < w.num_sge; ++i) out->sge[i] = w.sge[i];
  srq.rq.pop();
  if (srq.limit > 0 && srq.rq.size() < srq.limit) {
    srq.limit = 0;
    AsyncEvent ev;
    ev.event_type = EventType::kSrqLimitReached;
    ev.srq = &srq;
    srq.eng->raise_async(ev);
  }
  return true;
}

}  // namespace rocelab::emu
