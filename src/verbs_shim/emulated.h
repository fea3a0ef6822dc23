// The emulated side of every exported verb: what ibv_foo does when its object
// belongs to an emulated device. Same signatures and return conventions as
// the libibverbs functions (exports_*.cc dispatch here); all noexcept.
#pragma once
#include <infiniband/verbs.h>

#include "verbs_shim/device_table.h"
#include "verbs_shim/shim_objects.h"

namespace rocelab::verbs_shim::emulated {

// Device and context (emu_context.cc).
ibv_context* open_device(EmuDevice& dev) noexcept;
ibv_context* make_context(EmuDevice& dev, int cmd_fd) noexcept;  // owns cmd_fd on success
int close_device(ibv_context* ctx) noexcept;
uint64_t device_guid(EmuDevice& dev) noexcept;  // network order, as ibv_get_device_guid
int query_device(ibv_context* ctx, ibv_device_attr* attr) noexcept;
int query_port(ibv_context* ctx, uint8_t port_num, ibv_port_attr* attr, size_t attr_len) noexcept;
int query_gid(ibv_context* ctx, uint8_t port_num, int index, ibv_gid* gid) noexcept;
int query_gid_ex(ibv_context* ctx, uint32_t port_num, uint32_t index, ibv_gid_entry* entry,
                 uint32_t flags, size_t entry_size) noexcept;
ssize_t query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max_entries,
                        uint32_t flags, size_t entry_size) noexcept;
int query_gid_type(ibv_context* ctx, uint8_t port_num, unsigned index, int* sysfs_type) noexcept;
int query_pkey(ibv_context* ctx, uint8_t port_num, int index, __be16* pkey) noexcept;
int get_pkey_index(ibv_context* ctx, uint8_t port_num, __be16 pkey) noexcept;
int get_async_event(ibv_context* ctx, ibv_async_event* event) noexcept;
void ack_async_event(ibv_async_event* event) noexcept;
// What an async event of type t names in ibv_async_event.element.
enum class EventElement { kQp, kCq, kSrq, kWq, kPortOrDevice };
EventElement event_element(ibv_event_type t) noexcept;
// Blocks until every async event handed out naming an object has been
// acknowledged (ibv_get_async_event(3): destroying an object waits for it).
void wait_for_async_acks(pthread_mutex_t& mu, pthread_cond_t& cond, const uint32_t& completed,
                         const uint32_t& reported) noexcept;

// Contexts sharing objects (emu_import.cc): the registry of open contexts by
// their cmd_fd's identity, ibv_import_device / ibv_import_pd / ibv_import_mr.
uint64_t file_id(int fd) noexcept;  // 0 (and errno) when fd is not open
void register_context(ShimContext* sc) noexcept;
void unregister_context(ShimContext* sc) noexcept;
ShimContext* context_of_fd(int cmd_fd) noexcept;  // an emulated context's cmd_fd or a dup of it
ibv_context* import_device(ShimContext* origin, int cmd_fd) noexcept;
ibv_pd* import_pd(ibv_context* ctx, uint32_t pd_handle) noexcept;
void unimport_pd(ibv_pd* pd) noexcept;
ibv_mr* import_mr(ibv_pd* pd, uint32_t mr_handle) noexcept;
void unimport_mr(ibv_mr* mr) noexcept;

