// rdma_cm (rdma_cm.h): devices, event channels, ids and their states, bind
// and listen, address and route resolution, and the calls that start the
// state machines of ib_cm.cc and sidr.cc.
#include "cm/rdma_cm.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "cm/impl.h"
#include "wire/cma_hdr.h"

namespace rocelab::cm {
namespace {

std::error_code err(int e) { return {e, std::generic_category()}; }

}  // namespace

// ---- Impl ----

Impl::Impl(CmConfig c) : cfg(std::move(c)) {
  uint64_t seed = cfg.seed;
  if (seed == 0) {
    std::random_device rd;
    seed = (uint64_t{rd()} << 32) | rd();
  }
  rng.seed(seed);
  comm_operand = static_cast<uint32_t>(rng());
  next_comm = static_cast<uint32_t>(rng()) & 0xFFFF;
}

Impl::~Impl() {
  for (auto& [h, ch] : channels)
    if (ch.efd >= 0) ::close(ch.efd);
}

Id* Impl::find_id(IdHandle h) {
  if (h == kNoId) return nullptr;
  auto it = ids.find(h);
  return it == ids.end() ? nullptr : &it->second;
}

void Impl::queue_event(Id& id, Event ev) {
  auto it = channels.find(id.ch);
  if (it == channels.end()) return;
  ev.id = id.h;
  it->second.q.push_back(ev);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(it->second.efd, &one, sizeof one);
}

IdHandle Impl::new_id(ChannelHandle ch, PortSpace ps, emu::QpType t) {
  const IdHandle h = next_handle++;
  Id& id = ids[h];
  id.h = h;
  id.ch = ch;
  id.ps = ps;
  id.qp_type = t;
  channels[ch].ids++;
  return h;
}

Id* Impl::find_listener(PortSpace ps, uint16_t port_no, const DevicePort& on,
                        const wire::IpAddr& dst) {
  Id* any = nullptr;
  for (auto& [h, id] : ids) {
    if (id.state != IdState::kListen || id.ps != ps || id.src.port != port_no) continue;
    if (id.src.is_any()) {
      if (id.src.ip.v6 == dst.v6 || (id.src.ip.v6 && !id.opt.afonly)) any = &id;
      continue;
    }
    if (id.src.ip == dst && (id.port == nullptr || id.port == &on)) return &id;
  }
  return any;
}

// ---- Cm ----

Cm::Cm(CmConfig cfg) : impl_(std::make_unique<Impl>(std::move(cfg))) {}

Cm::~Cm() {
  std::vector<IdHandle> all;
  {
    std::lock_guard lk(impl_->mu);
    for (const auto& [h, id] : impl_->ids) all.push_back(h);
  }
  for (IdHandle h : all) destroy_id(h);
  std::vector<emu::Device*> devs;
  {
    std::lock_guard lk(impl_->mu);
    for (const auto& p : impl_->ports) devs.push_back(p->dev);
  }
  for (emu::Device* d : devs) remove_device(*d);
}

std::error_code Cm::add_device(emu::Device& dev) {
  Impl& m = *impl_;
  emu::PortAttr pa;
  if (auto ec = dev.query_port(emu::kPortNum, &pa)) return ec;
  auto port = std::make_unique<DevicePort>();
  port->impl = &m;
  port->dev = &dev;
  port->mtu = pa.active_mtu;
  port->ack_delay = dev.query_device().local_ca_ack_delay;
  port->guid = dev.node_guid();
  DevicePort* raw = port.get();
  {
    std::lock_guard lk(m.mu);
    for (const auto& p : m.ports)
      if (p->dev == &dev) return err(EEXIST);
    port->hi_tid = m.next_hi_tid++;
    m.ports.push_back(std::move(port));
  }
  if (auto ec = dev.set_gsi_client(raw)) {
    std::lock_guard lk(m.mu);
    std::erase_if(m.ports, [&](const auto& p) { return p.get() == raw; });
    return ec;
  }
  return {};
}

std::error_code Cm::remove_device(emu::Device& dev) {
  Impl& m = *impl_;
  DevicePort* port = nullptr;
  {
    std::lock_guard lk(m.mu);
    for (const auto& p : m.ports)
      if (p->dev == &dev) port = p.get();
  }
  if (!port) return err(ENOENT);
  dev.set_gsi_client(nullptr);
  dev.run_locked([&] {
    std::lock_guard lk(m.mu);
    std::vector<uint32_t> gone;
    for (const auto& [comm, c] : m.conns)
      if (c->port == port) gone.push_back(comm);
    for (uint32_t comm : gone) {
      // The farewell ucma_close -> rdma_destroy_id gives a connection when the
      // process exits: DREQ, REJ or DREP (Impl::abandon), sent once (the
      // timers die with the connection, under the device lock).
      if (Conn* c = m.find_conn(comm)) m.abandon(*c);
      m.erase_conn(comm);
    }
    for (auto& [h, id] : m.ids) {
      if (id.port != port) continue;
      id.port = nullptr;
      Event ev;
      ev.type = EventType::kDeviceRemoval;
      m.queue_event(id, ev);
    }
    std::erase_if(m.ports, [&](const auto& p) { return p.get() == port; });
  });
  return {};
}

emu::Device* Cm::device_for(const wire::IpAddr& ip) const {
  std::lock_guard lk(impl_->mu);
  DevicePort* p = impl_->port_for(ip);
  return p ? p->dev : nullptr;
}

// ---- channels ----

Result<ChannelHandle> Cm::create_channel() {
  const int efd = ::eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return err(errno);
  std::lock_guard lk(impl_->mu);
  const ChannelHandle h = impl_->next_handle++;
  impl_->channels[h].efd = efd;
  return h;
}

std::error_code Cm::destroy_channel(ChannelHandle ch) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->channels.find(ch);
  if (it == impl_->channels.end()) return err(ENOENT);
  if (it->second.ids > 0) return err(EBUSY);
  ::close(it->second.efd);
  impl_->channels.erase(it);
  return {};
}

