// The ops every emulated context carries. libibverbs' inline verbs call
// through these slots (docs/style.md §9): ibv_context_ops for the data path and the
// verbs_context extension slots for the _ex verbs. Every slot is filled; verbs
// the emulator lacks fail the way libibverbs fails when a provider lacks them
// (EOPNOTSUPP, or NULL with errno EOPNOTSUPP). The tables are const; a new
// context copies them because libibverbs embeds them by value.
#include <cerrno>
#include <cstddef>

#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim::emulated {
namespace {

// ---- unsupported verbs ----------------------------------------------------
template <typename R, typename... A>
R* null_eopnotsupp(A...) noexcept {
  errno = EOPNOTSUPP;
  return nullptr;
}
template <typename... A>
int eopnotsupp(A...) noexcept {
  return EOPNOTSUPP;
}
// Slots libibverbs 1.1+ never calls (_compat_*, ABI placeholders).
void* compat_slot() noexcept {
  errno = EOPNOTSUPP;
  return nullptr;
}
void abi_placeholder() noexcept {}

int compat_query_device(ibv_context* ctx, ibv_device_attr* attr) noexcept {
  return query_device(ctx, attr);
}
int compat_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr*) noexcept {
  (void)ctx;
  (void)port;
  return EOPNOTSUPP;  // libibverbs routes ibv_query_port to the extended query_port
}
int query_port_op(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) noexcept {
  return query_port(ctx, port, attr, len);
}

constexpr ibv_context_ops kContextOps = {
    ._compat_query_device = compat_query_device,
    ._compat_query_port = compat_query_port,
    ._compat_alloc_pd = compat_slot,
    ._compat_dealloc_pd = compat_slot,
    ._compat_reg_mr = compat_slot,
    ._compat_rereg_mr = compat_slot,
    ._compat_dereg_mr = compat_slot,
    .alloc_mw = alloc_mw,
    .bind_mw = bind_mw,
    .dealloc_mw = dealloc_mw,
    ._compat_create_cq = compat_slot,
    .poll_cq = poll_cq,
    .req_notify_cq = req_notify_cq,
    ._compat_cq_event = compat_slot,
    ._compat_resize_cq = compat_slot,
    ._compat_destroy_cq = compat_slot,
    ._compat_create_srq = compat_slot,
    ._compat_modify_srq = compat_slot,
    ._compat_query_srq = compat_slot,
    ._compat_destroy_srq = compat_slot,
    .post_srq_recv = post_srq_recv,
    ._compat_create_qp = compat_slot,
    ._compat_query_qp = compat_slot,
    ._compat_modify_qp = compat_slot,
    ._compat_destroy_qp = compat_slot,
    .post_send = post_send,
    .post_recv = post_recv,
    ._compat_create_ah = compat_slot,
    ._compat_destroy_ah = compat_slot,
    ._compat_attach_mcast = compat_slot,
    ._compat_detach_mcast = compat_slot,
    ._compat_async_event = compat_slot,
};

// The extension slots, in verbs_context's declaration order.
struct ExtOps {
  decltype(verbs_context::query_port) query_port;
  decltype(verbs_context::advise_mr) advise_mr;
  decltype(verbs_context::alloc_null_mr) alloc_null_mr;
  decltype(verbs_context::read_counters) read_counters;
  decltype(verbs_context::attach_counters_point_flow) attach_counters_point_flow;
  decltype(verbs_context::create_counters) create_counters;
  decltype(verbs_context::destroy_counters) destroy_counters;
  decltype(verbs_context::reg_dm_mr) reg_dm_mr;
  decltype(verbs_context::alloc_dm) alloc_dm;
  decltype(verbs_context::free_dm) free_dm;
  decltype(verbs_context::modify_flow_action_esp) modify_flow_action_esp;
  decltype(verbs_context::destroy_flow_action) destroy_flow_action;
  decltype(verbs_context::create_flow_action_esp) create_flow_action_esp;
  decltype(verbs_context::modify_qp_rate_limit) modify_qp_rate_limit;
  decltype(verbs_context::alloc_parent_domain) alloc_parent_domain;
  decltype(verbs_context::dealloc_td) dealloc_td;
  decltype(verbs_context::alloc_td) alloc_td;
  decltype(verbs_context::modify_cq) modify_cq;
  decltype(verbs_context::post_srq_ops) post_srq_ops;
  decltype(verbs_context::destroy_rwq_ind_table) destroy_rwq_ind_table;
  decltype(verbs_context::create_rwq_ind_table) create_rwq_ind_table;
  decltype(verbs_context::destroy_wq) destroy_wq;
  decltype(verbs_context::modify_wq) modify_wq;
  decltype(verbs_context::create_wq) create_wq;
  decltype(verbs_context::query_rt_values) query_rt_values;
  decltype(verbs_context::create_cq_ex) create_cq_ex;
  decltype(verbs_context::query_device_ex) query_device_ex;
  decltype(verbs_context::ibv_destroy_flow) ibv_destroy_flow;
  decltype(verbs_context::ABI_placeholder2) abi_placeholder2;
  decltype(verbs_context::ibv_create_flow) ibv_create_flow;
  decltype(verbs_context::ABI_placeholder1) abi_placeholder1;
  decltype(verbs_context::open_qp) open_qp;
  decltype(verbs_context::create_qp_ex) create_qp_ex;
  decltype(verbs_context::get_srq_num) get_srq_num;
  decltype(verbs_context::create_srq_ex) create_srq_ex;
  decltype(verbs_context::open_xrcd) open_xrcd;
  decltype(verbs_context::close_xrcd) close_xrcd;
};

