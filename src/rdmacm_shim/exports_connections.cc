// Connections: rdma_listen, rdma_connect, rdma_accept, rdma_reject(_ece),
// rdma_establish, rdma_notify, rdma_disconnect, rdma_init_qp_attr and the ECE
// calls; the connection parameters librdmacm checks and fills in
// (ucma_valid_param), and the moves of the id's QP.
#include "rdmacm_shim/exports.h"

#include <algorithm>
#include <cstdio>
#include <span>

#include "rdmacm_shim/real_rdmacm.h"
#include "verbs_shim/convert.h"

namespace rocelab::rdmacm_shim {
namespace {

int modify_qp_to(Id* i, ibv_qp_state state, int override_rd) noexcept {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (rdma_init_qp_attr(&i->id, &attr, &mask) != 0) return -1;
  if (state == IBV_QPS_RTR && override_rd != RDMA_MAX_RESP_RES) {
    attr.max_dest_rd_atomic = static_cast<uint8_t>(override_rd);
  }
  if (state == IBV_QPS_RTS && override_rd != RDMA_MAX_INIT_DEPTH) {
    attr.max_rd_atomic = static_cast<uint8_t>(override_rd);
  }
  int r = ibv_modify_qp(i->id.qp, &attr, mask);
  if (r != 0) return fail(r > 0 ? r : errno);
  return 0;
}

int do_connect_param(Id* i, rdma_conn_param* p, cm::ConnParam* cp, bool accept) noexcept {
  Dev* d = i->id.verbs ? State::get().dev_of(i->id.verbs) : nullptr;
  uint8_t max_rr = d ? d->max_responder_resources : 0, max_id = d ? d->max_initiator_depth : 0;
  // ucma_valid_param
  if (i->id.ps == RDMA_PS_TCP) {
    if (!i->id.qp && !p) return EINVAL;
    if (p && p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > max_rr) return EINVAL;
    if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > max_id) return EINVAL;
  }
  if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH) {
    i->initiator_depth = accept ? std::min(i->initiator_depth, max_id) : max_id;
  } else {
    i->initiator_depth = p->initiator_depth;
  }
  if (!p || p->responder_resources == RDMA_MAX_RESP_RES) {
    i->responder_resources = accept ? std::min(i->responder_resources, max_rr) : max_rr;
  } else {
    i->responder_resources = p->responder_resources;
  }
  cp->responder_resources = i->responder_resources;
  cp->initiator_depth = i->initiator_depth;
  cp->qp_num = i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0);
  cp->srq = i->id.srq ? 1 : (p ? p->srq : 0);
  if (p) {
    cp->flow_control = p->flow_control;
    cp->retry_count = p->retry_count;
    cp->rnr_retry_count = p->rnr_retry_count;
    if (p->private_data && p->private_data_len) {
      cp->private_data = {static_cast<const uint8_t*>(p->private_data), p->private_data_len};
    }
  } else {
    cp->retry_count = 7;
    cp->rnr_retry_count = 7;
  }
  return 0;
}

}  // namespace

int modify_qp_rtr_rts(Id* i) noexcept {
  if (!i->id.qp) return 0;
  if (modify_qp_to(i, IBV_QPS_INIT, 0) != 0) return -1;
  if (modify_qp_to(i, IBV_QPS_RTR, i->responder_resources) != 0) return -1;
  return modify_qp_to(i, IBV_QPS_RTS, i->initiator_depth);
}

void modify_qp_err(Id* i) noexcept {
  if (!i->id.qp) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(i->id.qp, &attr, IBV_QP_STATE);
}

}  // namespace rocelab::rdmacm_shim

using rocelab::rdmacm_shim::complete;
using rocelab::rdmacm_shim::do_connect_param;
using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::Id;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::is_ud;
using rocelab::rdmacm_shim::modify_qp_err;
using rocelab::rdmacm_shim::modify_qp_rtr_rts;
using rocelab::rdmacm_shim::refresh;
using rocelab::rdmacm_shim::result;
using rocelab::rdmacm_shim::State;
using rocelab::rdmacm_shim::the_cm;
namespace cm = rocelab::cm;
namespace emu = rocelab::emu;

