// Emulated QPs: create (plain and extended), modify (keeping qp->state
// current, as libibverbs does), query, destroy, and the post verbs.
#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "verbs_shim/convert.h"
#include "verbs_shim/emulated.h"
#include "verbs_shim/post_convert.h"

namespace rocelab::verbs_shim {

emu::SendWr to_emu(const ibv_send_wr& wr, std::span<const emu::Sge> sges, bool ud_qp) {
  emu::SendWr out;
  out.wr_id = wr.wr_id;
  out.sg_list = sges;
  const auto opcode = raw_enum(wr.opcode);  // a program may store any value here
  out.opcode = static_cast<emu::WrOpcode>(opcode > 255 ? 255 : opcode);
  out.send_flags = wr.send_flags;
  switch (opcode) {
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      out.imm_data = wr.imm_data;
      [[fallthrough]];
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_READ:
      out.rdma.remote_addr = wr.wr.rdma.remote_addr;
      out.rdma.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      out.atomic.remote_addr = wr.wr.atomic.remote_addr;
      out.atomic.compare_add = wr.wr.atomic.compare_add;
      out.atomic.swap = wr.wr.atomic.swap;
      out.atomic.rkey = wr.wr.atomic.rkey;
      break;
    case IBV_WR_SEND_WITH_IMM:
      out.imm_data = wr.imm_data;
      break;
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_LOCAL_INV:
      out.invalidate_rkey = wr.invalidate_rkey;
      break;
    case IBV_WR_SEND:
    case IBV_WR_BIND_MW:
    case IBV_WR_TSO:
    case IBV_WR_DRIVER1:
    case IBV_WR_ATOMIC_WRITE:
    default:
      break;  // the engine rejects what it does not implement
  }
  out.xrc_remote_srqn = wr.qp_type.xrc.remote_srqn;  // its own union: read on XRC initiators only
  // UD fields share the union with rdma/atomic and are read on UD QPs only:
  // on other QPs a SEND's union is whatever the program left there
  // (rdma_verbs.h's rdma_post_send leaves it uninitialised), not an AH.
  if (ud_qp && (opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM)) {
    out.ud.ah = wr.wr.ud.ah ? shim(wr.wr.ud.ah)->e : nullptr;
    out.ud.remote_qpn = wr.wr.ud.remote_qpn;
    out.ud.remote_qkey = wr.wr.ud.remote_qkey;
  }
  return out;
}

namespace emulated {
namespace {

// Whether an object a program passed belongs to this context (or is absent).
template <typename T>
bool ours_or_null(ibv_context* ctx, T* o) {
  return !o || o->context == ctx;
}

// raw_type: the qp_type field's value as the program stored it. XRC: an
// initiator (XRC_SEND) takes pd and send_cq and ignores the receive side; a
// target (XRC_RECV) takes xrcd only (rdma-core's ibv_create_qp_ex).
ibv_qp* make_qp(ibv_context* ctx, ibv_pd* pd, void* qp_context, ibv_cq* send_cq,
                ibv_cq* recv_cq, ibv_srq* srq, ibv_qp_cap* cap, unsigned raw_type, int sq_sig_all,
                ibv_xrcd* xrcd = nullptr) {
  if (raw_type != IBV_QPT_RC && raw_type != IBV_QPT_UC && raw_type != IBV_QPT_UD && raw_type != IBV_QPT_XRC_SEND &&
      raw_type != IBV_QPT_XRC_RECV) {
    errno = EOPNOTSUPP;  // raw packet, driver QPs: not emulated
    return nullptr;
  }
  const bool tgt = raw_type == IBV_QPT_XRC_RECV, ini = raw_type == IBV_QPT_XRC_SEND;
  if (tgt) {
    pd = nullptr;
    send_cq = recv_cq = nullptr;
    srq = nullptr;
    if (!xrcd || xrcd->context != ctx) {
      errno = EINVAL;
      return nullptr;
    }
  } else {
    xrcd = nullptr;
    if (ini) recv_cq = nullptr, srq = nullptr;
    if (!pd || pd->context != ctx || !send_cq || (!ini && !recv_cq) || !ours_or_null(ctx, send_cq) ||
        !ours_or_null(ctx, recv_cq) || !ours_or_null(ctx, srq)) {
      errno = EINVAL;
      return nullptr;
    }
  }
  emu::QpInitAttr ia;
  ia.send_cq = send_cq ? shim(send_cq)->e : nullptr;
  ia.recv_cq = recv_cq ? shim(recv_cq)->e : nullptr;
  ia.srq = srq ? shim(srq)->e : nullptr;
  ia.xrcd = xrcd ? shim(xrcd)->e : nullptr;
  ia.cap = from_ibv(*cap);
  const auto type = static_cast<ibv_qp_type>(raw_type);
  ia.qp_type = static_cast<emu::QpType>(type);
  ia.sq_sig_all = sq_sig_all != 0;
  auto qp = engine_of(ctx).create_qp(pd ? shim(pd)->e : nullptr, ia);
  if (!qp) return fail_null<ibv_qp>(qp.error());
  auto* q = new (std::nothrow) ShimQp{};
  WrBatch* batch = new_wr_batch((*qp)->cap().max_send_wr, (*qp)->cap().max_send_sge);
  if (!q || !batch) {
    delete q;
    delete_wr_batch(batch);
    (void)engine_of(ctx).destroy_qp(*qp);
    errno = ENOMEM;
    return nullptr;
  }
  q->e = *qp;
  q->e->set_user_context(q);
  engine_of(ctx).set_async_queue(q->e, shim(ctx)->async_queue);
  q->batch = batch;
  q->ring_next = q->ring_prev = q;
  ibv_qp& b = q->qpx.qp_base;
  b.context = ctx;
  b.qp_context = qp_context;
  b.pd = pd;
  b.send_cq = send_cq;
  b.recv_cq = recv_cq;
  b.srq = srq;
  b.qp_num = q->e->qp_num();
  b.handle = b.qp_num;
  b.state = IBV_QPS_RESET;
  b.qp_type = type;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  fill_wr_ops(q->qpx);
  to_ibv(q->e->cap(), cap);  // the caller learns the actual capacities
  return &b;
}

}  // namespace

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) noexcept {
  if (raw_enum(attr->qp_type) == IBV_QPT_XRC_RECV) {  // a target needs a domain: ibv_create_qp_ex
    errno = EINVAL;
    return nullptr;
  }
  return make_qp(pd->context, pd, attr->qp_context, attr->send_cq, attr->recv_cq, attr->srq,
                 &attr->cap, raw_enum(attr->qp_type), attr->sq_sig_all);
}

ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) noexcept {
  constexpr uint32_t kKnown = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  constexpr uint64_t kOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |
                            IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW;
  if ((attr->comp_mask & ~kKnown) ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr->send_ops_flags & ~kOps))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (raw_enum(attr->qp_type) == IBV_QPT_XRC_RECV) {
    // A target: an XRC domain of this context, and nothing else.
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd || attr->xrcd->context != ctx) {
      errno = EINVAL;
      return nullptr;
    }
    return make_qp(ctx, nullptr, attr->qp_context, nullptr, nullptr, nullptr, &attr->cap, IBV_QPT_XRC_RECV,
                   attr->sq_sig_all, attr->xrcd);
  }
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != ctx) {
    errno = EINVAL;
    return nullptr;
  }
  return make_qp(ctx, attr->pd, attr->qp_context, attr->send_cq, attr->recv_cq, attr->srq,
                 &attr->cap, raw_enum(attr->qp_type), attr->sq_sig_all);
}

