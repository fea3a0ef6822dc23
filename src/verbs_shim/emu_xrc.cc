// Emulated XRC (rdma-core's verbs.h inlines reach these through the
// verbs_context slots): ibv_open_xrcd / ibv_close_xrcd, ibv_create_srq_ex
// (XRC SRQs; a basic one too), ibv_get_srq_num. XRC QPs are made in
// emu_qp.cc (create_qp_ex, open_qp).
#include <pthread.h>

#include <cerrno>
#include <fcntl.h>
#include <new>

#include "verbs_shim/convert.h"
#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim::emulated {

ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr) noexcept {
  // ibv_cmd_open_xrcd: both FD and OFLAGS named, no unknown bit; uverbs: only
  // O_CREAT and O_EXCL mean anything.
  constexpr uint32_t kBoth = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (!attr || (attr->comp_mask & ~kBoth) || (attr->comp_mask & kBoth) != kBoth ||
      (attr->oflags & ~(O_CREAT | O_EXCL))) {
    errno = EINVAL;
    return nullptr;
  }
  uint64_t key = 0;  // fd -1: a domain of its own
  if (attr->fd != -1) {
    key = file_id(attr->fd);
    if (key == 0) {
      errno = EBADF;
      return nullptr;
    }
  }
  auto x = engine_of(ctx).open_xrcd(key, attr->oflags & O_CREAT, attr->oflags & O_EXCL);
  if (!x) return fail_null<ibv_xrcd>(x.error());
  auto* s = new (std::nothrow) ShimXrcd{};
  if (!s) {
    (void)engine_of(ctx).close_xrcd(*x);
    errno = ENOMEM;
    return nullptr;
  }
  s->e = *x;
  s->xrcd.context = ctx;
  return &s->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) noexcept {
  if (!xrcd) return EINVAL;
  if (std::error_code ec = engine_of(xrcd->context).close_xrcd(shim(xrcd)->e)) return ec.value();
  delete shim(xrcd);
  return 0;
}

ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr) noexcept {
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                              IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if (!attr || (attr->comp_mask & ~kKnown)) {
    errno = EINVAL;
    return nullptr;
  }
  const unsigned type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? raw_enum(attr->srq_type) : unsigned{IBV_SRQT_BASIC};
  if (type == IBV_SRQT_TM || (attr->comp_mask & IBV_SRQ_INIT_ATTR_TM)) {
    errno = EOPNOTSUPP;  // tag matching is not emulated
    return nullptr;
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd || attr->pd->context != ctx ||
      (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC)) {
    errno = EINVAL;
    return nullptr;
  }
  if (type == IBV_SRQT_BASIC) {
    ibv_srq_init_attr basic{attr->srq_context, attr->attr};
    ibv_srq* s = create_srq(attr->pd, &basic);
    if (s) attr->attr = basic.attr;
    return s;
  }
  // XRC: a domain and a CQ of this context.
  constexpr uint32_t kXrc = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if ((attr->comp_mask & kXrc) != kXrc || !attr->xrcd || !attr->cq || attr->xrcd->context != ctx ||
      attr->cq->context != ctx) {
    errno = EINVAL;
    return nullptr;
  }
  emu::SrqAttr sa;
  sa.max_wr = attr->attr.max_wr;
  sa.max_sge = attr->attr.max_sge;
  sa.srq_limit = attr->attr.srq_limit;
  auto srq = engine_of(ctx).create_xrc_srq(shim(attr->pd)->e, shim(attr->xrcd)->e, shim(attr->cq)->e, sa);
  if (!srq) return fail_null<ibv_srq>(srq.error());
  auto* s = new (std::nothrow) ShimSrq{};
  if (!s) {
    (void)engine_of(ctx).destroy_srq(*srq);
    errno = ENOMEM;
    return nullptr;
  }
  s->e = *srq;
  engine_of(ctx).set_async_queue(s->e, shim(ctx)->async_queue);
  s->e->set_user_context(s);
  s->srq.context = ctx;
  s->srq.srq_context = attr->srq_context;
  s->srq.pd = attr->pd;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  emu::SrqAttr actual = s->e->query();
  attr->attr.max_wr = actual.max_wr;
  attr->attr.max_sge = actual.max_sge;
  return &s->srq;
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) noexcept {
  if (!srq || !srq_num) return EINVAL;
  *srq_num = shim(srq)->e->srq_num();
  return 0;
}

}  // namespace rocelab::verbs_shim::emulated
