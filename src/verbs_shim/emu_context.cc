// Emulated devices and contexts: open/close, queries, async events.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "emu/transport/link_mtu.h"
#include "verbs_shim/convert.h"
#include "verbs_shim/emulated.h"
#include "verbs_shim/shim_objects.h"

namespace rocelab::verbs_shim::emulated {
namespace {

// libibverbs checks the port before asking the provider; so do we.
bool valid_port(uint32_t port_num) { return port_num == emu::kPortNum; }

}  // namespace

// A context on dev whose command fd is cmd_fd (owned: closed with the context).
ibv_context* make_context(EmuDevice& dev, int cmd_fd) noexcept {
  const ShimConfig& cfg = DeviceTable::get().config();
  const uint64_t id = file_id(cmd_fd);
  if (id == 0) return nullptr;  // errno from fstat
  auto engine = dev.runtime.acquire(dev.cfg, cfg);
  if (!engine) return fail_null<ibv_context>(engine.error());
  auto* sc = new (std::nothrow) ShimContext{};
  if (!sc) {
    dev.runtime.release();
    errno = ENOMEM;
    return nullptr;
  }
  sc->dev = &dev;
  sc->engine = *engine;
  sc->file_id = id;
  auto queue = sc->engine->open_async_queue();
  if (!queue) {
    delete sc;
    dev.runtime.release();
    return fail_null<ibv_context>(queue.error());
  }
  sc->async_queue = *queue;
  fill_ops(sc->vctx);
  sc->vctx.sz = sizeof(verbs_context);
  ibv_context& ctx = sc->vctx.context;
  ctx.device = &dev.abi.ibdev;
  ctx.cmd_fd = cmd_fd;  // a real fd: programs poll/fcntl/dup it; nothing is ever written
  ctx.async_fd = sc->engine->async_fd(sc->async_queue);
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  register_context(sc);
  return &ctx;
}

ibv_context* open_device(EmuDevice& dev) noexcept {
  // A memfd: a real fd with an inode of its own, so that a dup of it (for
  // ibv_import_device) can be told apart from every other context's.
  const int cmd_fd = memfd_create("rocelab-context", MFD_CLOEXEC);
  if (cmd_fd < 0) return nullptr;
  ibv_context* ctx = make_context(dev, cmd_fd);
  if (!ctx) {
    const int e = errno;
    close(cmd_fd);
    errno = e;
  }
  return ctx;
}

int close_device(ibv_context* ctx) noexcept {
  ShimContext* sc = shim(ctx);
  unregister_context(sc);
  (void)sc->engine->close_async_queue(sc->async_queue);
  close(ctx->cmd_fd);
  pthread_mutex_destroy(&ctx->mutex);
  EmuDevice* dev = sc->dev;
  delete sc;
  dev->runtime.release();
  return 0;
}

int query_rt_values(ibv_context* ctx, ibv_values_ex* values) noexcept {
  if (values->comp_mask & ~static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) return EOPNOTSUPP;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    const uint64_t ns = engine_of(ctx).clock_ns();
    values->raw_clock.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    values->raw_clock.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  return 0;
}

uint64_t device_guid(EmuDevice& dev) noexcept {
  auto ip = dev.runtime.address(dev.cfg, DeviceTable::get().config());
  return ip ? guid_for(*ip) : 0;
}

int query_device(ibv_context* ctx, ibv_device_attr* attr) noexcept {
  to_ibv(engine_of(ctx).query_device(), attr);
  return 0;
}

int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) noexcept {
  if (input && input->comp_mask != 0) return EINVAL;
  if (attr_size < sizeof(attr->orig_attr)) return EINVAL;
  ibv_device_attr_ex full{};
  to_ibv(engine_of(ctx).query_device(), &full.orig_attr);
  full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
  // Completion timestamps count the device clock in ns: 1 GHz, 64 bits.
  full.completion_timestamp_mask = UINT64_MAX;
  full.hca_core_clock = kHcaCoreClockKhz;
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  if (attr_size > sizeof full)
    std::memset(reinterpret_cast<char*>(attr) + sizeof full, 0, attr_size - sizeof full);
  return 0;
}

