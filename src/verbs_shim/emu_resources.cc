// Emulated PDs, MRs, AHs and completion channels.
#include <cerrno>
#include <cstring>
#include <new>

#include "verbs_shim/convert.h"
#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim::emulated {

ibv_pd* alloc_pd(ibv_context* ctx) noexcept {
  auto pd = engine_of(ctx).alloc_pd();
  if (!pd) return fail_null<ibv_pd>(pd.error());
  auto* p = new (std::nothrow) ShimPd{};
  if (!p) {
    (void)engine_of(ctx).dealloc_pd(*pd);
    errno = ENOMEM;
    return nullptr;
  }
  p->e = *pd;
  p->e->set_user_context(p);
  p->pd.context = ctx;
  p->pd.handle = p->e->handle();
  return &p->pd;
}

int dealloc_pd(ibv_pd* pd) noexcept {
  ShimPd* p = shim(pd);
  if (p->protection) return dealloc_parent_domain(pd);
  if (p->parents > 0) return EBUSY;  // parent domains are made of it
  if (std::error_code ec = engine_of(pd->context).dealloc_pd(p->e)) return ec.value();
  delete p;
  return 0;
}

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) noexcept {
  auto mr = engine_of(pd->context).reg_mr(shim(pd)->e, addr, length, iova, access);
  if (!mr) return fail_null<ibv_mr>(mr.error());
  auto* m = new (std::nothrow) ShimMr{};
  if (!m) {
    (void)engine_of(pd->context).dereg_mr(*mr);
    errno = ENOMEM;
    return nullptr;
  }
  m->e = *mr;
  m->e->set_user_context(m);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = m->e->lkey();
  m->mr.lkey = m->e->lkey();
  m->mr.rkey = m->e->rkey();
  return &m->mr;
}

int rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) noexcept {
  // Re-registration replaces the engine MR: register the new one first so a
  // failure leaves the old one valid (IBV_REREG_MR_ERR_INPUT semantics).
  constexpr int kKnown = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
                         IBV_REREG_MR_CHANGE_ACCESS;
  if (flags == 0 || (flags & ~kKnown)) return IBV_REREG_MR_ERR_INPUT;
  ShimMr* m = shim(mr);
  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
  void* new_addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->addr;
  size_t new_len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->length;
  unsigned new_access =
      (flags & IBV_REREG_MR_CHANGE_ACCESS) ? static_cast<unsigned>(access) : m->e->access();
  if (!new_pd || !is_emu(new_pd->context) || new_pd->context != mr->context)
    return IBV_REREG_MR_ERR_INPUT;
  uint64_t iova = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? reinterpret_cast<uintptr_t>(addr)
                                                            : m->e->iova();
  emu::Device& engine = engine_of(mr->context);
  auto fresh = engine.reg_mr(shim(new_pd)->e, new_addr, new_len, iova, new_access);
  if (!fresh) {
    errno = fresh.error().value();
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (std::error_code ec = engine.dereg_mr(m->e)) {
    // EBUSY: memory windows are bound to the old registration; it stays as it was.
    (void)engine.dereg_mr(*fresh);
    errno = ec.value();
    return IBV_REREG_MR_ERR_INPUT;
  }
  m->e = *fresh;
  m->e->set_user_context(m);
  mr->pd = new_pd;
  mr->addr = new_addr;
  mr->length = new_len;
  mr->handle = m->e->lkey();
  mr->lkey = m->e->lkey();
  mr->rkey = m->e->rkey();
  return 0;
}

int dereg_mr(ibv_mr* mr) noexcept {
  if (std::error_code ec = engine_of(mr->context).dereg_mr(shim(mr)->e)) return ec.value();
  delete shim(mr);
  return 0;
}

ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr) noexcept {
  auto ah = engine_of(pd->context).create_ah(shim(pd)->e, from_ibv(*attr));
  if (!ah) return fail_null<ibv_ah>(ah.error());
  auto* a = new (std::nothrow) ShimAh{};
  if (!a) {
    (void)engine_of(pd->context).destroy_ah(*ah);
    errno = ENOMEM;
    return nullptr;
  }
  a->e = *ah;
  a->e->set_user_context(a);
  a->ah.context = pd->context;
  a->ah.pd = pd;
  return &a->ah;
}

