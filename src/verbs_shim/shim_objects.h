// The ibv_* objects the shim hands out for emulated devices. Each is a
// standard-layout struct whose first member is the libibverbs struct the
// program sees (so the two pointers convert both ways), followed by the
// engine object it mirrors. The engine object's user_context points back.
#pragma once
#include <infiniband/verbs.h>

#include <type_traits>

#include "emu/device.h"
#include "emu/objects.h"
#include "verbs_shim/device_table.h"

namespace rocelab::verbs_shim {

struct ShimContext {
  verbs_context vctx;  // ibv_context is its last member; sz covers every op slot
  EmuDevice* dev;
  emu::Device* engine;
  // What the kernel's uverbs file is to a real context: the identity of its
  // cmd_fd (a memfd's inode). A context imported from a dup of that fd has the
  // same one, and only such contexts may import each other's PDs and MRs.
  uint64_t file_id;
  // Its own async event queue on the engine (async_fd, ibv_get_async_event),
  // as each open uverbs file has one: the events of the QPs, CQs and SRQs
  // made on this context, and every port event.
  uint32_t async_queue;
};

struct ShimTd {
  ibv_td td;
  int parents;  // parent domains made with it (ibv_dealloc_td: EBUSY while any)
};

struct ShimPd {
  ibv_pd pd;
  emu::Pd* e;
  bool imported;  // made by ibv_import_pd: ibv_unimport_pd frees only this shell
  // A parent domain (ibv_alloc_parent_domain) is a shell around the engine PD
  // of `protection`, the ordinary PD it was made from, usable wherever a PD
  // is; ibv_dealloc_pd of it frees the shell alone.
  ShimPd* protection;
  ShimTd* td;
  ibv_parent_domain_init_attr attr;  // as given (allocators, pd_context)
  int parents;  // on an ordinary PD: its parent domains (dealloc: EBUSY while any)
};

struct ShimMr {
  ibv_mr mr;
  emu::Mr* e;
  bool imported;  // made by ibv_import_mr
};

struct ShimMw {
  ibv_mw mw;
  emu::Mw* e;
};

struct ShimChannel {
  ibv_comp_channel ch;
  emu::CompChannel* e;
};

struct ShimCq {
  ibv_cq_ex cqx;  // every CQ is extended: ibv_cq is its prefix
  emu::Cq* e;
  emu::Wc cur;    // the completion ibv_start_poll/ibv_next_poll made current
  int64_t wall_offset_ns;  // CLOCK_REALTIME minus the device clock, at creation
  uint32_t async_reported;  // async events handed out naming it (cqx.mutex)
};

struct ShimSrq {
  ibv_srq srq;
  emu::Srq* e;
  uint32_t async_reported;  // async events handed out naming it (srq.mutex)
};

// One ibv_open_xrcd: each call gets its own, several may share an engine domain.
struct ShimXrcd {
  ibv_xrcd xrcd;
  emu::Xrcd* e;
};

struct WrBatch;  // ibv_wr_* work requests between wr_start and wr_complete (emu_qp_ex.cc)

struct ShimQp {
  ibv_qp_ex qpx;  // every QP is extended: ibv_qp is its prefix
  emu::Qp* e;
  WrBatch* batch;  // owned; created with the QP
  // XRC target: the handles on one engine QP (ibv_create_qp_ex and each
  // ibv_open_qp) form a ring; the engine QP's user context is one of them.
  ShimQp* ring_next;
  ShimQp* ring_prev;
  uint32_t async_reported;  // async events handed out naming this handle (qp mutex)
};

struct ShimAh {
  ibv_ah ah;
  emu::Ah* e;
};

template <typename T>
constexpr bool kAbiMirror = std::is_standard_layout_v<T>;
static_assert(kAbiMirror<ShimContext> && kAbiMirror<ShimPd> && kAbiMirror<ShimMr> && kAbiMirror<ShimMw> &&
              kAbiMirror<ShimChannel> && kAbiMirror<ShimCq> && kAbiMirror<ShimSrq> &&
              kAbiMirror<ShimQp> && kAbiMirror<ShimAh> && kAbiMirror<ShimXrcd> && kAbiMirror<ShimTd>);

inline ShimContext* shim(ibv_context* c) {
  return reinterpret_cast<ShimContext*>(verbs_get_ctx(c));
}
inline ShimPd* shim(ibv_pd* p) { return reinterpret_cast<ShimPd*>(p); }
inline ShimTd* shim(ibv_td* t) { return reinterpret_cast<ShimTd*>(t); }
inline ShimMr* shim(ibv_mr* m) { return reinterpret_cast<ShimMr*>(m); }
inline ShimMw* shim(ibv_mw* m) { return reinterpret_cast<ShimMw*>(m); }
inline ShimChannel* shim(ibv_comp_channel* c) { return reinterpret_cast<ShimChannel*>(c); }
inline ShimCq* shim(ibv_cq* c) { return reinterpret_cast<ShimCq*>(c); }
inline ShimCq* shim(ibv_cq_ex* c) { return reinterpret_cast<ShimCq*>(c); }
inline ShimSrq* shim(ibv_srq* s) { return reinterpret_cast<ShimSrq*>(s); }
inline ShimQp* shim(ibv_qp* q) { return reinterpret_cast<ShimQp*>(q); }
inline ShimQp* shim(ibv_qp_ex* q) { return reinterpret_cast<ShimQp*>(q); }
inline ShimAh* shim(ibv_ah* a) { return reinterpret_cast<ShimAh*>(a); }
inline ShimXrcd* shim(ibv_xrcd* x) { return reinterpret_cast<ShimXrcd*>(x); }

inline emu::Device& engine_of(ibv_context* c) { return *shim(c)->engine; }

// Sets errno to ec's value and returns nullptr (the create_* convention).
template <typename T>
T* fail_null(std::error_code ec) {
  errno = ec.value();
  return nullptr;
}

}  // namespace rocelab::verbs_shim