ibv_qp_ex* qp_to_qp_ex(ibv_qp* qp) noexcept { return &shim(qp)->qpx; }

int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) noexcept {
  ShimQp* q = shim(qp);
  if (std::error_code ec = q->e->modify(from_ibv(*attr), static_cast<uint32_t>(mask))) {
    // rocelab run --explain: say why, on stderr; the program still gets the errno.
    if (DeviceTable::get().config().explain)
      std::fprintf(stderr, "rocelab: ibv_modify_qp(QP 0x%06x) = %s: %s\n", qp->qp_num,
                   std::strerror(ec.value()), q->e->last_refusal().c_str());
    return ec.value();
  }
  qp->state = static_cast<ibv_qp_state>(q->e->state());
  return 0;
}

int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) noexcept {
  (void)mask;  // like providers: every attribute is returned
  emu::QpAttr qa;
  emu::QpInitAttr ia;
  if (std::error_code ec = shim(qp)->e->query(&qa, &ia)) return ec.value();
  to_ibv(qa, attr);
  qp->state = attr->qp_state;
  *init = ibv_qp_init_attr{};
  init->qp_context = qp->qp_context;
  init->send_cq = qp->send_cq;
  init->recv_cq = qp->recv_cq;
  init->srq = qp->srq;
  to_ibv(ia.cap, &init->cap);
  init->qp_type = qp->qp_type;
  init->sq_sig_all = ia.sq_sig_all ? 1 : 0;
  return 0;
}

