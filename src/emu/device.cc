// The device: attributes (all in one place), object lifetimes, progress and the
// helper thread, async events.
#include "emu/device.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

// Soft-RoCE's device and port attributes (older rxe_param.h), the values the
// usual tools expect. Only the identity (GUID, vendor) is ours.
void fill_attrs(Engine& e) {
  const auto mac = wire::mac_for(e.transport->local_address());
  // EUI-64 from the MAC, universal/local bit inverted (as rxe derives it from the netdev).
  uint64_t guid = 0;
  const uint8_t eui[8] = {static_cast<uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xFF, 0xFE,
                          mac[3], mac[4], mac[5]};
  for (uint8_t b : eui) guid = (guid << 8) | b;

  DeviceAttr& d = e.dattr;
  d.fw_ver = "0.1.0";
  d.node_guid = d.sys_image_guid = guid;
  d.max_mr_size = ~uint64_t{0};
  d.page_size_cap = 0xfffff000;
  d.vendor_id = kVendorId;
  d.vendor_part_id = kVendorPartId;
  d.hw_ver = 0;
  d.max_qp = 0x10000;
  d.max_qp_wr = 0x4000;
  d.device_cap_flags = device_cap::kBadPkeyCntr | device_cap::kBadQkeyCntr |
                       device_cap::kCurrQpStateMod | device_cap::kShutdownPort |
                       device_cap::kPortActiveEvent | device_cap::kSysImageGuid |
                       device_cap::kRcRnrNakGen | device_cap::kNNotifyCq |
                       device_cap::kMemWindow | device_cap::kMemWindowType2B |  // as rxe
                       device_cap::kXrc;  // rxe has no XRC; rocelab does
  d.max_sge = 32;
  d.max_sge_rd = 32;
  d.max_cq = 0x4000;
  d.max_cqe = 32767;
  d.max_mr = 0x40000;
  d.max_pd = 0x7ff0;
  d.max_mw = 0x1000;  // rxe RXE_MAX_MW
  d.max_qp_rd_atom = 128;
  d.max_res_rd_atom = 0x3f000;
  d.max_qp_init_rd_atom = 128;
  d.atomic_cap = AtomicCap::kHca;
  d.max_ah = 0x7fff;
  d.max_mcast_grp = 8192;  // rxe RXE_MAX_MCAST_GRP, _QP_ATTACH, _TOT_MCAST_QP_ATTACH
  d.max_mcast_qp_attach = 56;
  d.max_total_mcast_qp_attach = 0x70000;
  d.max_srq = 0x3ff0;
  d.max_srq_wr = 0x4000;
  d.max_srq_sge = 27;
  d.max_pkeys = 64;
  d.local_ca_ack_delay = 15;
  d.phys_port_cnt = 1;
  d.max_msg_sz = 0x800000;

  PortAttr& p = e.pattr;
  p.state = PortState::kActive;
  p.max_mtu = Mtu::k4096;
  p.active_mtu = e.cfg.active_mtu;
  p.gid_tbl_len = 1024;
  p.port_cap_flags = port_cap::kCmSup | port_cap::kIpBasedGids;
  p.max_msg_sz = d.max_msg_sz;
  p.pkey_tbl_len = 64;
  p.max_vl_num = 1;
  p.active_width = 1;  // 1X
  p.active_speed = 1;  // SDR (rxe reports the same)
  p.phys_state = 5;    // LinkUp
  p.link_layer = LinkLayer::kEthernet;
  e.gid0 = e.transport->local_address().gid();
}

template <typename T>
std::error_code erase_owned(std::vector<std::unique_ptr<T>>& v, const void* p) {
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& u) { return u.get() == p; });
  if (it == v.end()) return errc(EINVAL);
  v.erase(it);
  return {};
}

template <typename T>
bool owned(const std::vector<std::unique_ptr<T>>& v, const void* p) {
  return std::any_of(v.begin(), v.end(), [&](const auto& u) { return u.get() == p; });
}

}  // namespace

Device::Engine::Engine(std::unique_ptr<Transport> t, DeviceConfig c)
    : transport(std::move(t)), cfg(std::move(c)) {
  on_recv = [this](const Datagram& d) { receive(d); };
  icrc_optional = transport->icrc_optional();
  next_qpn = first_qpn();
  ack_list.reserve(1024);
  if (cfg.ack_hold.count() > 0) ack_timer = transport->make_timer([this] { flush_acks(); });
  fill_attrs(*this);
}