// PD, MR, AH, completion channel (emu_resources.cc).
ibv_pd* alloc_pd(ibv_context* ctx) noexcept;
int dealloc_pd(ibv_pd* pd) noexcept;
// Thread and parent domains (emu_domains.cc). A parent domain stands for its
// PD wherever a PD is taken; dealloc_pd of one comes here.
ibv_td* alloc_td(ibv_context* ctx, ibv_td_init_attr* attr) noexcept;
int dealloc_td(ibv_td* td) noexcept;
ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) noexcept;
int dealloc_parent_domain(ibv_pd* pd) noexcept;
bool is_parent_domain(ibv_pd* pd) noexcept;
ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) noexcept;
int rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) noexcept;
int dereg_mr(ibv_mr* mr) noexcept;
// Memory windows (emu_mw.cc): ibv_alloc_mw, ibv_dealloc_mw, and ibv_bind_mw
// (type 1), which posts a BIND_MW work request as rdma-core's providers do.
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) noexcept;
int dealloc_mw(ibv_mw* mw) noexcept;
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) noexcept;
// The engine's view of a bind (ibv_send_wr.bind_mw, ibv_wr_bind_mw); false
// when mw or the MR is not an emulated object of ctx.
bool to_emu_bind(ibv_context* ctx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info& info,
                 emu::SendWr* out) noexcept;
ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr) noexcept;
int destroy_ah(ibv_ah* ah) noexcept;
int init_ah_from_wc(ibv_context* ctx, uint8_t port_num, const ibv_wc* wc, const ibv_grh* grh,
                    ibv_ah_attr* ah_attr) noexcept;
ibv_comp_channel* create_comp_channel(ibv_context* ctx) noexcept;
int destroy_comp_channel(ibv_comp_channel* channel) noexcept;

// CQ (emu_cq.cc).
ibv_cq* create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector) noexcept;
int resize_cq(ibv_cq* cq, int cqe) noexcept;
int destroy_cq(ibv_cq* cq) noexcept;
int get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) noexcept;
void ack_cq_events(ibv_cq* cq, unsigned nevents) noexcept;

// SRQ (emu_srq.cc).
ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) noexcept;
int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) noexcept;
int query_srq(ibv_srq* srq, ibv_srq_attr* attr) noexcept;
int destroy_srq(ibv_srq* srq) noexcept;

// XRC (emu_xrc.cc): domains, SRQs made with ibv_create_srq_ex, SRQ numbers.
ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr) noexcept;
int close_xrcd(ibv_xrcd* xrcd) noexcept;
ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr) noexcept;
int get_srq_num(ibv_srq* srq, uint32_t* srq_num) noexcept;

// QP (emu_qp.cc).
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) noexcept;
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) noexcept;
int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) noexcept;
int destroy_qp(ibv_qp* qp) noexcept;
// ibv_attach_mcast / ibv_detach_mcast (RoCE: the LID is ignored). A positive errno.
int attach_mcast(ibv_qp* qp, const ibv_gid* gid) noexcept;
int detach_mcast(ibv_qp* qp, const ibv_gid* gid) noexcept;
// Another handle on an XRC target QP (ibv_open_qp); destroy_qp closes it.
ibv_qp* open_qp(ibv_context* ctx, ibv_qp_open_attr* attr) noexcept;
ibv_qp_ex* qp_to_qp_ex(ibv_qp* qp) noexcept;

// Context ops, reached through ctx->ops and the verbs_context slots by
// libibverbs' inline wrappers (ibv_post_send, ibv_poll_cq, ibv_create_qp_ex ...).
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) noexcept;
// The device clock (completion timestamps): 1 GHz, so a cycle is a ns.
inline constexpr uint64_t kHcaCoreClockKhz = 1'000'000;
int query_rt_values(ibv_context* ctx, ibv_values_ex* values) noexcept;
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) noexcept;
int req_notify_cq(ibv_cq* cq, int solicited_only) noexcept;
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) noexcept;
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept;
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept;
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept;
ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) noexcept;
// Fills the ibv_wr_* slots of a new QP (emu_qp_ex.cc).
void fill_wr_ops(ibv_qp_ex& qpx) noexcept;
WrBatch* new_wr_batch(uint32_t max_send_wr, uint32_t max_send_sge) noexcept;
void delete_wr_batch(WrBatch* b) noexcept;

// The context's ops tables (ops_tables.cc): ibv_context_ops and the
// verbs_context extension slots, every one filled.
void fill_ops(verbs_context& vctx) noexcept;

}  // namespace rocelab::verbs_shim::emulated