int Cm::channel_fd(ChannelHandle ch) const {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->channels.find(ch);
  return it == impl_->channels.end() ? -1 : it->second.efd;
}

std::error_code Cm::get_event(ChannelHandle ch, Event* out) {
  if (!out) return err(EINVAL);
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  auto it = m.channels.find(ch);
  if (it == m.channels.end()) return err(ENOENT);
  Channel& c = it->second;
  if (c.q.empty()) return err(EAGAIN);
  uint64_t v = 0;
  [[maybe_unused]] ssize_t r = ::read(c.efd, &v, sizeof v);
  *out = c.q.front();
  c.q.pop_front();
  if (Id* id = m.find_id(out->id)) {
    out->id_context = id->context;
    if (id->counted) {  // a connection request taken: room in the backlog again
      id->counted = false;
      if (Id* l = m.find_id(id->listener)) l->pending--;
    }
  }
  if (Id* l = m.find_id(out->listen_id)) out->listen_context = l->context;
  return {};
}

// ---- ids ----

Result<IdHandle> Cm::create_id(ChannelHandle ch, PortSpace ps, emu::QpType qp_type, void* context) {
  if (ps != PortSpace::kTcp && ps != PortSpace::kUdp && ps != PortSpace::kIb && ps != PortSpace::kIpoib)
    return err(EINVAL);
  switch (ps) {
    case PortSpace::kUdp:
      if (qp_type != emu::QpType::kUD) return err(EINVAL);
      break;
    case PortSpace::kTcp:
      if (qp_type == emu::QpType::kUD) return err(EINVAL);
      break;
    case PortSpace::kIb:
    case PortSpace::kIpoib:
      break;
  }
  std::lock_guard lk(impl_->mu);
  if (!impl_->channels.count(ch)) return err(EINVAL);
  const IdHandle h = impl_->new_id(ch, ps, qp_type);
  impl_->ids[h].context = context;
  return h;
}

