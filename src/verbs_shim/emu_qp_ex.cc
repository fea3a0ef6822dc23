// The ibv_wr_* post API (ibv_qp_ex): wr_start opens a batch, each wr_<op>
// appends a work request (taking wr_id and wr_flags from the ibv_qp_ex at that
// moment), wr_set_* complete the last one, wr_complete posts the batch and
// wr_abort drops it. Storage is reserved at QP creation; inline data is copied
// when it is set, as the API requires.
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim {

struct WrBatch {
  struct Entry {
    emu::SendWr wr;
    size_t sge_begin = 0, sge_count = 0;
    bool inline_data = false;  // sges index inline_buf, not memory
  };
  std::vector<Entry> entries;
  std::vector<emu::Sge> sges;
  std::vector<std::byte> inline_buf;
  std::vector<emu::SendWr> ready;  // wr_complete's span
  std::vector<emu::Sge> ready_sges;
  bool open = false;
  int error = 0;  // first error of the batch, reported by wr_complete
};

namespace emulated {
namespace {

WrBatch& batch(ibv_qp_ex* qpx) { return *shim(qpx)->batch; }

void add(ibv_qp_ex* qpx, emu::WrOpcode op) {
  WrBatch& b = batch(qpx);
  if (!b.open) {
    b.error = EINVAL;  // wr_<op> outside wr_start/wr_complete
    return;
  }
  WrBatch::Entry e;
  e.wr.wr_id = qpx->wr_id;
  e.wr.send_flags = qpx->wr_flags;
  e.wr.opcode = op;
  e.sge_begin = b.sges.size();
  b.entries.push_back(e);
}

WrBatch::Entry* last(ibv_qp_ex* qpx) {
  WrBatch& b = batch(qpx);
  if (b.entries.empty()) {
    b.error = EINVAL;  // wr_set_* before any wr_<op>
    return nullptr;
  }
  return &b.entries.back();
}

void wr_start(ibv_qp_ex* qpx) noexcept {
  WrBatch& b = batch(qpx);
  b.entries.clear();
  b.sges.clear();
  b.inline_buf.clear();
  b.open = true;
  b.error = 0;
}

void wr_send(ibv_qp_ex* qpx) noexcept { add(qpx, emu::WrOpcode::kSend); }

void wr_send_imm(ibv_qp_ex* qpx, __be32 imm) noexcept {
  add(qpx, emu::WrOpcode::kSendWithImm);
  if (auto* e = last(qpx)) e->wr.imm_data = imm;
}

void wr_send_inv(ibv_qp_ex* qpx, uint32_t rkey) noexcept {
  add(qpx, emu::WrOpcode::kSendWithInv);
  if (auto* e = last(qpx)) e->wr.invalidate_rkey = rkey;
}

void wr_rdma_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr) noexcept {
  add(qpx, emu::WrOpcode::kRdmaWrite);
  if (auto* e = last(qpx)) e->wr.rdma = {remote_addr, rkey};
}

void wr_rdma_write_imm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, __be32 imm) noexcept {
  add(qpx, emu::WrOpcode::kRdmaWriteWithImm);
  if (auto* e = last(qpx)) {
    e->wr.rdma = {remote_addr, rkey};
    e->wr.imm_data = imm;
  }
}

void wr_rdma_read(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr) noexcept {
  add(qpx, emu::WrOpcode::kRdmaRead);
  if (auto* e = last(qpx)) e->wr.rdma = {remote_addr, rkey};
}

void wr_atomic_cmp_swp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                       uint64_t swap) noexcept {
  add(qpx, emu::WrOpcode::kAtomicCmpAndSwp);
  if (auto* e = last(qpx)) {
    e->wr.atomic.remote_addr = remote_addr;
    e->wr.atomic.compare_add = compare;
    e->wr.atomic.swap = swap;
    e->wr.atomic.rkey = rkey;
  }
}

void wr_atomic_fetch_add(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, uint64_t add_v) noexcept {
  add(qpx, emu::WrOpcode::kAtomicFetchAndAdd);
  if (auto* e = last(qpx)) {
    e->wr.atomic.remote_addr = remote_addr;
    e->wr.atomic.compare_add = add_v;
    e->wr.atomic.rkey = rkey;
  }
}

// Memory windows (type 2 through ibv_qp_ex; the engine checks the bind when it runs).
void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) noexcept {
  add(qpx, emu::WrOpcode::kBindMw);
  auto* e = last(qpx);
  if (!e) return;
  if (!mw || !info || !to_emu_bind(qpx->qp_base.context, mw, rkey, *info, &e->wr)) batch(qpx).error = EINVAL;
}
void wr_local_inv(ibv_qp_ex* qpx, uint32_t invalidate_rkey) noexcept {
  add(qpx, emu::WrOpcode::kLocalInv);
  if (auto* e = last(qpx)) e->wr.invalidate_rkey = invalidate_rkey;
}

