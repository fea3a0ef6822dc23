// QPs and SRQs on ids: rdma_create_qp(_ex), rdma_destroy_qp,
// rdma_create_srq(_ex), rdma_destroy_srq, with the CQs and completion
// channels librdmacm makes for them (ucma_create_cqs) and the new QP's first
// moves (ucma_init_conn_qp / ucma_init_ud_qp).
#include "rdmacm_shim/exports.h"

#include <cstring>

#include "rdmacm_shim/real_rdmacm.h"

namespace rocelab::rdmacm_shim {
namespace {

// ucma_create_cqs: a completion channel and CQ for each side not given.
int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) noexcept {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) return -1;
    id->recv_cq = ibv_create_cq(id->verbs, static_cast<int>(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) return -1;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) return -1;
    id->send_cq = ibv_create_cq(id->verbs, static_cast<int>(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) return -1;
  }
  return 0;
}

void destroy_cqs(rdma_cm_id* id) noexcept {
  if (id->recv_cq) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq == id->recv_cq) id->send_cq = nullptr;
    id->recv_cq = nullptr;
  }
  if (id->recv_cq_channel) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    if (id->send_cq_channel == id->recv_cq_channel) id->send_cq_channel = nullptr;
    id->recv_cq_channel = nullptr;
  }
  if (id->send_cq) {
    ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
  }
  if (id->send_cq_channel) {
    ibv_destroy_comp_channel(id->send_cq_channel);
    id->send_cq_channel = nullptr;
  }
}

// ucma_init_conn_qp / ucma_init_ud_qp.
int init_new_qp(Id* i, ibv_qp* qp) noexcept {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(&i->id, &attr, &mask) != 0) return -1;
  int r = ibv_modify_qp(qp, &attr, mask);
  if (r) return fail(r);
  if (!is_ud(&i->id)) return 0;
  std::memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTR;
  r = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
  if (r) return fail(r);
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  r = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (r) return fail(r);
  return 0;
}

}  // namespace

}  // namespace rocelab::rdmacm_shim

using rocelab::rdmacm_shim::create_cqs;
using rocelab::rdmacm_shim::destroy_cqs;
using rocelab::rdmacm_shim::Dev;
using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::init_new_qp;
using rocelab::rdmacm_shim::State;

extern "C" int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_qp_ex, V10, -1, id, attr);
  if (!id || !attr) return fail(EINVAL);
  if (id->qp) return fail(EINVAL);
  if (!id->verbs) return fail(EINVAL);
  Dev* d = State::get().dev_of(id->verbs);
  if (!d) return fail(ENODEV);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd ? id->pd : State::get().default_pd(*d);
    if (!attr->pd) return fail(ENOMEM);
  } else if (attr->pd->context != id->verbs) {
    return fail(EINVAL);
  }
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq)) {
    return fail(EINVAL);
  }
  if (create_cqs(id, (attr->send_cq || id->send_cq) ? 0 : attr->cap.max_send_wr,
                 (attr->recv_cq || id->recv_cq) ? 0 : attr->cap.max_recv_wr) != 0) {
    int e = errno;
    destroy_cqs(id);
    return fail(e);
  }
  if (!attr->send_cq) attr->send_cq = id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
  if (id->srq && !attr->srq) attr->srq = id->srq;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (!qp) {
    int e = errno ? errno : ENOMEM;
    destroy_cqs(id);
    return fail(e);
  }
  if (init_new_qp(id_of(id), qp) != 0) {
    int e = errno;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(e);
  }
  id->pd = qp->pd;
  id->qp = qp;
  return 0;
}

extern "C" int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_qp, V10, -1, id, pd, qp_init_attr);
  if (!id || !qp_init_attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, qp_init_attr, sizeof *qp_init_attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd ? pd : id->pd;
  int r = rdma_create_qp_ex(id, &ex);
  std::memcpy(qp_init_attr, &ex, sizeof *qp_init_attr);
  return r;
}

extern "C" void rdma_destroy_qp(rdma_cm_id* id) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_qp, V10)) real(id);
    return;
  }
  if (!id) return;
  if (id->qp) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(id);
}

extern "C" int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_srq_ex, V10, -1, id, attr);
  if (!id || !attr || !id->verbs) return fail(EINVAL);
  Dev* d = State::get().dev_of(id->verbs);
  if (!d) return fail(ENODEV);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
    attr->srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    attr->pd = id->pd ? id->pd : State::get().default_pd(*d);
    if (!attr->pd) return fail(ENOMEM);
  }
  if (attr->srq_type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
      if (create_cqs(id, 0, attr->attr.max_wr) != 0) return -1;
      attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
      attr->cq = id->recv_cq;
    }
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (!srq) {
    int e = errno ? errno : ENOMEM;
    destroy_cqs(id);
    return fail(e);
  }
  id->pd = attr->pd;
  id->srq = srq;
  return 0;
}

extern "C" int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_srq, V10, -1, id, pd, attr);
  if (!id || !attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd ? pd : id->pd;
  int r = rdma_create_srq_ex(id, &ex);
  attr->attr = ex.attr;
  return r;
}

extern "C" void rdma_destroy_srq(rdma_cm_id* id) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_srq, V10)) real(id);
    return;
  }
  if (!id || !id->srq) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  if (!id->qp) destroy_cqs(id);
}
