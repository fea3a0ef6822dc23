// Exported verbs on PDs, MRs, CQs, SRQs, QPs and AHs. Each one serves objects
// of emulated devices itself and hands everything else to the real
// libibverbs unchanged. Verbs this emulator does not implement (device
// memory, ECE, dmabuf) fail the way libibverbs fails for a provider without
// them.
#include <infiniband/verbs.h>

#include <cerrno>

#include "verbs_shim/device_table.h"
#include "verbs_shim/emulated.h"
#include "verbs_shim/real_verbs.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using rocelab::verbs_shim::is_emu;
namespace emulated = rocelab::verbs_shim::emulated;

namespace {
constexpr const char* k11 = "IBVERBS_1.1";

template <typename T>
T* null_errno(int e) {
  errno = e;
  return nullptr;
}
}  // namespace

// ---- PD -------------------------------------------------------------------
extern "C" ibv_pd* ibv_alloc_pd(ibv_context* context) noexcept {
  if (is_emu(context)) return emulated::alloc_pd(context);
  return ROCELAB_REAL(ibv_alloc_pd, k11)(context);
}

extern "C" int ibv_dealloc_pd(ibv_pd* pd) noexcept {
  if (is_emu(pd->context)) return emulated::dealloc_pd(pd);
  return ROCELAB_REAL(ibv_dealloc_pd, k11)(pd);
}

extern "C" ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) noexcept {
  if (is_emu(context)) return emulated::import_pd(context, pd_handle);
  if (auto real = ROCELAB_REAL(ibv_import_pd, "IBVERBS_1.10")) return real(context, pd_handle);
  return null_errno<ibv_pd>(EOPNOTSUPP);
}

extern "C" void ibv_unimport_pd(ibv_pd* pd) noexcept {
  if (is_emu(pd->context)) return emulated::unimport_pd(pd);
  if (auto real = ROCELAB_REAL(ibv_unimport_pd, "IBVERBS_1.10")) real(pd);
}

// ---- MR -------------------------------------------------------------------
extern "C" ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) noexcept {
  if (is_emu(pd->context))
    return emulated::reg_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                            static_cast<unsigned>(access));
  return ROCELAB_REAL(ibv_reg_mr, k11)(pd, addr, length, access);
}

extern "C" ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                   int access) noexcept {
  if (is_emu(pd->context))
    return emulated::reg_mr(pd, addr, length, iova, static_cast<unsigned>(access));
  if (auto real = ROCELAB_REAL(ibv_reg_mr_iova, "IBVERBS_1.7"))
    return real(pd, addr, length, iova, access);
  return null_errno<ibv_mr>(EOPNOTSUPP);
}

extern "C" ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                    unsigned int access) noexcept {
  if (is_emu(pd->context)) return emulated::reg_mr(pd, addr, length, iova, access);
  if (auto real = ROCELAB_REAL(ibv_reg_mr_iova2, "IBVERBS_1.8"))
    return real(pd, addr, length, iova, access);
  return null_errno<ibv_mr>(EOPNOTSUPP);
}

extern "C" ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                     int fd, int access) noexcept {
  if (is_emu(pd->context)) return null_errno<ibv_mr>(EOPNOTSUPP);  // no device memory here
  if (auto real = ROCELAB_REAL(ibv_reg_dmabuf_mr, "IBVERBS_1.12"))
    return real(pd, offset, length, iova, fd, access);
  return null_errno<ibv_mr>(EOPNOTSUPP);
}

extern "C" int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length,
                            int access) noexcept {
  if (is_emu(mr->context)) return emulated::rereg_mr(mr, flags, pd, addr, length, access);
  return ROCELAB_REAL(ibv_rereg_mr, k11)(mr, flags, pd, addr, length, access);
}

extern "C" int ibv_dereg_mr(ibv_mr* mr) noexcept {
  if (is_emu(mr->context)) return emulated::dereg_mr(mr);
  return ROCELAB_REAL(ibv_dereg_mr, k11)(mr);
}

