// Thread domains and parent domains (man ibv_alloc_td, ibv_alloc_parent_domain).
// A thread domain promises that the objects of its parent domains are used by
// one thread at a time: a hint a NIC's provider uses to drop locks; the
// engine keeps its one device lock either way. A parent domain is a PD (its
// `pd` of the init attributes) plus that thread domain and the program's
// buffer allocators: QPs, CQs (IBV_CQ_INIT_ATTR_MASK_PD), SRQs, MRs, MWs and
// AHs made with it are made on its PD. The allocators are kept and not
// called: the emulated device has no queue buffers in the program's memory
// (a provider uses them only for such buffers).
#include <cerrno>
#include <new>

#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim::emulated {

ibv_td* alloc_td(ibv_context* ctx, ibv_td_init_attr* attr) noexcept {
  if (!attr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new (std::nothrow) ShimTd{};
  if (!t) {
    errno = ENOMEM;
    return nullptr;
  }
  t->td.context = ctx;
  return &t->td;
}

int dealloc_td(ibv_td* td) noexcept {
  if (!td) return EINVAL;
  if (shim(td)->parents > 0) return EBUSY;
  delete shim(td);
  return 0;
}

bool is_parent_domain(ibv_pd* pd) noexcept { return pd && shim(pd)->protection != nullptr; }

ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) noexcept {
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  // Its PD: an ordinary PD of this context (a parent domain of a parent
  // domain is refused, as by mlx5); its thread domain, if any, of this context.
  if (!attr || (attr->comp_mask & ~kKnown) || !attr->pd || attr->pd->context != ctx ||
      is_parent_domain(attr->pd) || (attr->td && attr->td->context != ctx) ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!attr->alloc || !attr->free))) {
    errno = EINVAL;
    return nullptr;
  }
  auto* p = new (std::nothrow) ShimPd{};
  if (!p) {
    errno = ENOMEM;
    return nullptr;
  }
  ShimPd* protection = shim(attr->pd);
  p->e = protection->e;
  p->protection = protection;
  p->td = attr->td ? shim(attr->td) : nullptr;
  p->attr = *attr;
  p->pd.context = ctx;
  p->pd.handle = attr->pd->handle;
  ++protection->parents;
  if (p->td) ++p->td->parents;
  return &p->pd;
}

int dealloc_parent_domain(ibv_pd* pd) noexcept {
  ShimPd* p = shim(pd);
  --p->protection->parents;
  if (p->td) --p->td->parents;
  delete p;
  return 0;
}

}  // namespace rocelab::verbs_shim::emulated