std::error_code Cm::destroy_id(IdHandle h) {
  Impl& m = *impl_;
  emu::Device* dev = nullptr;
  std::vector<IdHandle> children;
  bool was_listening = false;
  {
    std::lock_guard lk(m.mu);
    Id* id = m.find_id(h);
    if (!id) return err(ENOENT);
    was_listening = id->state == IdState::kListen;
    id->state = IdState::kDestroying;
    if (id->port) dev = id->port->dev;
    // Connection requests of a listener not yet taken by the application go with it.
    for (const auto& [ch, o] : m.ids)
      if (o.listener == h && o.counted) children.push_back(ch);
  }
  for (IdHandle c : children) destroy_id(c);
  auto body = [&] {
    std::lock_guard lk(m.mu);
    Id* id = m.find_id(h);
    if (!id) return;
    if (Conn* c = m.find_conn(id->conn)) {
      c->id = kNoId;
      id->conn = 0;
      m.abandon(*c);
    }
    if (id->counted)
      if (Id* l = m.find_id(id->listener)) l->pending--;
    auto it = m.channels.find(id->ch);
    if (it != m.channels.end()) {
      Channel& ch = it->second;
      const size_t before = ch.q.size();
      std::erase_if(ch.q, [&](const Event& e) { return e.id == h; });
      for (size_t i = ch.q.size(); i < before; ++i) {
        uint64_t v = 0;
        [[maybe_unused]] ssize_t r = ::read(ch.efd, &v, sizeof v);
      }
      ch.ids--;
    }
    m.ids.erase(h);
  };
  if (dev)
    dev->run_locked(body);
  else
    body();
  if (was_listening) m.publish_listens();
  return {};
}

std::error_code Cm::migrate_id(IdHandle h, ChannelHandle ch) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  auto to = m.channels.find(ch);
  if (to == m.channels.end()) return err(EINVAL);
  auto from = m.channels.find(id->ch);
  if (from != m.channels.end() && from != to) {
    Channel& f = from->second;
    for (auto it = f.q.begin(); it != f.q.end();) {
      if (it->id != h) {
        ++it;
        continue;
      }
      to->second.q.push_back(*it);
      it = f.q.erase(it);
      uint64_t v = 1;
      [[maybe_unused]] ssize_t r = ::read(f.efd, &v, sizeof v);
      v = 1;
      r = ::write(to->second.efd, &v, sizeof v);
    }
    f.ids--;
    to->second.ids++;
  }
  id->ch = ch;
  return {};
}

std::error_code Cm::set_context(IdHandle h, void* context) {
  std::lock_guard lk(impl_->mu);
  Id* id = impl_->find_id(h);
  if (!id) return err(ENOENT);
  id->context = context;
  return {};
}

Result<IdInfo> Cm::query(IdHandle h) const {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  IdInfo r;
  r.ps = id->ps;
  r.qp_type = id->qp_type;
  r.state = id->state;
  r.channel = id->ch;
  r.src = id->src;
  r.dst = id->dst;
  r.bound = id->port != nullptr;
  r.device = id->port ? id->port->dev : nullptr;
  r.port_num = id->port ? emu::kPortNum : 0;
  r.sgid = id->src.ip.gid();
  r.dgid = id->dst.ip.gid();
  if (id->port) r.path_mtu = id->port->mtu;
  r.traffic_class = id->opt.tos;
  r.packet_life_time = m.cfg.packet_life_time;
  if (id->routed) r.num_paths = 1;
  if (const Conn* c = m.find_conn(id->conn)) r.path_mtu = c->path_mtu;
  if (id->qp_type == emu::QpType::kUD) r.qkey = kRdmaUdpQkey;
  return r;
}

std::error_code Cm::set_tos(IdHandle h, uint8_t tos) {
  std::lock_guard lk(impl_->mu);
  Id* id = impl_->find_id(h);
  if (!id) return err(ENOENT);
  id->opt.has_tos = true;
  id->opt.tos = tos;
  return {};
}