int query_port(ibv_context* ctx, uint8_t port_num, ibv_port_attr* attr, size_t attr_len) noexcept {
  emu::PortAttr pa;
  if (std::error_code ec = engine_of(ctx).query_port(port_num, &pa)) return ec.value();
  ibv_port_attr full;
  to_ibv(pa, &full);
  std::memset(attr, 0, attr_len);
  std::memcpy(attr, &full, std::min(attr_len, sizeof full));
  return 0;
}

int query_gid(ibv_context* ctx, uint8_t port_num, int index, ibv_gid* gid) noexcept {
  emu::Gid g;
  if (std::error_code ec = engine_of(ctx).query_gid(port_num, index, &g)) {
    errno = ec.value();
    return -1;  // ibv_query_gid: -1 and errno
  }
  std::memcpy(gid->raw, g.data(), sizeof gid->raw);
  return 0;
}

int query_gid_ex(ibv_context* ctx, uint32_t port_num, uint32_t index, ibv_gid_entry* entry,
                 uint32_t flags, size_t entry_size) noexcept {
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (!valid_port(port_num)) return EINVAL;
  emu::Device& engine = engine_of(ctx);
  emu::Gid g;
  emu::GidType type;
  if (std::error_code ec = engine.query_gid(static_cast<uint8_t>(port_num), static_cast<int>(index), &g))
    return ec.value();
  if (std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; })) return ENODATA;
  if (std::error_code ec =
          engine.query_gid_type(static_cast<uint8_t>(port_num), static_cast<int>(index), &type))
    return ec.value();
  std::memset(entry, 0, entry_size);
  std::memcpy(entry->gid.raw, g.data(), sizeof entry->gid.raw);
  entry->gid_index = index;
  entry->port_num = port_num;
  entry->gid_type = static_cast<uint32_t>(type);
  // The interface under the device's address, as rxe's GIDs name their netdev
  // (0 for an address on no interface).
  if (auto dev = emu::netdev_of(engine.address())) entry->ndev_ifindex = dev->ifindex;
  return 0;
}

ssize_t query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max_entries,
                        uint32_t flags, size_t entry_size) noexcept {
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  int len = engine_of(ctx).gid_table_len();
  size_t n = 0;
  for (int i = 0; i < len; ++i) {
    ibv_gid_entry e;
    int rc = query_gid_ex(ctx, emu::kPortNum, static_cast<uint32_t>(i), &e, 0, sizeof e);
    if (rc == ENODATA) continue;
    if (rc) return -rc;
    if (n == max_entries) return -EINVAL;  // libibverbs: the array is too small
    std::memcpy(reinterpret_cast<char*>(entries) + n * entry_size, &e, sizeof e);
    ++n;
  }
  return static_cast<ssize_t>(n);
}

int query_gid_type(ibv_context* ctx, uint8_t port_num, unsigned index, int* sysfs_type) noexcept {
  emu::GidType type;
  if (std::error_code ec = engine_of(ctx).query_gid_type(port_num, static_cast<int>(index), &type)) {
    errno = ec.value();
    return -1;
  }
  // sysfs spelling: 0 "IB/RoCE v1", 1 "RoCE v2".
  *sysfs_type = type == emu::GidType::kRoceV2 ? 1 : 0;
  return 0;
}

int query_pkey(ibv_context* ctx, uint8_t port_num, int index, __be16* pkey) noexcept {
  uint16_t p;
  if (std::error_code ec = engine_of(ctx).query_pkey(port_num, index, &p)) {
    errno = ec.value();
    return -1;
  }
  *pkey = htobe16(p);
  return 0;
}

