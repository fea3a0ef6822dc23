// Memory regions: registration, keys and access checks (IBTA 10.6).
#include <cerrno>

#include "emu/engine.h"

namespace rocelab::emu {

Result<Mr*> Device::reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_pd(e, pd)) return errc(EINVAL);
  if (!addr && length > 0) return errc(EINVAL);
  if (access & ~(access::kKnownMr | access::kOptionalRange)) return errc(EINVAL);
  access &= ~access::kOptionalRange | access::kRelaxedOrdering;
  // IBTA 10.6.3.1: remote write or atomic access requires local write access.
  if ((access & (access::kRemoteWrite | access::kRemoteAtomic)) && !(access & access::kLocalWrite))
    return errc(EINVAL);
  if (length > 0 && iova + (length - 1) < iova) return errc(EINVAL);  // wraps the iova space
  if (e.mrs.size() >= static_cast<size_t>(e.dattr.max_mr)) return errc(ENOMEM);
  auto mr = std::make_unique<MrImpl>();
  mr->eng = &e;
  mr->pd = static_cast<PdImpl*>(pd);
  mr->addr = static_cast<std::byte*>(addr);
  mr->length = length;
  mr->iova = iova;
  mr->access = access;
  // index in the upper 24 bits, a varying key byte below (as rxe: index << 8 | key)
  const uint32_t idx = e.next_mr_index++ & 0xFFFFFF;
  mr->key = (idx << 8) | ((idx * 151u + 0x3C) & 0xFF);
  mr->pd->users++;
  e.mr_by_key[mr->key] = mr.get();
  Mr* r = mr.get();
  e.mrs.push_back(std::move(mr));
  return r;
}

std::error_code Device::dereg_mr(Mr* m) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_mr(e, m)) return errc(EINVAL);
  auto* mr = static_cast<MrImpl*>(m);
  if (mr->bound_mws > 0) return errc(EBUSY);  // ibv_dereg_mr(3): windows still bound to it
  e.mr_by_key.erase(mr->key);
  mr->pd->users--;
  // A WRITE in progress into this MR (FIRST seen, MIDDLE/LAST to come) must
  // not continue into memory that is no longer registered: its next packet
  // finds no MR and is a remote access error (responder.cc, "MR gone").
  for (const auto& qp : e.qps) {
    if (qp->resp.mr == mr) qp->resp.mr = nullptr;
  }
  for (auto it = e.mrs.begin(); it != e.mrs.end(); ++it) {
    if (it->get() == mr) {
      e.mrs.erase(it);
      break;
    }
  }
  return {};
}

uint32_t Mr::lkey() const { return static_cast<const MrImpl*>(this)->key; }
uint32_t Mr::rkey() const { return static_cast<const MrImpl*>(this)->key; }
void* Mr::addr() const { return static_cast<const MrImpl*>(this)->addr; }
uint64_t Mr::length() const { return static_cast<const MrImpl*>(this)->length; }
uint64_t Mr::iova() const { return static_cast<const MrImpl*>(this)->iova; }
unsigned Mr::access() const { return static_cast<const MrImpl*>(this)->access; }
Pd* Mr::pd() const { return static_cast<const MrImpl*>(this)->pd; }

}  // namespace rocelab::emu
