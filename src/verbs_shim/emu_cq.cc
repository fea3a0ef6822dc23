// Emulated CQs and completion channels: create (plain and extended), poll
// (ibv_poll_cq and the ibv_start_poll family), notify, resize, destroy.
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "verbs_shim/convert.h"
#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim::emulated {
namespace {

constexpr int kPollChunk = 16;  // completions converted per engine call

int64_t wall_clock_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// ---- ibv_cq_ex accessors: read the completion start/next_poll made current --
int start_poll(ibv_cq_ex* cqx, ibv_poll_cq_attr* attr) noexcept {
  if (attr && attr->comp_mask != 0) return EINVAL;
  ShimCq* c = shim(cqx);
  if (c->e->poll({&c->cur, 1}) == 0) return ENOENT;
  cqx->wr_id = c->cur.wr_id;
  cqx->status = static_cast<ibv_wc_status>(c->cur.status);
  return 0;
}
int next_poll(ibv_cq_ex* cqx) noexcept { return start_poll(cqx, nullptr); }
void end_poll(ibv_cq_ex*) noexcept {}
ibv_wc_opcode read_opcode(ibv_cq_ex* c) noexcept { return static_cast<ibv_wc_opcode>(shim(c)->cur.opcode); }
uint32_t read_vendor_err(ibv_cq_ex* c) noexcept { return shim(c)->cur.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) noexcept { return shim(c)->cur.byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) noexcept { return shim(c)->cur.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* c) noexcept { return shim(c)->cur.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) noexcept { return shim(c)->cur.src_qp; }
unsigned read_wc_flags(ibv_cq_ex* c) noexcept { return shim(c)->cur.wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) noexcept { return shim(c)->cur.slid; }
uint8_t read_sl(ibv_cq_ex* c) noexcept { return shim(c)->cur.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) noexcept { return shim(c)->cur.dlid_path_bits; }
// The device clock runs at 1 GHz (hca_core_clock 1,000,000 kHz): a cycle is a ns.
uint64_t read_completion_ts(ibv_cq_ex* c) noexcept { return shim(c)->cur.timestamp_ns; }
uint64_t read_completion_wallclock_ns(ibv_cq_ex* c) noexcept {
  return shim(c)->cur.timestamp_ns + static_cast<uint64_t>(shim(c)->wall_offset_ns);
}
// The customer VLAN of the packet and the tag of the flow-steering rule that
// took it, as a NIC reports them (mlx5): the emulated link carries no VLAN
// tag (UDP sockets below the device) and no steering rule exists, so 0.
uint16_t read_cvlan(ibv_cq_ex*) noexcept { return 0; }
uint32_t read_flow_tag(ibv_cq_ex*) noexcept { return 0; }
// Only reachable with IBV_WC_EX_WITH_TM_INFO, which create_cq_ex refuses: the
// device has no tag matching (query_device_ex: tm_caps all zero).
void read_tm_info(ibv_cq_ex*, ibv_wc_tm_info* info) noexcept { *info = ibv_wc_tm_info{}; }

// The wc_flags create_cq_ex accepts: every field of a NIC's extended CQ but
// tag matching's.
constexpr uint64_t kSupportedWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK |
    IBV_WC_EX_WITH_CVLAN | IBV_WC_EX_WITH_FLOW_TAG;

ShimCq* make_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                int comp_vector) {
  if (cqe <= 0 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  emu::CompChannel* ch = channel ? shim(channel)->e : nullptr;
  auto cq = engine_of(ctx).create_cq(cqe, ch, comp_vector);
  if (!cq) return fail_null<ShimCq>(cq.error());
  auto* c = new (std::nothrow) ShimCq{};
  if (!c) {
    (void)engine_of(ctx).destroy_cq(*cq);
    errno = ENOMEM;
    return nullptr;
  }
  c->e = *cq;
  c->e->set_user_context(c);
  engine_of(ctx).set_async_queue(c->e, shim(ctx)->async_queue);
  c->wall_offset_ns = wall_clock_ns() - static_cast<int64_t>(engine_of(ctx).clock_ns());
  ibv_cq_ex& x = c->cqx;
  x.context = ctx;
  x.channel = channel;
  x.cq_context = cq_context;
  x.cqe = c->e->capacity();
  pthread_mutex_init(&x.mutex, nullptr);
  pthread_cond_init(&x.cond, nullptr);
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_byte_len = read_byte_len;
  x.read_imm_data = read_imm_data;
  x.read_qp_num = read_qp_num;
  x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  x.read_slid = read_slid;
  x.read_sl = read_sl;
  x.read_dlid_path_bits = read_dlid_path_bits;
  x.read_completion_ts = read_completion_ts;
  x.read_cvlan = read_cvlan;
  x.read_flow_tag = read_flow_tag;
  x.read_tm_info = read_tm_info;
  x.read_completion_wallclock_ns = read_completion_wallclock_ns;
  if (channel) ++channel->refcnt;
  return c;
}

}  // namespace