// Every slot before sz is in ExtOps, except priv and _ABI_placeholder3.
static_assert(sizeof(ExtOps) + sizeof(void*) + sizeof(uint64_t) == offsetof(verbs_context, sz),
              "a verbs_context slot is missing from ExtOps");

constexpr ExtOps kExtOps = {
    .query_port = query_port_op,
    .advise_mr = eopnotsupp<ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t>,
    .alloc_null_mr = null_eopnotsupp<ibv_mr, ibv_pd*>,
    .read_counters = eopnotsupp<ibv_counters*, uint64_t*, uint32_t, uint32_t>,
    .attach_counters_point_flow = eopnotsupp<ibv_counters*, ibv_counter_attach_attr*, ibv_flow*>,
    .create_counters = null_eopnotsupp<ibv_counters, ibv_context*, ibv_counters_init_attr*>,
    .destroy_counters = eopnotsupp<ibv_counters*>,
    .reg_dm_mr = null_eopnotsupp<ibv_mr, ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned>,
    .alloc_dm = null_eopnotsupp<ibv_dm, ibv_context*, ibv_alloc_dm_attr*>,
    .free_dm = eopnotsupp<ibv_dm*>,
    .modify_flow_action_esp = eopnotsupp<ibv_flow_action*, ibv_flow_action_esp_attr*>,
    .destroy_flow_action = eopnotsupp<ibv_flow_action*>,
    .create_flow_action_esp =
        null_eopnotsupp<ibv_flow_action, ibv_context*, ibv_flow_action_esp_attr*>,
    .modify_qp_rate_limit = eopnotsupp<ibv_qp*, ibv_qp_rate_limit_attr*>,
    .alloc_parent_domain = alloc_parent_domain,
    .dealloc_td = dealloc_td,
    .alloc_td = alloc_td,
    .modify_cq = eopnotsupp<ibv_cq*, ibv_modify_cq_attr*>,
    .post_srq_ops = eopnotsupp<ibv_srq*, ibv_ops_wr*, ibv_ops_wr**>,
    .destroy_rwq_ind_table = eopnotsupp<ibv_rwq_ind_table*>,
    .create_rwq_ind_table =
        null_eopnotsupp<ibv_rwq_ind_table, ibv_context*, ibv_rwq_ind_table_init_attr*>,
    .destroy_wq = eopnotsupp<ibv_wq*>,
    .modify_wq = eopnotsupp<ibv_wq*, ibv_wq_attr*>,
    .create_wq = null_eopnotsupp<ibv_wq, ibv_context*, ibv_wq_init_attr*>,
    .query_rt_values = query_rt_values,
    .create_cq_ex = create_cq_ex,
    .query_device_ex = query_device_ex,
    .ibv_destroy_flow = eopnotsupp<ibv_flow*>,
    .abi_placeholder2 = abi_placeholder,
    .ibv_create_flow = null_eopnotsupp<ibv_flow, ibv_qp*, ibv_flow_attr*>,
    .abi_placeholder1 = abi_placeholder,
    .open_qp = open_qp,
    .create_qp_ex = create_qp_ex,
    .get_srq_num = get_srq_num,
    .create_srq_ex = create_srq_ex,
    .open_xrcd = open_xrcd,
    .close_xrcd = close_xrcd,
};

}  // namespace

void fill_ops(verbs_context& vctx) noexcept {
  vctx.context.ops = kContextOps;
  const ExtOps& x = kExtOps;
  vctx.query_port = x.query_port;
  vctx.advise_mr = x.advise_mr;
  vctx.alloc_null_mr = x.alloc_null_mr;
  vctx.read_counters = x.read_counters;
  vctx.attach_counters_point_flow = x.attach_counters_point_flow;
  vctx.create_counters = x.create_counters;
  vctx.destroy_counters = x.destroy_counters;
  vctx.reg_dm_mr = x.reg_dm_mr;
  vctx.alloc_dm = x.alloc_dm;
  vctx.free_dm = x.free_dm;
  vctx.modify_flow_action_esp = x.modify_flow_action_esp;
  vctx.destroy_flow_action = x.destroy_flow_action;
  vctx.create_flow_action_esp = x.create_flow_action_esp;
  vctx.modify_qp_rate_limit = x.modify_qp_rate_limit;
  vctx.alloc_parent_domain = x.alloc_parent_domain;
  vctx.dealloc_td = x.dealloc_td;
  vctx.alloc_td = x.alloc_td;
  vctx.modify_cq = x.modify_cq;
  vctx.post_srq_ops = x.post_srq_ops;
  vctx.destroy_rwq_ind_table = x.destroy_rwq_ind_table;
  vctx.create_rwq_ind_table = x.create_rwq_ind_table;
  vctx.destroy_wq = x.destroy_wq;
  vctx.modify_wq = x.modify_wq;
  vctx.create_wq = x.create_wq;
  vctx.query_rt_values = x.query_rt_values;
  vctx.create_cq_ex = x.create_cq_ex;
  vctx.priv = nullptr;  // libibverbs' private state: only its own functions read it
  vctx.query_device_ex = x.query_device_ex;
  vctx.ibv_destroy_flow = x.ibv_destroy_flow;
  vctx.ABI_placeholder2 = x.abi_placeholder2;
  vctx.ibv_create_flow = x.ibv_create_flow;
  vctx.ABI_placeholder1 = x.abi_placeholder1;
  vctx.open_qp = x.open_qp;
  vctx.create_qp_ex = x.create_qp_ex;
  vctx.get_srq_num = x.get_srq_num;
  vctx.create_srq_ex = x.create_srq_ex;
  vctx.open_xrcd = x.open_xrcd;
  vctx.close_xrcd = x.close_xrcd;
  vctx._ABI_placeholder3 = 0;
}

}  // namespace rocelab::verbs_shim::emulated