int destroy_ah(ibv_ah* ah) noexcept {
  if (std::error_code ec = engine_of(ah->context).destroy_ah(shim(ah)->e)) return ec.value();
  delete shim(ah);
  return 0;
}

namespace {
// RoCEv2 receive buffers start with 40 bytes for the GRH. Over IPv6 they hold
// the IPv6 header; over IPv4 the IPv4 header sits in their last 20 bytes (as
// rxe and libibverbs' ibv_init_ah_from_wc have it).
bool grh_addresses(const ibv_grh* grh, ibv_gid* sgid, ibv_gid* dgid, uint32_t* flow_class) {
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  if ((raw[0] >> 4) == 6) {
    *sgid = grh->sgid;
    *dgid = grh->dgid;
    *flow_class = be32toh(grh->version_tclass_flow);
    return true;
  }
  const uint8_t* ip4 = raw + 20;
  if ((ip4[0] >> 4) != 4) return false;
  *sgid = ibv_gid{};
  *dgid = ibv_gid{};
  sgid->raw[10] = sgid->raw[11] = 0xff;
  dgid->raw[10] = dgid->raw[11] = 0xff;
  std::memcpy(&sgid->raw[12], ip4 + 12, 4);
  std::memcpy(&dgid->raw[12], ip4 + 16, 4);
  *flow_class = static_cast<uint32_t>(ip4[1]) << 20;  // TOS -> traffic class
  return true;
}
}  // namespace

// For RoCE the reply goes to the GRH's source GID, sent from the local GID
// the request arrived on.
int init_ah_from_wc(ibv_context* ctx, uint8_t port_num, const ibv_wc* wc, const ibv_grh* grh,
                    ibv_ah_attr* ah_attr) noexcept {
  if (port_num != emu::kPortNum) return EINVAL;
  if (!(wc->wc_flags & IBV_WC_GRH) || !grh) return EINVAL;  // RoCE always has one
  ibv_gid sgid, dgid;
  uint32_t flow_class = 0;
  if (!grh_addresses(grh, &sgid, &dgid, &flow_class)) return EINVAL;
  ibv_gid local;
  if (query_gid(ctx, port_num, 0, &local) != 0) return errno;
  if (std::memcmp(local.raw, dgid.raw, sizeof local.raw) != 0) return EINVAL;  // not our GID
  *ah_attr = ibv_ah_attr{};
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  ah_attr->is_global = 1;
  ah_attr->grh.dgid = sgid;
  ah_attr->grh.flow_label = flow_class & 0xFFFFF;
  ah_attr->grh.traffic_class = static_cast<uint8_t>((flow_class >> 20) & 0xFF);
  ah_attr->grh.hop_limit = 0xFF;
  ah_attr->grh.sgid_index = 0;
  return 0;
}

ibv_comp_channel* create_comp_channel(ibv_context* ctx) noexcept {
  auto ch = engine_of(ctx).create_comp_channel();
  if (!ch) return fail_null<ibv_comp_channel>(ch.error());
  auto* c = new (std::nothrow) ShimChannel{};
  if (!c) {
    (void)engine_of(ctx).destroy_comp_channel(*ch);
    errno = ENOMEM;
    return nullptr;
  }
  c->e = *ch;
  c->e->set_user_context(c);
  c->ch.context = ctx;
  c->ch.fd = c->e->fd();
  c->ch.refcnt = 0;
  return &c->ch;
}

int destroy_comp_channel(ibv_comp_channel* channel) noexcept {
  // libibverbs: EBUSY while CQs still use the channel.
  if (channel->refcnt) return EBUSY;
  if (std::error_code ec = engine_of(channel->context).destroy_comp_channel(shim(channel)->e))
    return ec.value();
  delete shim(channel);
  return 0;
}

}  // namespace rocelab::verbs_shim::emulated