ibv_cq* create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector) noexcept {
  ShimCq* c = make_cq(ctx, cqe, cq_context, channel, comp_vector);
  return c ? ibv_cq_ex_to_cq(&c->cqx) : nullptr;
}

ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) noexcept {
  constexpr uint32_t kKnownMask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
  if ((attr->comp_mask & ~kKnownMask) || (attr->wc_flags & ~kSupportedWcFlags)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // SINGLE_THREADED is only a hint; no other flag exists here.
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // The PD of a CQ is a parent domain (its thread domain and allocators), as mlx5 wants it.
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (!is_parent_domain(attr->parent_domain) || attr->parent_domain->context != ctx)) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->cqe > static_cast<uint32_t>(INT32_MAX)) {
    errno = EINVAL;
    return nullptr;
  }
  ShimCq* c = make_cq(ctx, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                      static_cast<int>(attr->comp_vector));
  return c ? &c->cqx : nullptr;
}

int resize_cq(ibv_cq* cq, int cqe) noexcept {
  // Grows or shrinks, keeping every completion held (EINVAL below that count).
  if (std::error_code ec = shim(cq)->e->resize(cqe)) return ec.value();
  cq->cqe = shim(cq)->e->capacity();
  return 0;
}

int destroy_cq(ibv_cq* cq) noexcept {
  ShimCq* c = shim(cq);
  if (std::error_code ec = engine_of(cq->context).destroy_cq(c->e)) return ec.value();
  wait_for_async_acks(cq->mutex, cq->cond, cq->async_events_completed, c->async_reported);
  if (cq->channel) --cq->channel->refcnt;
  pthread_cond_destroy(&cq->cond);
  pthread_mutex_destroy(&cq->mutex);
  delete c;
  return 0;
}

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) noexcept {
  if (num_entries < 0) return -EINVAL;
  emu::Cq* e = shim(cq)->e;
  emu::Wc buf[kPollChunk];
  int done = 0;
  while (done < num_entries) {
    int want = std::min(num_entries - done, kPollChunk);
    int got = e->poll({buf, static_cast<size_t>(want)});
    for (int i = 0; i < got; ++i) to_ibv(buf[i], &wc[done + i]);
    done += got;
    if (got < want) break;
  }
  return done;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) noexcept {
  return shim(cq)->e->req_notify(solicited_only != 0).value();
}

int get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) noexcept {
  emu::Cq* fired = nullptr;
  if (std::error_code ec = shim(channel)->e->get_event(&fired)) {
    errno = ec.value();
    return -1;
  }
  ShimCq* c = static_cast<ShimCq*>(fired->user_context());
  *cq = ibv_cq_ex_to_cq(&c->cqx);
  *cq_context = c->cqx.cq_context;
  return 0;
}

void ack_cq_events(ibv_cq* cq, unsigned nevents) noexcept {
  shim(cq)->e->ack_events(nevents);
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_mutex_unlock(&cq->mutex);
}

}  // namespace rocelab::verbs_shim::emulated