extern "C" ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) noexcept {
  if (is_emu(pd->context)) return emulated::import_mr(pd, mr_handle);
  if (auto real = ROCELAB_REAL(ibv_import_mr, "IBVERBS_1.10")) return real(pd, mr_handle);
  return null_errno<ibv_mr>(EOPNOTSUPP);
}

extern "C" void ibv_unimport_mr(ibv_mr* mr) noexcept {
  if (is_emu(mr->context)) return emulated::unimport_mr(mr);
  if (auto real = ROCELAB_REAL(ibv_unimport_mr, "IBVERBS_1.10")) real(mr);
}

extern "C" ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) noexcept {
  if (is_emu(context)) return null_errno<ibv_dm>(EOPNOTSUPP);
  if (auto real = ROCELAB_REAL(ibv_import_dm, "IBVERBS_1.13")) return real(context, dm_handle);
  return null_errno<ibv_dm>(EOPNOTSUPP);
}

extern "C" void ibv_unimport_dm(ibv_dm* dm) noexcept {
  if (is_emu(dm->context)) return;
  if (auto real = ROCELAB_REAL(ibv_unimport_dm, "IBVERBS_1.13")) real(dm);
}

// ---- CQ -------------------------------------------------------------------
extern "C" ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                 ibv_comp_channel* channel, int comp_vector) noexcept {
  if (is_emu(context)) return emulated::create_cq(context, cqe, cq_context, channel, comp_vector);
  return ROCELAB_REAL(ibv_create_cq, k11)(context, cqe, cq_context, channel, comp_vector);
}

extern "C" int ibv_resize_cq(ibv_cq* cq, int cqe) noexcept {
  if (is_emu(cq->context)) return emulated::resize_cq(cq, cqe);
  return ROCELAB_REAL(ibv_resize_cq, k11)(cq, cqe);
}

extern "C" int ibv_destroy_cq(ibv_cq* cq) noexcept {
  if (is_emu(cq->context)) return emulated::destroy_cq(cq);
  return ROCELAB_REAL(ibv_destroy_cq, k11)(cq);
}

extern "C" int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) noexcept {
  if (is_emu(channel->context)) return emulated::get_cq_event(channel, cq, cq_context);
  return ROCELAB_REAL(ibv_get_cq_event, k11)(channel, cq, cq_context);
}

extern "C" void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) noexcept {
  if (is_emu(cq->context)) return emulated::ack_cq_events(cq, nevents);
  ROCELAB_REAL(ibv_ack_cq_events, k11)(cq, nevents);
}

// ---- SRQ ------------------------------------------------------------------
extern "C" ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) noexcept {
  if (is_emu(pd->context)) return emulated::create_srq(pd, srq_init_attr);
  return ROCELAB_REAL(ibv_create_srq, k11)(pd, srq_init_attr);
}

extern "C" int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) noexcept {
  if (is_emu(srq->context)) return emulated::modify_srq(srq, srq_attr, srq_attr_mask);
  return ROCELAB_REAL(ibv_modify_srq, k11)(srq, srq_attr, srq_attr_mask);
}

extern "C" int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) noexcept {
  if (is_emu(srq->context)) return emulated::query_srq(srq, srq_attr);
  return ROCELAB_REAL(ibv_query_srq, k11)(srq, srq_attr);
}

extern "C" int ibv_destroy_srq(ibv_srq* srq) noexcept {
  if (is_emu(srq->context)) return emulated::destroy_srq(srq);
  return ROCELAB_REAL(ibv_destroy_srq, k11)(srq);
}

// ---- QP -------------------------------------------------------------------
extern "C" ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) noexcept {
  if (is_emu(pd->context)) return emulated::create_qp(pd, qp_init_attr);
  return ROCELAB_REAL(ibv_create_qp, k11)(pd, qp_init_attr);
}

extern "C" int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) noexcept {
  if (is_emu(qp->context)) return emulated::modify_qp(qp, attr, attr_mask);
  return ROCELAB_REAL(ibv_modify_qp, k11)(qp, attr, attr_mask);
}