// Not emulated: TSO, atomic write. The batch fails at wr_complete with EOPNOTSUPP.
void wr_send_tso(ibv_qp_ex* qpx, void*, uint16_t, uint16_t) noexcept { batch(qpx).error = EOPNOTSUPP; }
void wr_atomic_write(ibv_qp_ex* qpx, uint32_t, uint64_t, const void*) noexcept {
  batch(qpx).error = EOPNOTSUPP;
}
void wr_set_xrc_srqn(ibv_qp_ex* qpx, uint32_t remote_srqn) noexcept {
  if (auto* e = last(qpx)) e->wr.xrc_remote_srqn = remote_srqn;
}

void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) noexcept {
  if (auto* e = last(qpx)) {
    e->wr.ud.ah = ah ? shim(ah)->e : nullptr;
    e->wr.ud.remote_qpn = remote_qpn;
    e->wr.ud.remote_qkey = remote_qkey;
  }
}

void wr_set_sge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) noexcept {
  if (auto* e = last(qpx)) {
    WrBatch& b = batch(qpx);
    e->sge_begin = b.sges.size();
    e->sge_count = 1;
    e->inline_data = false;
    b.sges.push_back(emu::Sge{addr, length, lkey});
  }
}

void wr_set_sge_list(ibv_qp_ex* qpx, size_t num_sge, const ibv_sge* list) noexcept {
  if (auto* e = last(qpx)) {
    WrBatch& b = batch(qpx);
    e->sge_begin = b.sges.size();
    e->sge_count = num_sge;
    e->inline_data = false;
    for (size_t i = 0; i < num_sge; ++i) b.sges.push_back(emu::Sge{list[i].addr, list[i].length, list[i].lkey});
  }
}

void wr_set_inline_data_list(ibv_qp_ex* qpx, size_t num_buf, const ibv_data_buf* bufs) noexcept {
  auto* e = last(qpx);
  if (!e) return;
  WrBatch& b = batch(qpx);
  e->sge_begin = b.sges.size();
  e->sge_count = num_buf;
  e->inline_data = true;
  e->wr.send_flags |= emu::send_flags::kInline;
  for (size_t i = 0; i < num_buf; ++i) {
    size_t off = b.inline_buf.size();
    const auto* p = static_cast<const std::byte*>(bufs[i].addr);
    b.inline_buf.insert(b.inline_buf.end(), p, p + bufs[i].length);
    b.sges.push_back(emu::Sge{off, static_cast<uint32_t>(bufs[i].length), 0});  // addr: offset
  }
}

void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, size_t length) noexcept {
  ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qpx, 1, &buf);
}

int wr_complete(ibv_qp_ex* qpx) noexcept {
  WrBatch& b = batch(qpx);
  if (!b.open) return EINVAL;
  b.open = false;
  if (b.error) return b.error;
  // Spans are made only now: the vectors may have grown while the batch was built.
  b.ready.clear();
  b.ready_sges.assign(b.sges.begin(), b.sges.end());
  const auto base = reinterpret_cast<uintptr_t>(b.inline_buf.data());
  for (WrBatch::Entry& e : b.entries) {
    for (size_t i = 0; i < e.sge_count && e.inline_data; ++i) b.ready_sges[e.sge_begin + i].addr += base;
    e.wr.sg_list = std::span<const emu::Sge>(b.ready_sges.data() + e.sge_begin, e.sge_count);
    b.ready.push_back(e.wr);
  }
  size_t posted = 0;
  std::error_code ec = shim(qpx)->e->post_send(b.ready, &posted);
  return ec.value();
}

void wr_abort(ibv_qp_ex* qpx) noexcept {
  WrBatch& b = batch(qpx);
  b.open = false;
  b.entries.clear();
}

}  // namespace

WrBatch* new_wr_batch(uint32_t max_send_wr, uint32_t max_send_sge) noexcept {
  auto* b = new (std::nothrow) WrBatch;
  if (!b) return nullptr;
  try {
    b->entries.reserve(max_send_wr);
    b->ready.reserve(max_send_wr);
    b->sges.reserve(static_cast<size_t>(max_send_wr) * (max_send_sge ? max_send_sge : 1));
    b->ready_sges.reserve(b->sges.capacity());
  } catch (const std::bad_alloc&) {
    delete b;
    return nullptr;
  }
  return b;
}

void delete_wr_batch(WrBatch* b) noexcept { delete b; }

void fill_wr_ops(ibv_qp_ex& x) noexcept {
  x.comp_mask = 0;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_atomic_write = wr_atomic_write;
}

}  // namespace emulated
}  // namespace rocelab::verbs_shim