std::error_code Cm::set_ack_timeout(IdHandle h, uint8_t timeout) {
  if (timeout > 31) return err(EINVAL);
  std::lock_guard lk(impl_->mu);
  Id* id = impl_->find_id(h);
  if (!id) return err(ENOENT);
  id->opt.has_ack_timeout = true;
  id->opt.ack_timeout = timeout;
  return {};
}

std::error_code Cm::set_reuseaddr(IdHandle h, bool on) {
  std::lock_guard lk(impl_->mu);
  Id* id = impl_->find_id(h);
  if (!id) return err(ENOENT);
  if (id->bound) return err(EINVAL);
  id->opt.reuseaddr = on;
  return {};
}

std::error_code Cm::set_afonly(IdHandle h, bool on) {
  std::lock_guard lk(impl_->mu);
  Id* id = impl_->find_id(h);
  if (!id) return err(ENOENT);
  if (id->bound) return err(EINVAL);
  id->opt.afonly = on;
  return {};
}

// ---- addresses ----

namespace {

std::error_code bind_locked(Impl& m, Id& id, SockAddr addr) {
  if (id.state != IdState::kIdle || id.bound) return err(EINVAL);
  DevicePort* port = nullptr;
  if (!addr.is_any()) {
    port = m.port_for(addr.ip);
    // A loopback address that no device has (127.0.0.1 beside a device on
    // 127.0.0.61, ::1) binds without a device (id->verbs NULL): libfabric's
    // verbs provider, given no address, binds "localhost", needs the bind to
    // succeed, and then offers the devices' own addresses instead.
    if (!port && !addr.ip.is_loopback()) return err(EADDRNOTAVAIL);
  }
  if (auto ec = m.reserve_port(id, &addr)) return ec;
  id.src = addr;
  id.bound = true;
  id.port = port;
  id.state = IdState::kAddrBound;
  return {};
}

}  // namespace

std::error_code Cm::bind(IdHandle h, const SockAddr& addr) {
  std::lock_guard lk(impl_->mu);
  Id* id = impl_->find_id(h);
  if (!id) return err(ENOENT);
  return bind_locked(*impl_, *id, addr);
}

std::error_code Cm::resolve_addr(IdHandle h, const std::optional<SockAddr>& src, const SockAddr& dst,
                                 int timeout_ms) {
  Impl& m = *impl_;
  (void)timeout_ms;  // no ARP: resolution is immediate
  if (dst.is_any()) return err(EINVAL);
  if (src && src->ip.v6 != dst.ip.v6 && !src->is_any()) return err(EINVAL);  // as rdma_resolve_addr
  // The candidate devices, judged without the lock (CmConfig::route may block briefly).
  std::vector<DevicePort*> cands;
  DevicePort* fixed = nullptr;
  {
    std::lock_guard lk(m.mu);
    Id* id = m.find_id(h);
    if (!id) return err(ENOENT);
    if (id->state != IdState::kIdle && id->state != IdState::kAddrBound) return err(EINVAL);
    if (m.ports.empty()) return err(ENODEV);
    if (id->port) {
      fixed = id->port;
    } else if (src && !src->is_any()) {
      fixed = m.port_for(src->ip);
      if (!fixed) return err(EADDRNOTAVAIL);
    } else if (DevicePort* local = m.port_for(dst.ip)) {
      fixed = local;
    }
    if (fixed)
      cands.push_back(fixed);
    else
      for (const auto& p : m.ports) cands.push_back(p.get());
  }
  DevicePort* chosen = nullptr;
  RouteVerdict verdict = RouteVerdict::kHostUnreach;
  for (DevicePort* p : cands) {
    const RouteVerdict v = p->dev->address() == dst.ip      ? RouteVerdict::kReachable
                           : p->dev->address().v6 != dst.ip.v6 ? RouteVerdict::kNetUnreach  // no IPv4 on an IPv6 device
                                                               : m.route(*p->dev, dst.ip);
    if (v == RouteVerdict::kReachable) {
      chosen = p;
      verdict = v;
      break;
    }
    if (p == cands.front()) verdict = v;
  }
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  if (id->state != IdState::kIdle && id->state != IdState::kAddrBound) return err(EINVAL);
  if (chosen && std::find_if(m.ports.begin(), m.ports.end(),
                             [&](const auto& p) { return p.get() == chosen; }) == m.ports.end())
    chosen = nullptr;  // removed meanwhile
  if (!id->bound) {
    SockAddr a;
    a.ip = chosen ? chosen->dev->address() : (src ? src->ip : wire::IpAddr{});
    a.ip.v6 = a.ip.v6 || (!chosen && !src && dst.ip.v6);
    a.port = src ? src->port : 0;
    if (auto ec = bind_locked(m, *id, a)) return ec;
  }
  id->dst = dst;
  if (!chosen) {
    id->state = IdState::kAddrBound;
    Event ev;
    ev.type = EventType::kAddrError;
    ev.status = verdict == RouteVerdict::kNetUnreach ? -ENETUNREACH : -EHOSTUNREACH;
    m.queue_event(*id, ev);
    return {};
  }
  id->port = chosen;
  id->src.ip = chosen->dev->address();
  id->state = IdState::kAddrResolved;
  Event ev;
  ev.type = EventType::kAddrResolved;
  m.queue_event(*id, ev);
  return {};
}

