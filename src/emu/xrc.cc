// XRC (IBTA XRC annex, rdma-core's ibv_open_xrcd / ibv_open_qp): XRC domains,
// handles on target QPs, and the target's choice of SRQ for a request (the
// XRCETH names it). XRC SRQs are made in srq.cc, XRC QPs in qp.cc.
#include <cerrno>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {

Result<Xrcd*> Device::open_xrcd(uint64_t file_key, bool create, bool exclusive) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (file_key != 0) {
    for (auto& x : e.xrcds) {
      if (x->file_key != file_key) continue;
      if (exclusive) return errc(EINVAL);  // as uverbs: O_EXCL on an existing domain
      x->opens++;
      return static_cast<Xrcd*>(x.get());
    }
    if (!create) return errc(EAGAIN);  // as uverbs: no domain for that file, and no O_CREAT
  }
  auto x = std::make_unique<XrcdImpl>();
  x->eng = &e;
  x->file_key = file_key;
  x->opens = 1;
  Xrcd* r = x.get();
  e.xrcds.push_back(std::move(x));
  return r;
}

std::error_code Device::close_xrcd(Xrcd* xp) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_xrcd(e, xp)) return errc(EINVAL);
  auto* x = static_cast<XrcdImpl*>(xp);
  if (x->opens == 1 && x->users > 0) return errc(EBUSY);
  if (--x->opens > 0) return {};
  std::erase_if(e.xrcds, [&](const std::unique_ptr<XrcdImpl>& p) { return p.get() == x; });
  return {};
}

Result<Qp*> Device::open_qp(Xrcd* xp, uint32_t qpn) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_xrcd(e, xp)) return errc(EINVAL);
  QpImpl* q = e.find_qp(qpn);
  if (!q || q->type_ != QpType::kXrcTgt || q->xrcd != xp) return errc(EINVAL);
  q->handles++;
  return static_cast<Qp*>(q);
}

Xrcd* Qp::xrcd() const { return static_cast<const QpImpl*>(this)->xrcd; }

SrqImpl* xrc_srq_for(QpImpl& qp, uint32_t srqn, std::string_view* why) {
  SrqImpl* srq = qp.eng->find_srq(srqn);
  if (!srq || srq->type_ != SrqType::kXrc) {
    *why = "XRCETH names no XRC SRQ";
    return nullptr;
  }
  if (srq->xrcd != qp.xrcd) {
    *why = "XRCETH names an XRC SRQ of another XRC domain";
    return nullptr;
  }
  return srq;
}

}  // namespace rocelab::emu
