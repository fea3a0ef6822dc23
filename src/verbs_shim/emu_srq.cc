// Emulated shared receive queues.
#include <pthread.h>

#include <cerrno>
#include <new>

#include "verbs_shim/emulated.h"
#include "verbs_shim/post_convert.h"

namespace rocelab::verbs_shim::emulated {

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) noexcept {
  emu::SrqAttr sa;
  sa.max_wr = attr->attr.max_wr;
  sa.max_sge = attr->attr.max_sge;
  sa.srq_limit = attr->attr.srq_limit;
  auto srq = engine_of(pd->context).create_srq(shim(pd)->e, sa);
  if (!srq) return fail_null<ibv_srq>(srq.error());
  auto* s = new (std::nothrow) ShimSrq{};
  if (!s) {
    (void)engine_of(pd->context).destroy_srq(*srq);
    errno = ENOMEM;
    return nullptr;
  }
  s->e = *srq;
  engine_of(pd->context).set_async_queue(s->e, shim(pd->context)->async_queue);
  s->e->set_user_context(s);
  s->srq.context = pd->context;
  s->srq.srq_context = attr->srq_context;
  s->srq.pd = pd;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  emu::SrqAttr actual = s->e->query();  // libibverbs returns the real sizes
  attr->attr.max_wr = actual.max_wr;
  attr->attr.max_sge = actual.max_sge;
  return &s->srq;
}

int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) noexcept {
  emu::SrqAttr sa;
  sa.max_wr = attr->max_wr;
  sa.max_sge = attr->max_sge;
  sa.srq_limit = attr->srq_limit;
  return shim(srq)->e->modify(sa, static_cast<uint32_t>(mask)).value();
}

int query_srq(ibv_srq* srq, ibv_srq_attr* attr) noexcept {
  emu::SrqAttr sa = shim(srq)->e->query();
  attr->max_wr = sa.max_wr;
  attr->max_sge = sa.max_sge;
  attr->srq_limit = sa.srq_limit;
  return 0;
}

int destroy_srq(ibv_srq* srq) noexcept {
  if (std::error_code ec = engine_of(srq->context).destroy_srq(shim(srq)->e)) return ec.value();
  wait_for_async_acks(srq->mutex, srq->cond, srq->events_completed, shim(srq)->async_reported);
  pthread_cond_destroy(&srq->cond);
  pthread_mutex_destroy(&srq->mutex);
  delete shim(srq);
  return 0;
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  emu::Srq* e = shim(srq)->e;
  return post_recv_chunks(wr, bad_wr, [e](std::span<const emu::RecvWr> wrs, size_t* n) {
    return e->post_recv(wrs, n);
  });
}

}  // namespace rocelab::verbs_shim::emulated