std::error_code Cm::resolve_route(IdHandle h, int timeout_ms) {
  Impl& m = *impl_;
  (void)timeout_ms;
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  if (id->state != IdState::kAddrResolved || !id->port) return err(EINVAL);
  id->routed = true;
  id->state = IdState::kRouteResolved;
  Event ev;
  ev.type = EventType::kRouteResolved;
  m.queue_event(*id, ev);
  return {};
}

// ---- passive ----

std::vector<std::pair<emu::Device*, std::vector<uint64_t>>> Impl::listens_locked() const {
  std::vector<std::pair<emu::Device*, std::vector<uint64_t>>> out;
  for (const auto& p : ports) {
    std::vector<uint64_t> svc;
    for (const auto& [h, id] : ids) {
      if (id.state != IdState::kListen) continue;
      if (!id.src.is_any() && !(id.src.ip == p->dev->address())) continue;
      svc.push_back(wire::rdma_cm_service_id(static_cast<uint16_t>(id.ps), id.src.port));
    }
    out.emplace_back(p->dev, std::move(svc));
  }
  return out;
}

void Impl::publish_listens() {
  if (!cfg.on_listens) return;
  std::vector<std::pair<emu::Device*, std::vector<uint64_t>>> all;
  {
    std::lock_guard lk(mu);
    all = listens_locked();
  }
  for (auto& [dev, svc] : all) cfg.on_listens(*dev, std::move(svc));
}

namespace {

std::error_code listen_unpublished(Impl& m, IdHandle h, int backlog) {
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  if (id->state == IdState::kListen) {
    id->backlog = backlog > 0 ? backlog : 1024;  // librdmacm may listen again to change it
    return {};
  }
  if (id->state == IdState::kIdle) {
    SockAddr any;
    any.ip.v6 = false;
    if (auto ec = bind_locked(m, *id, any)) return ec;
  }
  if (id->state != IdState::kAddrBound) return err(EINVAL);
  for (const auto& [oh, o] : m.ids) {
    if (oh == h || o.state != IdState::kListen || o.ps != id->ps || o.src.port != id->src.port) continue;
    if (o.src.is_any() || id->src.is_any() || o.src.ip == id->src.ip) return err(EADDRINUSE);
  }
  id->backlog = backlog > 0 ? backlog : 1024;
  id->state = IdState::kListen;
  return {};
}

}  // namespace