Device::Engine::~Engine() {
  if (helper.joinable()) {
    stopping = true;
    transport->wake();
    helper.join();
  }
  qps.clear();  // their timers belong to the transport
  for (AsyncQueue& q : async_qs) ::close(q.efd);
  for (auto& ch : channels) ::close(ch->efd);
}

// The helper receives and runs timers while nobody else does. An application
// that polls its CQs does both itself, and a helper woken on every arrival
// would only take a core from it, and the device lock (which the poller
// retakes at once, so a helper waiting for it is woken again and again): on
// two cores, the core a sleeping peer's thread needs. So while the application
// polls — its last poll no older than kPolling when the helper looks — and no
// CQ with a channel is armed (someone may be blocked on its event), the helper
// neither takes the lock nor waits on the socket: it sleeps, each sleep twice
// as long as the last (up to stand_back_max), and looks again. When the polls
// have stopped, it receives what arrived meanwhile and waits on the socket
// again, until an application's polls in a loop wake it (Cq::poll).
void Device::Engine::helper_loop() {
  const Nanos first = std::min(kPolling, cfg.stand_back_max);
  auto app_polling = [&](Nanos now) {
    return cfg.stand_back_max.count() > 0 && armed_cqs.load() == 0 &&
           now.count() - app_polled.load(std::memory_order_relaxed) < kPolling.count();
  };
  Nanos back = first;
  // Arrivals slept through or left to the application may not wake wait()
  // again: a round comes first.
  bool drain = false;
  helper_tid.store(static_cast<int>(::gettid()));
  while (!stopping.load()) {
    const Nanos now = transport->now();
    if (app_polling(now)) {
      // Published before armed_cqs is read again: a req_notify either sees it
      // and wakes this sleep, or is seen here.
      standing_back.store(true);
      const bool armed = armed_cqs.load() > 0;
      if (!armed) transport->sleep_until(now + back);
      standing_back.store(false);
      drain = true;
      if (!armed) {
        back = std::min(back * 2, cfg.stand_back_max);
        continue;
      }
    }
    back = first;
    if (!drain) {
      helper_on_socket.store(cfg.stand_back_max.count() > 0);
      transport->wait(transport->now() + std::chrono::seconds(1));
      helper_on_socket.store(false);
      if (stopping.load()) break;
      if (app_polling(transport->now())) {
        drain = true;  // its next poll takes what woke us
        continue;
      }
    }
    drain = false;
    std::lock_guard lk(mu);
    progress_locked();
  }
}

size_t Device::Engine::progress_locked() {
  const size_t n = transport->poll(on_recv, 64);
  if (!starved.empty()) req_kick_starved(*this);
  flush_acks();
  tx_flush();
  if (n > 0) records_flush();  // what was received (tx_flush did the sent)
  std::array<wire::IpAddr, 4> gone;
  while (const size_t k = transport->take_unreachable(gone))
    for (size_t i = 0; i < k; ++i) {
      gone_peers.add(gone[i]);
      if (gsi) gsi->on_unreachable(gone[i]);
    }
  if (gsi) tx_flush();  // what the GSI client sent on hearing of them
  return n;
}

void Device::Engine::flush_acks() {
  if (ack_list.empty()) return;
  const Nanos now = ack_timer ? transport->now() : Nanos(0);  // ack_due is 0 unless held
  Nanos next = Nanos::max();
  size_t kept = 0;
  for (QpImpl* qp : ack_list) {
    if (qp->resp.ack_pending && qp->resp.ack_due > now) {
      ack_list[kept++] = qp;
      next = std::min(next, qp->resp.ack_due);
      continue;
    }
    resp_flush_ack(*qp);  // nothing when it left with its QP's requests
    qp->resp.ack_listed = false;
  }
  ack_list.resize(kept);
  if (!ack_timer) return;
  if (next != Nanos::max()) {
    ack_timer->arm_at(next);
  } else if (ack_timer->armed()) {
    ack_timer->cancel();
  }
}

void Device::Engine::log(EngineEvent e) {
  if (!cfg.events) return;
  e.time = transport->now();
  cfg.events->on_event(e);
}

void Device::Engine::forget_async(const void* object) {
  std::lock_guard lk(async_mu);
  for (AsyncQueue& aq : async_qs) {
    std::erase_if(aq.q, [&](const AsyncEvent& ev) {
      return static_cast<const void*>(ev.qp) == object || static_cast<const void*>(ev.cq) == object ||
             static_cast<const void*>(ev.srq) == object;
    });
  }
}

