// Memory windows (IBTA 10.6.7, rxe_mw.c): allocation, the BIND_MW and
// LOCAL_INV work requests, invalidation by SEND_WITH_INV, and remote access
// through an MR's or a window's R_Key.
#include <algorithm>
#include <cerrno>

#include "emu/engine.h"

namespace rocelab::emu {
namespace {

constexpr unsigned kWindowAccess =
    access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic | access::kZeroBased;

void unbind(MwImpl& w) {
  if (w.mr) w.mr->bound_mws--;
  w.mr = nullptr;
  w.qp = nullptr;
  w.addr = w.length = 0;
  w.access = 0;
}

MwImpl* window_of(const Engine& e, uint32_t rkey) {
  auto it = e.mw_by_index.find(rkey >> 8);
  return it == e.mw_by_index.end() || it->second->key != rkey ? nullptr : it->second;
}

}  // namespace

Result<Mw*> Device::alloc_mw(Pd* pd, MwType type) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_pd(e, pd) || (type != MwType::kType1 && type != MwType::kType2)) return errc(EINVAL);
  if (e.mws.size() >= static_cast<size_t>(e.dattr.max_mw)) return errc(ENOMEM);
  auto w = std::make_unique<MwImpl>();
  w->eng = &e;
  w->pd = static_cast<PdImpl*>(pd);
  w->type = type;
  // rxe: a type 1 window is valid (and bound to nothing) from allocation, a type 2 one free.
  w->state = type == MwType::kType1 ? MwImpl::State::kValid : MwImpl::State::kFree;
  const uint32_t idx = e.next_mr_index++ & 0xFFFFFF;  // one index space with MRs: keys never collide
  w->key = (idx << 8) | ((idx * 151u + 0x3C) & 0xFF);
  w->pd->users++;
  e.mw_by_index[idx] = w.get();
  Mw* r = w.get();
  e.mws.push_back(std::move(w));
  return r;
}

std::error_code Device::dealloc_mw(Mw* m) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_mw(e, m)) return errc(EINVAL);
  auto* w = static_cast<MwImpl*>(m);
  unbind(*w);
  e.mw_by_index.erase(w->key >> 8);
  w->pd->users--;
  std::erase_if(e.mws, [w](const auto& p) { return p.get() == w; });
  return {};
}

uint32_t Mw::rkey() const {
  auto* w = static_cast<const MwImpl*>(this);
  std::lock_guard lk(w->eng->mu);
  return w->key;
}
MwType Mw::type() const { return static_cast<const MwImpl*>(this)->type; }
Pd* Mw::pd() const { return static_cast<const MwImpl*>(this)->pd; }

// rxe_check_bind_mw, plus the PD checks of IBTA C10-72: the window, the MR and
// the QP share one PD.
WcStatus exec_bind_mw(QpImpl& qp, const SendWr& wr) {
  Engine& e = *qp.eng;
  const auto& b = wr.bind_mw;
  if (!device_owns_mw(e, b.mw)) return WcStatus::kMwBindErr;
  auto& w = *static_cast<MwImpl*>(b.mw);
  if ((b.rkey >> 8) != (w.key >> 8) || (b.access & ~kWindowAccess) || w.pd != qp.pd) return WcStatus::kMwBindErr;
  MrImpl* mr = nullptr;
  if (b.length > 0) {
    if (!device_owns_mr(e, b.mr)) return WcStatus::kMwBindErr;
    mr = static_cast<MrImpl*>(b.mr);
  }
  if (w.type == MwType::kType1) {
    if (w.state != MwImpl::State::kValid) return WcStatus::kMwBindErr;
    if (b.access & access::kZeroBased) return WcStatus::kMwBindErr;  // o10-36.2.2
  } else {
    if (w.state != MwImpl::State::kFree) return WcStatus::kMwBindErr;  // o10-37.2.30
    if (!mr) return WcStatus::kMwBindErr;                             // o10-37.2.40
  }
  if (mr) {
    if (mr->pd != qp.pd) return WcStatus::kMwBindErr;
    if (mr->access & access::kZeroBased) return WcStatus::kMwBindErr;
    if (!(mr->access & access::kMwBind)) return WcStatus::kMwBindErr;  // C10-73
    if ((b.access & (access::kRemoteWrite | access::kRemoteAtomic)) && !(mr->access & access::kLocalWrite))
      return WcStatus::kMwBindErr;  // C10-74
    if (!mr->at(b.addr, b.length)) return WcStatus::kMwBindErr;  // C10-75
  }
  unbind(w);
  w.key = (w.key & ~0xFFu) | (b.rkey & 0xFF);
  if (mr) {
    w.mr = mr;
    mr->bound_mws++;
    w.addr = b.addr;
    w.length = b.length;
    w.access = b.access;
    if (w.type == MwType::kType2) w.qp = &qp;
  }
  w.state = MwImpl::State::kValid;
  return WcStatus::kSuccess;
}

bool invalidate_rkey(QpImpl& qp, uint32_t rkey) {
  MwImpl* w = window_of(*qp.eng, rkey);
  // o10-37.2.26: type 1 windows cannot be invalidated; only a bound type 2 one of this PD.
  if (!w || w->type != MwType::kType2 || w->state != MwImpl::State::kValid || w->pd != qp.rx_pd()) return false;
  unbind(*w);
  w->state = MwImpl::State::kFree;
  return true;
}

WcStatus exec_local_inv(QpImpl& qp, uint32_t rkey) {
  // rxe: an R_Key that names no window (an MR: no fast registration here) is a QP operation error.
  return invalidate_rkey(qp, rkey) ? WcStatus::kSuccess : WcStatus::kLocQpOpErr;
}

bool resolve_rkey(QpImpl& qp, uint32_t rkey, uint64_t va, uint64_t len, unsigned need, MrImpl** mr,
                  uint64_t* mr_va) {
  *mr = nullptr;
  *mr_va = 0;
  if (len == 0) return true;
  Engine& e = *qp.eng;
  if (MrImpl* m = e.find_mr(rkey)) {
    if (m->pd != qp.rx_pd() || !(m->access & need) || !m->at(va, len)) return false;
    *mr = m;
    *mr_va = va;
    return true;
  }
  // rxe_lookup_mw: the current key, valid, bound, this PD, type 2 bound to this QP, the access.
  MwImpl* w = window_of(e, rkey);
  if (!w || w->state != MwImpl::State::kValid || !w->mr || w->pd != qp.rx_pd() || !(w->access & need) ||
      (w->type == MwType::kType2 && w->qp != &qp))
    return false;
  const uint64_t base = (w->access & access::kZeroBased) ? 0 : w->addr;
  if (va < base || len > w->length || va - base > w->length - len) return false;
  const uint64_t at = w->addr + (va - base);
  if (!w->mr->at(at, len)) return false;
  *mr = w->mr;
  *mr_va = at;
  return true;
}

}  // namespace rocelab::emu