std::error_code Cm::listen(IdHandle h, int backlog) {
  Impl& m = *impl_;
  if (m.cfg.listened_elsewhere) {
    // The devices a bound id would listen on, asked with no lock held.
    std::vector<emu::Device*> devs;
    uint64_t sid = 0;
    {
      std::lock_guard lk(m.mu);
      Id* id = m.find_id(h);
      if (id && id->state == IdState::kAddrBound) {
        sid = wire::rdma_cm_service_id(static_cast<uint16_t>(id->ps), id->src.port);
        for (const auto& p : m.ports)
          if (id->src.is_any() || id->src.ip == p->dev->address()) devs.push_back(p->dev);
      }
    }
    for (emu::Device* d : devs)
      if (m.cfg.listened_elsewhere(*d, sid)) return err(EADDRINUSE);
  }
  std::error_code ec = listen_unpublished(m, h, backlog);
  if (!ec) impl_->publish_listens();
  return ec;
}

namespace {

// Runs fn(impl, id, conn) under the id's device lock and the Cm lock.
template <typename Fn>
std::error_code with_conn(Impl& m, IdHandle h, Fn&& fn) {
  emu::Device* dev = nullptr;
  {
    std::lock_guard lk(m.mu);
    Id* id = m.find_id(h);
    if (!id) return err(ENOENT);
    if (!id->port) return err(EINVAL);
    dev = id->port->dev;
  }
  std::error_code ec;
  dev->run_locked([&] {
    std::lock_guard lk(m.mu);
    Id* id = m.find_id(h);
    if (!id || !id->port || id->port->dev != dev) {
      ec = err(id ? EINVAL : ENOENT);
      return;
    }
    ec = fn(*id, m.find_conn(id->conn));
  });
  return ec;
}

}  // namespace

std::error_code Cm::accept(IdHandle h, const ConnParam& p) {
  Impl& m = *impl_;
  return with_conn(m, h, [&](Id& id, Conn* c) -> std::error_code {
    if (id.state != IdState::kConnectRequest || !c) return err(EINVAL);
    if (c->udp) return m.send_sidr_rep(id, *c, wire::sidr_status::kValid, p.qp_num, p.private_data);
    return m.send_rep(id, *c, p);
  });
}

std::error_code Cm::reject(IdHandle h, std::span<const uint8_t> pd) {
  Impl& m = *impl_;
  return with_conn(m, h, [&](Id& id, Conn* c) -> std::error_code {
    if (id.state != IdState::kConnectRequest || !c) return err(EINVAL);
    if (c->udp) return m.send_sidr_rep(id, *c, wire::sidr_status::kRejected, 0, pd);
    if (auto ec = m.send_rej(*c, wire::rej_reason::kConsumerReject, pd)) return ec;
    m.erase_conn(c->local_comm_id);
    id.state = IdState::kIdle;
    return {};
  });
}

// ---- active ----

std::error_code Cm::connect(IdHandle h, const ConnParam& p) {
  Impl& m = *impl_;
  return with_conn(m, h, [&](Id& id, Conn* c) -> std::error_code {
    if (id.state != IdState::kRouteResolved || c) return err(EINVAL);
    auto ec = id.ps == PortSpace::kUdp ? m.send_sidr_req(id, p) : m.send_req(id, p);
    if (!ec) id.state = IdState::kConnect;
    return ec;
  });
}

namespace {

void establish_passive(Impl& m, Id& id, Conn& c) {
  m.stop_timer(c);
  c.state = CmState::kEstablished;
  m.write_will(c);
  id.state = IdState::kEstablished;
  Event ev;
  ev.type = EventType::kEstablished;
  ev.conn.responder_resources = c.responder_resources;
  ev.conn.initiator_depth = c.initiator_depth;
  ev.conn.flow_control = c.flow_control;
  ev.conn.retry_count = c.retry_count;
  ev.conn.rnr_retry_count = c.rnr_retry_count;
  ev.conn.srq = c.srq;
  ev.conn.qp_num = c.remote_qpn;
  m.queue_event(id, ev);
}

}  // namespace

