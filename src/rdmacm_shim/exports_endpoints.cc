// Synchronous ids and endpoints: ids without a channel wait in each call for
// the event it causes (complete, as ucma_complete); rdma_getaddrinfo,
// rdma_freeaddrinfo, rdma_create_ep, rdma_destroy_ep and rdma_get_request.
#include "rdmacm_shim/exports.h"

#include "rdmacm_shim/real_rdmacm.h"

namespace rocelab::rdmacm_shim {

int complete(Id* i) noexcept {
  if (!i->sync) return 0;
  if (i->id.event) {
    rdma_ack_cm_event(i->id.event);
    i->id.event = nullptr;
  }
  if (get_event(i->id.channel, &i->id.event) != 0) return -1;
  rdma_cm_event* e = i->id.event;
  if (e->status) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(e->status < 0 ? -e->status : e->status);
  }
  return 0;
}

}  // namespace rocelab::rdmacm_shim

using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::get_event;
using rocelab::rdmacm_shim::Id;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::new_id;

extern "C" int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                rdma_addrinfo** res) {
  // getaddrinfo and a little formatting: the real library's serves both kinds
  // of device (it asks the kernel for nothing on RoCE addresses).
  ROCELAB_FORWARD(rdma_getaddrinfo, V10, -1, node, service, hints, res);
}

extern "C" void rdma_freeaddrinfo(rdma_addrinfo* res) {
  if (auto real = ROCELAB_REAL_CM(rdma_freeaddrinfo, V10)) real(res);
}

extern "C" int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_ep, V10, -1, id, res, pd, qp_init_attr);
  if (!id || !res) return fail(EINVAL);
  auto ps = static_cast<rdma_port_space>(res->ai_port_space);
  auto qpt = static_cast<ibv_qp_type>(res->ai_qp_type);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) return fail(EINVAL);
  int err = 0;
  Id* i = new_id(nullptr, nullptr, ps, qpt, &err);
  if (!i) return fail(err);
  rdma_cm_id* cid = &i->id;
  int r = 0;
  if (qp_init_attr) qp_init_attr->qp_type = qpt;
  if (res->ai_flags & RAI_PASSIVE) {
    r = rdma_bind_addr(cid, res->ai_src_addr);
    if (r == 0 && qp_init_attr) {
      i->has_qp_init_attr = true;
      i->qp_init_attr = *qp_init_attr;
    }
    if (r == 0) cid->pd = pd;
  } else {
    r = rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : nullptr, res->ai_dst_addr, 2000);
    if (r == 0) r = rdma_resolve_route(cid, 2000);
    if (r == 0 && qp_init_attr) {
      r = rdma_create_qp(cid, pd, qp_init_attr);
    }
  }
  if (r != 0) {
    int e = errno;
    rdma_destroy_ep(cid);
    return fail(e);
  }
  *id = cid;
  return 0;
}

extern "C" void rdma_destroy_ep(rdma_cm_id* id) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_ep, V10)) real(id);
    return;
  }
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

extern "C" int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_get_request, V10, -1, listen, id);
  if (!listen || !id) return fail(EINVAL);
  Id* l = id_of(listen);
  if (!l->sync) return fail(EINVAL);
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (get_event(listen->channel, &event) != 0) return -1;
  int e = 0;
  if (event->status) {
    e = event->status < 0 ? -event->status : event->status;
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    e = EINVAL;
  } else if (l->has_qp_init_attr) {
    ibv_qp_init_attr attr = l->qp_init_attr;
    if (rdma_create_qp(event->id, listen->pd, &attr) != 0) e = errno;
  }
  if (e) {
    rdma_ack_cm_event(event);
    return fail(e);
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}