extern "C" int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                            ibv_qp_init_attr* init_attr) noexcept {
  if (is_emu(qp->context)) return emulated::query_qp(qp, attr, attr_mask, init_attr);
  return ROCELAB_REAL(ibv_query_qp, k11)(qp, attr, attr_mask, init_attr);
}

extern "C" int ibv_destroy_qp(ibv_qp* qp) noexcept {
  if (is_emu(qp->context)) return emulated::destroy_qp(qp);
  return ROCELAB_REAL(ibv_destroy_qp, k11)(qp);
}

extern "C" ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) noexcept {
  if (is_emu(qp->context)) return emulated::qp_to_qp_ex(qp);
  if (auto real = ROCELAB_REAL(ibv_qp_to_qp_ex, "IBVERBS_1.6")) return real(qp);
  return null_errno<ibv_qp_ex>(EOPNOTSUPP);
}

extern "C" int ibv_query_qp_data_in_order(ibv_qp* qp, enum ibv_wr_opcode op, uint32_t flags) noexcept {
  // 0: data may be written out of order (what libibverbs says without provider support).
  if (is_emu(qp->context)) return 0;
  if (auto real = ROCELAB_REAL(ibv_query_qp_data_in_order, "IBVERBS_1.14")) return real(qp, op, flags);
  return 0;
}

extern "C" int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) noexcept {
  if (is_emu(qp->context)) return EOPNOTSUPP;
  if (auto real = ROCELAB_REAL(ibv_query_ece, "IBVERBS_1.10")) return real(qp, ece);
  return EOPNOTSUPP;
}

extern "C" int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) noexcept {
  if (is_emu(qp->context)) return EOPNOTSUPP;
  if (auto real = ROCELAB_REAL(ibv_set_ece, "IBVERBS_1.10")) return real(qp, ece);
  return EOPNOTSUPP;
}

extern "C" int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) noexcept {
  if (is_emu(qp->context)) return emulated::attach_mcast(qp, gid);
  return ROCELAB_REAL(ibv_attach_mcast, k11)(qp, gid, lid);
}

extern "C" int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) noexcept {
  if (is_emu(qp->context)) return emulated::detach_mcast(qp, gid);
  return ROCELAB_REAL(ibv_detach_mcast, k11)(qp, gid, lid);
}

// ---- AH -------------------------------------------------------------------
extern "C" ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) noexcept {
  if (is_emu(pd->context)) return emulated::create_ah(pd, attr);
  return ROCELAB_REAL(ibv_create_ah, k11)(pd, attr);
}

extern "C" int ibv_destroy_ah(ibv_ah* ah) noexcept {
  if (is_emu(ah->context)) return emulated::destroy_ah(ah);
  return ROCELAB_REAL(ibv_destroy_ah, k11)(ah);
}

extern "C" int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc,
                                   ibv_grh* grh, ibv_ah_attr* ah_attr) noexcept {
  if (is_emu(context)) return emulated::init_ah_from_wc(context, port_num, wc, grh, ah_attr);
  return ROCELAB_REAL(ibv_init_ah_from_wc, k11)(context, port_num, wc, grh, ah_attr);
}

extern "C" ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh,
                                         uint8_t port_num) noexcept {
  if (is_emu(pd->context)) {
    ibv_ah_attr attr{};
    int rc = emulated::init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
    if (rc) return null_errno<ibv_ah>(rc);
    return emulated::create_ah(pd, &attr);
  }
  return ROCELAB_REAL(ibv_create_ah_from_wc, k11)(pd, wc, grh, port_num);
}

extern "C" int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr,
                                           uint8_t eth_mac[6], uint16_t* vid) noexcept {
  if (is_emu(context)) return EOPNOTSUPP;  // providers' helper; no L2 to resolve here
  return ROCELAB_REAL(ibv_resolve_eth_l2_from_gid, k11)(context, attr, eth_mac, vid);
}