Device::Engine::AsyncQueue* Device::Engine::async_queue(uint32_t id) {
  for (AsyncQueue& aq : async_qs)
    if (aq.id == id) return &aq;
  return nullptr;
}

void Device::Engine::raise_async(const AsyncEvent& ev) {
  // The queue the object was given (under mu, as the object's fields are).
  uint32_t target = 0;
  if (ev.qp) target = static_cast<const QpImpl*>(ev.qp)->async_queue;
  if (ev.cq) target = static_cast<const CqImpl*>(ev.cq)->async_queue;
  if (ev.srq) target = static_cast<const SrqImpl*>(ev.srq)->async_queue;
  const bool port_event = !ev.qp && !ev.cq && !ev.srq;
  {
    std::lock_guard lk(async_mu);
    AsyncQueue* one_queue = port_event ? nullptr : async_queue(target);
    if (!port_event && !one_queue) one_queue = &async_qs.front();  // its queue was closed
    const uint64_t one = 1;
    for (AsyncQueue& aq : async_qs) {
      if (one_queue && &aq != one_queue) continue;
      aq.q.push_back(ev);
      [[maybe_unused]] ssize_t r = ::write(aq.efd, &one, sizeof one);
    }
  }
  EngineEvent e;
  e.kind = EventKind::kAsyncEvent;
  e.async = ev.event_type;
  if (ev.qp) e.qpn = ev.qp->qp_num();
  log(e);
}

// ---- Device ----

Result<std::unique_ptr<Device>> Device::create(std::unique_ptr<Transport> transport,
                                               DeviceConfig config) {
  if (!transport) return errc(EINVAL);
  if (config.cc != cc::Algorithm::kNone) {
    std::string error;  // the front ends check the parameters first, with a message
    if (!cc::make_rate_control(config.cc, config.dcqcn, config.line_rate_bps, &error)) return errc(EINVAL);
  }
  auto eng = std::make_unique<Engine>(std::move(transport), std::move(config));
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (efd < 0) return errc(errno);
  eng->async_qs.push_back({0, efd, {}});
  std::unique_ptr<Device> dev(new Device(std::move(eng)));
  Engine& e = *dev->engine_;
  {
    std::lock_guard lk(e.mu);
    AsyncEvent ev;
    ev.event_type = EventType::kPortActive;
    ev.port_num = kPortNum;
    e.raise_async(ev);
  }
  if (e.cfg.helper_thread) e.helper = std::thread([&e] { e.helper_loop(); });
  return dev;
}

Device::Device(std::unique_ptr<Engine> e) : engine_(std::move(e)) {}

void Device::reset() {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  // QPs first: they point at the CQs, SRQs and PDs (and their timers go with them).
  e.qps.clear();
  e.qp_by_num.clear();
  e.mws.clear();
  e.mw_by_index.clear();
  e.mrs.clear();
  e.mr_by_key.clear();
  e.srqs.clear();
  e.srq_by_num.clear();
  e.cqs.clear();
  e.armed_cqs.store(0);
  for (auto& ch : e.channels) ::close(ch->efd);
  e.channels.clear();
  e.ahs.clear();
  e.xrcds.clear();
  e.pds.clear();
  e.next_qpn = e.first_qpn();
  e.next_mr_index = e.next_pd_handle = e.next_srq_num = e.next_cq_num = 1;
  for (const Engine::McastGroup& g : e.mcast) e.transport->leave_group(g.addr);
  e.mcast.clear();
  e.mcast_attached = 0;
  e.tx.n = 0;
  e.ack_list.clear();
  e.inflight_psns = 0;
  e.starved.clear();
  e.gone_peers = UnreachableSet{};
  e.gsi = nullptr;
  e.gsi_psn = 0;
  e.counters = Counters{};
  e.warned = {};
  {
    // Queue 0 alone is left; its eventfd counts the queued events: read it down to zero.
    std::lock_guard alk(e.async_mu);
    for (size_t i = 1; i < e.async_qs.size(); ++i) ::close(e.async_qs[i].efd);
    e.async_qs.resize(1);
    Engine::AsyncQueue& q0 = e.async_qs.front();
    pollfd pfd{q0.efd, POLLIN, 0};
    uint64_t v = 0;
    while (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) && ::read(q0.efd, &v, sizeof v) == sizeof v) {
    }
    q0.q.clear();
    e.next_async_queue = 1;
  }
  AsyncEvent ev;
  ev.event_type = EventType::kPortActive;
  ev.port_num = kPortNum;
  e.raise_async(ev);
}
Device::~Device() = default;