std::error_code Cm::establish(IdHandle h) {
  Impl& m = *impl_;
  return with_conn(m, h, [&](Id& id, Conn* c) -> std::error_code {
    if (!c) return err(EINVAL);
    if (id.state == IdState::kConnectResponse) {
      if (auto ec = m.send_rtu(*c)) return ec;
      id.state = IdState::kEstablished;
      return {};
    }
    if (id.state == IdState::kAccepted &&
        (c->state == CmState::kRepSent || c->state == CmState::kMraRepRcvd)) {
      establish_passive(m, id, *c);
      return {};
    }
    return err(EINVAL);
  });
}

std::error_code Cm::notify(IdHandle h, emu::EventType event) {
  Impl& m = *impl_;
  return with_conn(m, h, [&](Id& id, Conn* c) -> std::error_code {
    if (!c && id.state != IdState::kEstablished) return err(EINVAL);
    if (event != emu::EventType::kCommEst || !c) return {};
    if (!c->active && (c->state == CmState::kRepSent || c->state == CmState::kMraRepRcvd))
      establish_passive(m, id, *c);
    return {};
  });
}

std::error_code Cm::disconnect(IdHandle h) {
  Impl& m = *impl_;
  return with_conn(m, h, [&](Id& id, Conn* c) -> std::error_code {
    if (!c) {
      const bool was_connected = id.state == IdState::kEstablished || id.state == IdState::kDisconnect ||
                                 id.state == IdState::kTimewait || id.state == IdState::kConnect ||
                                 id.state == IdState::kConnectResponse || id.state == IdState::kAccepted;
      return was_connected ? std::error_code{} : err(EINVAL);
    }
    switch (c->state) {
      case CmState::kEstablished:
        m.send_dreq(*c);
        id.state = IdState::kDisconnect;
        return {};
      case CmState::kDreqRcvd:
        m.send_drep(*c);
        id.state = IdState::kDisconnect;
        return {};
      case CmState::kDreqSent:
      case CmState::kTimewait:
        return {};
      case CmState::kReqSent:
      case CmState::kMraReqRcvd:
      case CmState::kRepSent:
      case CmState::kMraRepRcvd:
      case CmState::kRepRcvd:
      case CmState::kMraRepSent:
        c->id = kNoId;
        id.conn = 0;
        id.state = IdState::kDisconnect;
        m.abandon(*c);
        return {};
      case CmState::kReqRcvd:
      case CmState::kMraReqSent:
      case CmState::kIdle:
        return err(EINVAL);
      case CmState::kSidrReqSent:
      case CmState::kSidrReqRcvd:
      case CmState::kSidrRepSent:
        return {};
    }
    return {};
  });
}

// ---- QP attributes ----