int get_pkey_index(ibv_context* ctx, uint8_t port_num, __be16 pkey) noexcept {
  emu::PortAttr pa;
  if (std::error_code ec = engine_of(ctx).query_port(port_num, &pa)) return -ec.value();
  for (int i = 0; i < pa.pkey_tbl_len; ++i) {
    uint16_t p;
    if (!engine_of(ctx).query_pkey(port_num, i, &p) && htobe16(p) == pkey) return i;
  }
  return -ENOENT;
}

namespace {

// One more event handed out naming an object (its ibv_* mutex guards the count).
void count_reported(pthread_mutex_t& mu, uint32_t& reported) {
  pthread_mutex_lock(&mu);
  ++reported;
  pthread_mutex_unlock(&mu);
}

// One more acknowledged: a destroy waiting for it may go on.
void count_acked(pthread_mutex_t& mu, pthread_cond_t& cond, uint32_t& completed) {
  pthread_mutex_lock(&mu);
  ++completed;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&mu);
}

}  // namespace

// The object an event names is resolved, and the event counted on it, while
// the engine's queue is locked (Device::get_async_event's `taken`): a destroy
// of that object cannot slip in between, and from then on it waits for the
// program's ibv_ack_async_event (wait_for_async_acks) as libibverbs' does.
int get_async_event(ibv_context* ctx, ibv_async_event* event) noexcept {
  emu::AsyncEvent ae;
  ibv_async_event out{};
  auto taken = [&out](const emu::AsyncEvent& e) {
    out.event_type = static_cast<ibv_event_type>(e.event_type);
    if (e.qp) {
      auto* q = static_cast<ShimQp*>(e.qp->user_context());
      out.element.qp = &q->qpx.qp_base;
      count_reported(q->qpx.qp_base.mutex, q->async_reported);
    } else if (e.cq) {
      auto* c = static_cast<ShimCq*>(e.cq->user_context());
      out.element.cq = ibv_cq_ex_to_cq(&c->cqx);
      count_reported(c->cqx.mutex, c->async_reported);
    } else if (e.srq) {
      auto* s = static_cast<ShimSrq*>(e.srq->user_context());
      out.element.srq = &s->srq;
      count_reported(s->srq.mutex, s->async_reported);
    } else {
      out.element.port_num = e.port_num;
    }
  };
  if (std::error_code ec = engine_of(ctx).get_async_event(&ae, taken, shim(ctx)->async_queue)) {
    errno = ec.value();
    return -1;
  }
  *event = out;
  return 0;
}

EventElement event_element(ibv_event_type t) noexcept {
  switch (t) {
    case IBV_EVENT_CQ_ERR:
      return EventElement::kCq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return EventElement::kQp;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return EventElement::kSrq;
    case IBV_EVENT_WQ_FATAL:
      return EventElement::kWq;
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
      break;
  }
  return EventElement::kPortOrDevice;
}

void ack_async_event(ibv_async_event* event) noexcept {
  switch (event_element(event->event_type)) {
    case EventElement::kCq: {
      ibv_cq* cq = event->element.cq;
      count_acked(cq->mutex, cq->cond, cq->async_events_completed);
      break;
    }
    case EventElement::kSrq: {
      ibv_srq* srq = event->element.srq;
      count_acked(srq->mutex, srq->cond, srq->events_completed);
      break;
    }
    case EventElement::kQp: {
      ibv_qp* qp = event->element.qp;
      count_acked(qp->mutex, qp->cond, qp->events_completed);
      break;
    }
    case EventElement::kWq:  // no WQs here
    case EventElement::kPortOrDevice:
      break;  // no object to count on
  }
}

void wait_for_async_acks(pthread_mutex_t& mu, pthread_cond_t& cond, const uint32_t& completed,
                         const uint32_t& reported) noexcept {
  pthread_mutex_lock(&mu);
  while (completed != reported) pthread_cond_wait(&cond, &mu);
  pthread_mutex_unlock(&mu);
}

}  // namespace rocelab::verbs_shim::emulated