const std::string& Device::name() const { return engine_->cfg.name; }
const wire::IpAddr& Device::address() const { return engine_->transport->local_address(); }
uint64_t Device::node_guid() const { return engine_->dattr.node_guid; }
int Device::qpn_block() const { return engine_->cfg.qpn_block; }
const DeviceAttr& Device::query_device() const { return engine_->dattr; }
int Device::gid_table_len() const { return engine_->pattr.gid_tbl_len; }

std::error_code Device::query_port(uint8_t port_num, PortAttr* out) const {
  if (port_num != kPortNum || !out) return errc(EINVAL);
  std::lock_guard lk(engine_->mu);
  *out = engine_->pattr;
  return {};
}

std::error_code Device::query_gid(uint8_t port_num, int index, Gid* out) const {
  if (port_num != kPortNum || index < 0 || index >= engine_->pattr.gid_tbl_len || !out)
    return errc(EINVAL);
  *out = index == 0 ? engine_->gid0 : Gid{};
  return {};
}

std::error_code Device::query_gid_type(uint8_t port_num, int index, GidType* out) const {
  if (port_num != kPortNum || index < 0 || index >= engine_->pattr.gid_tbl_len || !out)
    return errc(EINVAL);
  *out = GidType::kRoceV2;
  return {};
}

std::error_code Device::query_pkey(uint8_t port_num, int index, uint16_t* out) const {
  if (port_num != kPortNum || index < 0 || index >= engine_->pattr.pkey_tbl_len || !out)
    return errc(EINVAL);
  *out = index == 0 ? wire::kDefaultPkey : 0;
  return {};
}

Result<uint32_t> Device::open_async_queue() {
  Engine& e = *engine_;
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (efd < 0) return errc(errno);
  std::lock_guard alk(e.async_mu);
  Engine::AsyncQueue& aq = e.async_qs.emplace_back();
  aq.id = e.next_async_queue++;
  aq.efd = efd;
  AsyncEvent ev;
  ev.event_type = EventType::kPortActive;
  ev.port_num = kPortNum;
  aq.q.push_back(ev);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(efd, &one, sizeof one);
  return aq.id;
}

std::error_code Device::close_async_queue(uint32_t queue) {
  Engine& e = *engine_;
  std::lock_guard alk(e.async_mu);
  if (queue == 0) return errc(EINVAL);
  auto it = std::find_if(e.async_qs.begin(), e.async_qs.end(),
                         [&](const Engine::AsyncQueue& aq) { return aq.id == queue; });
  if (it == e.async_qs.end()) return errc(EINVAL);
  ::close(it->efd);
  e.async_qs.erase(it);
  return {};
}

int Device::async_fd(uint32_t queue) const {
  Engine& e = *engine_;
  std::lock_guard alk(e.async_mu);
  const Engine::AsyncQueue* aq = e.async_queue(queue);
  return aq ? aq->efd : -1;
}

void Device::set_async_queue(Qp* qp, uint32_t queue) {
  std::lock_guard lk(engine_->mu);
  static_cast<QpImpl*>(qp)->async_queue = queue;
}
void Device::set_async_queue(Cq* cq, uint32_t queue) {
  std::lock_guard lk(engine_->mu);
  static_cast<CqImpl*>(cq)->async_queue = queue;
}
void Device::set_async_queue(Srq* srq, uint32_t queue) {
  std::lock_guard lk(engine_->mu);
  static_cast<SrqImpl*>(srq)->async_queue = queue;
}

std::error_code Device::get_async_event(AsyncEvent* out,
                                        const std::function<void(const AsyncEvent&)>& taken,
                                        uint32_t queue) {
  if (!out) return errc(EINVAL);
  Engine& e = *engine_;
  int efd = -1;
  {
    std::lock_guard alk(e.async_mu);
    const Engine::AsyncQueue* aq = e.async_queue(queue);
    if (!aq) return errc(EINVAL);
    efd = aq->efd;
  }
  // A count whose event was dropped (forget_async) is passed over: read on,
  // blocking or not as the fd is.
  for (;;) {
    uint64_t v = 0;
    if (::read(efd, &v, sizeof v) != sizeof v) return errc(errno);
    std::lock_guard lk(e.async_mu);
    Engine::AsyncQueue* aq = e.async_queue(queue);
    if (!aq) return errc(EINVAL);  // closed meanwhile
    if (aq->q.empty()) continue;
    *out = aq->q.front();
    aq->q.pop_front();
    if (taken) taken(*out);
    return {};
  }
}