std::error_code Cm::init_qp_attr(IdHandle h, emu::QpState state, emu::QpAttr* attr,
                                 uint32_t* mask) const {
  if (!attr || !mask) return err(EINVAL);
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  if (!id->port) return err(EINVAL);
  namespace qa = emu::qp_attr;
  const Conn* c = m.find_conn(id->conn);
  *attr = emu::QpAttr{};
  attr->qp_state = state;
  attr->port_num = emu::kPortNum;
  attr->pkey_index = 0;
  if (id->qp_type == emu::QpType::kUD) {
    // cma_ib_init_qp_attr for UD; librdmacm's ucma_init_ud_qp does RTR (state
    // only) and RTS (SQ PSN 0) itself.
    switch (state) {
      case emu::QpState::kInit:
        attr->qkey = kRdmaUdpQkey;
        *mask = qa::kState | qa::kPkeyIndex | qa::kPort | qa::kQkey;
        return {};
      case emu::QpState::kRtr:
        *mask = qa::kState;
        return {};
      case emu::QpState::kRts:
        attr->sq_psn = 0;
        *mask = qa::kState | qa::kSqPsn;
        return {};
      case emu::QpState::kReset:
      case emu::QpState::kSqd:
      case emu::QpState::kSqe:
      case emu::QpState::kErr:
        return err(EINVAL);
    }
  }
  switch (state) {
    case emu::QpState::kInit:
      *mask = qa::kState | qa::kAccessFlags | qa::kPkeyIndex | qa::kPort;
      // Before a connection exists the kernel gives 0 (cma_ib_init_qp_attr);
      // with one, ib_cm's cm_init_qp_init_attr.
      if (c) {
        attr->qp_access_flags = emu::access::kRemoteWrite;
        if (c->responder_resources)
          attr->qp_access_flags |= emu::access::kRemoteRead | emu::access::kRemoteAtomic;
      }
      return {};
    case emu::QpState::kRtr: {
      if (!c || c->remote_qpn == 0) return err(EINVAL);
      attr->ah_attr.is_global = true;
      attr->ah_attr.dgid = id->dst.ip.gid();
      attr->ah_attr.sgid_index = 0;
      attr->ah_attr.hop_limit = c->hop_limit;
      attr->ah_attr.traffic_class = c->tclass;
      attr->ah_attr.flow_label = 0;
      attr->ah_attr.port_num = emu::kPortNum;
      attr->path_mtu = c->path_mtu;
      attr->dest_qp_num = c->remote_qpn;
      attr->rq_psn = c->local_psn;
      *mask = qa::kState | qa::kAv | qa::kPathMtu | qa::kDestQpn | qa::kRqPsn;
      if (id->qp_type == emu::QpType::kRC) {
        attr->max_dest_rd_atomic = c->responder_resources;
        attr->min_rnr_timer = 0;
        *mask |= qa::kMaxDestRdAtomic | qa::kMinRnrTimer;
      }
      return {};
    }
    case emu::QpState::kRts:
      if (!c || c->remote_qpn == 0) return err(EINVAL);
      attr->sq_psn = c->remote_psn;
      *mask = qa::kState | qa::kSqPsn;
      if (id->qp_type == emu::QpType::kRC) {
        attr->retry_cnt = c->retry_count;
        attr->rnr_retry = c->rnr_retry_count;
        attr->max_rd_atomic = c->initiator_depth;
        attr->timeout = id->opt.has_ack_timeout ? id->opt.ack_timeout : c->ack_timeout;
        *mask |= qa::kRetryCnt | qa::kRnrRetry | qa::kMaxQpRdAtomic | qa::kTimeout;
      }
      return {};
    case emu::QpState::kReset:
    case emu::QpState::kSqd:
    case emu::QpState::kSqe:
    case emu::QpState::kErr:
      return err(EINVAL);
  }
  return err(EINVAL);
}

// ---- multicast ----

std::error_code Cm::join_multicast(IdHandle h, const SockAddr& group, void* context) {
  Impl& m = *impl_;
  if (!group.ip.is_multicast()) return err(EINVAL);
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  if (!id->port || id->qp_type != emu::QpType::kUD) return err(EINVAL);
  for (const auto& g : id->groups)
    if (g.first.ip == group.ip) return err(EADDRINUSE);
  id->groups.emplace_back(group, context);
  Event ev;
  ev.type = EventType::kMulticastJoin;
  ev.ud.ah_attr.is_global = true;
  ev.ud.ah_attr.dgid = group.ip.gid();  // cma_iboe_set_mgid: ::ffff:a.b.c.d for IPv4
  ev.ud.ah_attr.hop_limit = 64;
  ev.ud.ah_attr.traffic_class = id->opt.tos;
  ev.ud.ah_attr.port_num = emu::kPortNum;
  ev.ud.qp_num = 0xFFFFFF;
  ev.ud.qkey = kRdmaUdpQkey;
  ev.mc_group = group;
  ev.mc_context = context;
  m.queue_event(*id, ev);
  return {};
}

std::error_code Cm::leave_multicast(IdHandle h, const SockAddr& group) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  Id* id = m.find_id(h);
  if (!id) return err(ENOENT);
  const auto n = std::erase_if(id->groups, [&](const auto& g) { return g.first.ip == group.ip; });
  return n ? std::error_code{} : err(EADDRNOTAVAIL);
}

Cm::Stats Cm::stats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

}  // namespace rocelab::cm