ibv_qp* open_qp(ibv_context* ctx, ibv_qp_open_attr* attr) noexcept {
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (!attr || (attr->comp_mask & ~(kNeeded | IBV_QP_OPEN_ATTR_CONTEXT)) || (attr->comp_mask & kNeeded) != kNeeded ||
      raw_enum(attr->qp_type) != IBV_QPT_XRC_RECV || !attr->xrcd || attr->xrcd->context != ctx) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp = engine_of(ctx).open_qp(shim(attr->xrcd)->e, attr->qp_num);
  if (!qp) return fail_null<ibv_qp>(qp.error());
  auto* owner = static_cast<ShimQp*>((*qp)->user_context());
  auto* q = new (std::nothrow) ShimQp{};
  WrBatch* batch = new_wr_batch(0, 0);
  if (!q || !batch) {
    delete q;
    delete_wr_batch(batch);
    (void)engine_of(ctx).destroy_qp(*qp);  // drops the handle just added
    errno = ENOMEM;
    return nullptr;
  }
  q->e = *qp;
  q->batch = batch;
  // Join the ring of handles on this QP.
  q->ring_next = owner->ring_next;
  q->ring_prev = owner;
  owner->ring_next->ring_prev = q;
  owner->ring_next = q;
  ibv_qp& b = q->qpx.qp_base;
  b = owner->qpx.qp_base;  // context, number, type, state
  b.qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  fill_wr_ops(q->qpx);
  return &b;
}

int destroy_qp(ibv_qp* qp) noexcept {
  ShimQp* q = shim(qp);
  // Another handle on the same XRC target stays: it becomes the one the
  // engine's events name, and this one leaves the ring.
  if (q->ring_next != q && q->e->user_context() == q) q->e->set_user_context(q->ring_next);
  if (std::error_code ec = engine_of(qp->context).destroy_qp(q->e)) {
    q->e->set_user_context(q);
    return ec.value();
  }
  q->ring_prev->ring_next = q->ring_next;
  q->ring_next->ring_prev = q->ring_prev;
  wait_for_async_acks(qp->mutex, qp->cond, qp->events_completed, q->async_reported);
  delete_wr_batch(q->batch);
  pthread_cond_destroy(&qp->cond);
  pthread_mutex_destroy(&qp->mutex);
  delete q;
  return 0;
}

int attach_mcast(ibv_qp* qp, const ibv_gid* gid) noexcept {
  if (gid == nullptr) return EINVAL;
  emu::Gid g;
  std::memcpy(g.data(), gid->raw, g.size());
  return engine_of(qp->context).attach_mcast(shim(qp)->e, g).value();
}

int detach_mcast(ibv_qp* qp, const ibv_gid* gid) noexcept {
  if (gid == nullptr) return EINVAL;
  emu::Gid g;
  std::memcpy(g.data(), gid->raw, g.size());
  return engine_of(qp->context).detach_mcast(shim(qp)->e, g).value();
}

// rocelab run --explain: a refused post says why on stderr; the errno is unchanged.
static int explained(const char* verb, ibv_qp* qp, int rc) {
  if (rc != 0 && DeviceTable::get().config().explain)
    std::fprintf(stderr, "rocelab: %s(QP 0x%06x) = %s: %s\n", verb, qp->qp_num, std::strerror(rc),
                 shim(qp)->e->last_refusal().c_str());
  return rc;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
  emu::Qp* e = shim(qp)->e;
  return explained("ibv_post_send", qp, post_chunks<ibv_send_wr, emu::SendWr>(
      wr, bad_wr,
      [qp](const ibv_send_wr& w, std::span<const emu::Sge> s) {
        emu::SendWr out = to_emu(w, s, qp->qp_type == IBV_QPT_UD);
        // A bind names shim objects: the engine gets its own (none: EINVAL at post).
        if (raw_enum(w.opcode) == IBV_WR_BIND_MW &&
            (!w.bind_mw.mw || !to_emu_bind(qp->context, w.bind_mw.mw, w.bind_mw.rkey, w.bind_mw.bind_info, &out)))
          out.bind_mw.mw = nullptr;
        return out;
      },
      [e](std::span<const emu::SendWr> wrs, size_t* n) { return e->post_send(wrs, n); }));
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  emu::Qp* e = shim(qp)->e;
  return explained("ibv_post_recv", qp, post_recv_chunks(wr, bad_wr, [e](std::span<const emu::RecvWr> wrs, size_t* n) {
    return e->post_recv(wrs, n);
  }));
}

}  // namespace emulated
}  // namespace rocelab::verbs_shim
