// What the verbs shim tells its sibling, the rdma_cm shim (src/rdmacm_shim,
// librocelab_rdmacm.so): the engine behind an emulated ibv_context. Both
// libraries are preloaded by `rocelab run`; the verbs shim exports these
// functions at their own version node (ROCELAB_VERBS_PRIVATE_1, libibverbs.map),
// which no libibverbs has, so no program binds to it by accident.
#pragma once
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
// The emu::Device (as void*) behind ctx when ctx is an emulated context of
// this process (ShimContext::engine), else nullptr (a real device's context,
// or nullptr). The device lives while the context is open.
void* rocelab_verbs_engine(ibv_context* ctx) noexcept;
// The rdma_cm Service IDs this process listens on at the address of engine
// (an emu::Device from rocelab_verbs_engine): REQs for them are steered to
// this process among those that share the address (src/host).
void rocelab_verbs_set_services(void* engine, const uint64_t* service_ids, size_t n) noexcept;
// 1 when another process sharing the address of engine listens on the rdma_cm
// Service ID service_id (one host listens on a port once), else 0.
int rocelab_verbs_service_taken(void* engine, uint64_t service_id) noexcept;
}