extern "C" int rdma_listen(rdma_cm_id* id, int backlog) {
  if (!emulated()) ROCELAB_FORWARD(rdma_listen, V10, -1, id, backlog);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().listen(i->h, backlog)) return fail(ec.value());
  refresh(i);
  if (State::get().explain()) {
    auto info = the_cm().query(i->h);
    if (info.ok()) {
      std::fprintf(stderr, "rocelab: rdma_listen on %s port %u (port space 0x%04x)\n",
                   info->src.ip.to_string().c_str(), info->src.port, static_cast<unsigned>(info->ps));
    }
  }
  return 0;
}

extern "C" int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!emulated()) ROCELAB_FORWARD(rdma_connect, V10, -1, id, conn_param);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  cm::ConnParam cp;
  if (int e = do_connect_param(i, conn_param, &cp, false)) return fail(e);
  if (std::error_code ec = the_cm().connect(i->h, cp)) return fail(ec.value());
  return complete(i);
}

extern "C" int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!emulated()) ROCELAB_FORWARD(rdma_accept, V10, -1, id, conn_param);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  cm::ConnParam cp;
  if (int e = do_connect_param(i, conn_param, &cp, true)) return fail(e);
  if (!is_ud(id) && id->qp) {
    if (modify_qp_rtr_rts(i) != 0) return -1;
  }
  if (std::error_code ec = the_cm().accept(i->h, cp)) return fail(ec.value());
  if (is_ud(id)) return 0;
  return complete(i);
}

extern "C" int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (!emulated()) ROCELAB_FORWARD(rdma_reject, V10, -1, id, private_data, private_data_len);
  if (!id) return fail(EINVAL);
  std::span<const uint8_t> pd;
  if (private_data && private_data_len) pd = {static_cast<const uint8_t*>(private_data), private_data_len};
  return result(the_cm().reject(id_of(id)->h, pd));
}

extern "C" int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (!emulated()) ROCELAB_FORWARD(rdma_reject_ece, V13, -1, id, private_data, private_data_len);
  // The kernel rejects with reason 35 (vendor option not supported); the Cm
  // sends 28 (consumer reject) with the private data.
  return rdma_reject(id, private_data, private_data_len);
}

extern "C" int rdma_establish(rdma_cm_id* id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_establish, V12, -1, id);
  if (!id) return fail(EINVAL);
  return result(the_cm().establish(id_of(id)->h));
}

extern "C" int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (!emulated()) ROCELAB_FORWARD(rdma_notify, V10, -1, id, event);
  if (!id) return fail(EINVAL);
  return result(the_cm().notify(id_of(id)->h, static_cast<emu::EventType>(event)));
}

extern "C" int rdma_disconnect(rdma_cm_id* id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_disconnect, V10, -1, id);
  if (!id) return fail(EINVAL);
  modify_qp_err(id_of(id));
  return result(the_cm().disconnect(id_of(id)->h));
}

extern "C" int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!emulated()) ROCELAB_FORWARD(rdma_init_qp_attr, V12, -1, id, qp_attr, qp_attr_mask);
  if (!id || !qp_attr || !qp_attr_mask) return fail(EINVAL);
  emu::QpAttr a;
  uint32_t mask = 0;
  auto state = static_cast<emu::QpState>(qp_attr->qp_state);
  if (std::error_code ec = the_cm().init_qp_attr(id_of(id)->h, state, &a, &mask)) return fail(ec.value());
  rocelab::verbs_shim::to_ibv(a, qp_attr);
  *qp_attr_mask = static_cast<int>(mask);
  return 0;
}

extern "C" int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!emulated()) ROCELAB_FORWARD(rdma_set_local_ece, V13, -1, id, ece);
  if (!id || !ece) return fail(EINVAL);
  id_of(id)->local_ece = *ece;
  return 0;
}

extern "C" int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!emulated()) ROCELAB_FORWARD(rdma_get_remote_ece, V13, -1, id, ece);
  if (!id || !ece) return fail(EINVAL);
  // RoCE CM MADs of a device without ECE carry none: vendor 0, no options.
  *ece = ibv_ece{};
  return 0;
}