int Device::helper_tid() const { return engine_->helper_tid.load(); }

size_t Device::progress() {
  std::lock_guard lk(engine_->mu);
  return engine_->progress_locked();
}

Transport& Device::transport() { return *engine_->transport; }

void Device::set_tap(PacketTap* tap) {
  std::lock_guard lk(engine_->mu);
  engine_->cfg.tap = tap;
}

void Device::set_event_sink(EventSink* sink) {
  std::lock_guard lk(engine_->mu);
  engine_->cfg.events = sink;
}

Counters Device::counters() const {
  std::lock_guard lk(engine_->mu);
  return engine_->counters;
}

// ---- PD / AH ----

Result<Pd*> Device::alloc_pd() {
  std::lock_guard lk(engine_->mu);
  auto pd = std::make_unique<PdImpl>();
  pd->eng = engine_.get();
  pd->handle = engine_->next_pd_handle++;
  Pd* r = pd.get();
  engine_->pds.push_back(std::move(pd));
  return r;
}

std::error_code Device::dealloc_pd(Pd* pd) {
  std::lock_guard lk(engine_->mu);
  if (!owned(engine_->pds, pd)) return errc(EINVAL);
  if (static_cast<PdImpl*>(pd)->users > 0) return errc(EBUSY);
  return erase_owned(engine_->pds, pd);
}

uint64_t Device::clock_ns() const { return static_cast<uint64_t>(engine_->transport->now().count()); }

uint32_t Pd::handle() const { return static_cast<const PdImpl*>(this)->handle; }

Result<Pd*> Device::find_pd(uint32_t handle) {
  std::lock_guard lk(engine_->mu);
  for (const auto& pd : engine_->pds)
    if (pd->handle == handle) return static_cast<Pd*>(pd.get());
  return errc(ENOENT);
}

Result<Mr*> Device::find_mr(uint32_t lkey) {
  std::lock_guard lk(engine_->mu);
  MrImpl* mr = engine_->find_mr(lkey);
  if (!mr) return errc(ENOENT);
  return static_cast<Mr*>(mr);
}

Result<Ah*> Device::create_ah(Pd* pd, const AhAttr& attr) {
  std::lock_guard lk(engine_->mu);
  if (!owned(engine_->pds, pd)) return errc(EINVAL);
  // RoCE: the address is the GID (IBTA A17.4.2); sgid_index must name a used slot.
  if (!attr.is_global || attr.sgid_index != 0 || attr.port_num != kPortNum) return errc(EINVAL);
  auto ah = std::make_unique<AhImpl>();
  ah->eng = engine_.get();
  ah->pd = static_cast<PdImpl*>(pd);
  ah->attr = attr;
  ah->dst = wire::IpAddr::from_gid(attr.dgid);
  ah->pd->users++;
  Ah* r = ah.get();
  engine_->ahs.push_back(std::move(ah));
  return r;
}

std::error_code Device::destroy_ah(Ah* ah) {
  std::lock_guard lk(engine_->mu);
  if (!owned(engine_->ahs, ah)) return errc(EINVAL);
  static_cast<AhImpl*>(ah)->pd->users--;
  return erase_owned(engine_->ahs, ah);
}

const AhAttr& Ah::attr() const { return static_cast<const AhImpl*>(this)->attr; }
Pd* Ah::pd() const { return static_cast<const AhImpl*>(this)->pd; }

// Used by the other object files for ownership checks.
bool device_owns_cq(const Engine& e, const Cq* cq) { return owned(e.cqs, cq); }
bool device_owns_srq(const Engine& e, const Srq* s) { return owned(e.srqs, s); }
bool device_owns_pd(const Engine& e, const Pd* p) { return owned(e.pds, p); }
bool device_owns_channel(const Engine& e, const CompChannel* c) { return owned(e.channels, c); }
bool device_owns_mr(const Engine& e, const Mr* m) { return owned(e.mrs, m); }
bool device_owns_qp(const Engine& e, const Qp* q) { return owned(e.qps, q); }
bool device_owns_mw(const Engine& e, const Mw* w) { return owned(e.mws, w); }
bool device_owns_xrcd(const Engine& e, const Xrcd* x) { return owned(e.xrcds, x); }

}  // namespace rocelab::emu
