// The librdmacm ABI (RDMACM_1.0-1.3, rdmacm.map) for emulated devices, over
// src/cm. The shim plays librdmacm (cma.c): it owns the rdma_cm_id and event
// structs, moves QPs with the attributes init_qp_attr gives
// (ucma_modify_qp_rtr/rts), turns CONNECT_RESPONSE into ESTABLISHED for ids
// with a QP, and makes ids without a channel synchronous (ucma_complete). The
// Cm plays the kernel. In a process without emulated devices every call goes
// to the real librdmacm unchanged. docs/rdma-cm.md says what is supported.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "rdmacm_shim/real_rdmacm.h"
#include "rdmacm_shim/shim.h"
#include "verbs_shim/convert.h"

using rocelab::rdmacm_shim::chan_of;
using rocelab::rdmacm_shim::Channel;
using rocelab::rdmacm_shim::Dev;
using rocelab::rdmacm_shim::Id;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::State;
namespace cm = rocelab::cm;
namespace emu = rocelab::emu;
namespace wire = rocelab::wire;

#define V10 "RDMACM_1.0"
#define V11 "RDMACM_1.1"
#define V12 "RDMACM_1.2"
#define V13 "RDMACM_1.3"

namespace {

bool emulated() noexcept { return State::get().emulated(); }
cm::Cm& the_cm() noexcept { return State::get().cm(); }

// librdmacm's convention: -1 with errno.
int fail(int e) noexcept {
  errno = e;
  return -1;
}
int result(std::error_code ec) noexcept { return ec ? fail(ec.value()) : 0; }

int to_sock(const sockaddr* sa, cm::SockAddr* out) noexcept {
  if (!sa) return EINVAL;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    out->ip = wire::IpAddr{};
    std::memcpy(out->ip.b.data(), &in->sin_addr, 4);
    out->port = ntohs(in->sin_port);
    return 0;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    out->ip = wire::IpAddr{};
    out->ip.v6 = true;
    std::memcpy(out->ip.b.data(), &in6->sin6_addr, 16);
    out->port = ntohs(in6->sin6_port);
    return 0;
  }
  return sa->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL;
}

void from_sock(const cm::SockAddr& a, sockaddr_storage* out) noexcept {
  std::memset(out, 0, sizeof *out);
  if (a.ip.v6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, a.ip.b.data(), 16);
    in6->sin6_port = htons(a.port);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, a.ip.b.data(), 4);
    in->sin_port = htons(a.port);
  }
}

// The id's public fields from the Cm's view of it (what ucma_query_addr /
// ucma_query_route / ucma_query_gid fill in librdmacm).
void refresh(Id* i) noexcept {
  auto info = the_cm().query(i->h);
  if (!info.ok()) return;
  rdma_cm_id& id = i->id;
  Dev* d = info->device ? State::get().dev_of(info->device) : nullptr;
  if (d) id.verbs = d->ctx;
  id.port_num = info->port_num;
  id.ps = static_cast<rdma_port_space>(info->ps);
  from_sock(info->src, &id.route.addr.src_storage);
  from_sock(info->dst, &id.route.addr.dst_storage);
  std::memcpy(id.route.addr.addr.ibaddr.sgid.raw, info->sgid.data(), 16);
  std::memcpy(id.route.addr.addr.ibaddr.dgid.raw, info->dgid.data(), 16);
  id.route.addr.addr.ibaddr.pkey = htons(info->pkey);
  if (info->num_paths > 0) {
    ibv_sa_path_rec& p = i->path;
    std::memcpy(p.sgid.raw, info->sgid.data(), 16);
    std::memcpy(p.dgid.raw, info->dgid.data(), 16);
    p.dlid = p.slid = htons(0xFFFF);  // permissive: RoCE has no LIDs
    p.hop_limit = info->hop_limit;
    p.traffic_class = info->traffic_class;
    p.reversible = htonl(0x80000000);
    p.numb_path = 1;
    p.pkey = htons(info->pkey);
    p.mtu_selector = 2;  // exactly
    p.mtu = static_cast<uint8_t>(info->path_mtu);
    p.rate_selector = 2;
    p.packet_life_time_selector = 2;
    p.packet_life_time = info->packet_life_time;
    id.route.path_rec = &p;
    id.route.num_paths = 1;
  } else {
    id.route.path_rec = nullptr;
    id.route.num_paths = 0;
  }
}

Channel* new_channel() noexcept {
  auto h = the_cm().create_channel();
  if (!h.ok()) {
    errno = h.error().value();
    return nullptr;
  }
  // The program's fd is an epoll fd holding the Cm's eventfd: readable while
  // events are queued, and its O_NONBLOCK flag is the program's own.
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    int e = errno;
    (void)the_cm().destroy_channel(*h);
    errno = e;
    return nullptr;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, the_cm().channel_fd(*h), &ev) != 0) {
    int e = errno;
    close(ep);
    (void)the_cm().destroy_channel(*h);
    errno = e;
    return nullptr;
  }
  auto* c = new (std::nothrow) Channel{};
  if (!c) {
    close(ep);
    (void)the_cm().destroy_channel(*h);
    errno = ENOMEM;
    return nullptr;
  }
  c->ch.fd = ep;
  c->h = *h;
  return c;
}

// The Channel struct itself is never freed: a thread of the program may call
// rdma_get_cm_event on it after another thread destroyed it (rping's
// cm_thread between two events), and then gets EBADF, as from read() on
// librdmacm's closed fd, instead of reading freed memory.
int free_channel(Channel* c) noexcept {
  if (std::error_code ec = the_cm().destroy_channel(c->h)) return fail(ec.value());
  c->destroyed = true;
  if (c->waiters.load() == 0) close(c->ch.fd);
  State::get().bury(c);
  return 0;
}

// A thread waiting on a channel that another thread destroyed: it stays
// blocked, without spinning, until the process ends (see Channel).
[[noreturn]] void wait_forever() noexcept {
  for (;;) pause();
}

struct Waiting {
  explicit Waiting(Channel* c) : c_(c) { ++c_->waiters; }
  ~Waiting() { --c_->waiters; }
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
  Channel* c_;
};

emu::QpType qp_type_for(rdma_port_space ps) noexcept {
  return (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? emu::QpType::kUD : emu::QpType::kRC;
}

bool is_ud(const rdma_cm_id* id) noexcept { return id->qp_type == IBV_QPT_UD; }

// A new Id on channel c (nullptr: synchronous, with a channel of its own).
Id* new_id(Channel* c, void* context, rdma_port_space ps, ibv_qp_type qpt, int* err) noexcept {
  bool sync = c == nullptr;
  if (sync) {
    c = new_channel();
    if (!c) {
      *err = errno;
      return nullptr;
    }
  }
  auto* i = new (std::nothrow) Id{};
  if (!i) {
    if (sync) free_channel(c);
    *err = ENOMEM;
    return nullptr;
  }
  auto h = the_cm().create_id(c->h, static_cast<cm::PortSpace>(ps), static_cast<emu::QpType>(qpt), i);
  if (!h.ok()) {
    if (sync) free_channel(c);
    delete i;
    *err = h.error().value();
    return nullptr;
  }
  i->h = *h;
  i->sync = sync;
  i->id.channel = &c->ch;
  i->id.context = context;
  i->id.ps = ps;
  i->id.qp_type = qpt;
  return i;
}

int get_event(rdma_event_channel* channel, rdma_cm_event** event) noexcept;

// ucma_complete: a synchronous id waits for the event its call causes.
int complete(Id* i) noexcept {
  if (!i->sync) return 0;
  if (i->id.event) {
    rdma_ack_cm_event(i->id.event);
    i->id.event = nullptr;
  }
  if (get_event(i->id.channel, &i->id.event) != 0) return -1;
  rdma_cm_event* e = i->id.event;
  if (e->status) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(e->status < 0 ? -e->status : e->status);
  }
  return 0;
}

int modify_qp_to(Id* i, ibv_qp_state state, int override_rd) noexcept {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (rdma_init_qp_attr(&i->id, &attr, &mask) != 0) return -1;
  if (state == IBV_QPS_RTR && override_rd != RDMA_MAX_RESP_RES) {
    attr.max_dest_rd_atomic = static_cast<uint8_t>(override_rd);
  }
  if (state == IBV_QPS_RTS && override_rd != RDMA_MAX_INIT_DEPTH) {
    attr.max_rd_atomic = static_cast<uint8_t>(override_rd);
  }
  int r = ibv_modify_qp(i->id.qp, &attr, mask);
  if (r != 0) return fail(r > 0 ? r : errno);
  return 0;
}

// ucma_modify_qp_rtr + rts (INIT first: "update QP attributes from default values").
int modify_qp_rtr_rts(Id* i) noexcept {
  if (!i->id.qp) return 0;
  if (modify_qp_to(i, IBV_QPS_INIT, 0) != 0) return -1;
  if (modify_qp_to(i, IBV_QPS_RTR, i->responder_resources) != 0) return -1;
  return modify_qp_to(i, IBV_QPS_RTS, i->initiator_depth);
}

void modify_qp_err(Id* i) noexcept {
  if (!i->id.qp) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(i->id.qp, &attr, IBV_QP_STATE);
}

void copy_conn(const cm::Event& e, rocelab::rdmacm_shim::Event* out) noexcept {
  rdma_conn_param& c = out->ev.param.conn;
  c.private_data = e.private_data_len ? out->data : nullptr;
  c.private_data_len = e.private_data_len;
  c.responder_resources = e.conn.responder_resources;
  c.initiator_depth = e.conn.initiator_depth;
  c.flow_control = e.conn.flow_control;
  c.retry_count = e.conn.retry_count;
  c.rnr_retry_count = e.conn.rnr_retry_count;
  c.srq = e.conn.srq;
  c.qp_num = e.conn.qp_num;
}

void copy_ud(const cm::Event& e, rocelab::rdmacm_shim::Event* out) noexcept {
  rdma_ud_param& u = out->ev.param.ud;
  u.private_data = e.private_data_len ? out->data : nullptr;
  u.private_data_len = e.private_data_len;
  rocelab::verbs_shim::to_ibv(e.ud.ah_attr, &u.ah_attr);
  u.qp_num = e.ud.qp_num;
  u.qkey = e.ud.qkey;
}

int get_event(rdma_event_channel* channel, rdma_cm_event** event) noexcept {
  if (!channel || !event) return fail(EINVAL);
  Channel* c = chan_of(channel);
  if (c->destroyed) return fail(EBADF);  // as read() on the closed fd
  Waiting waiting(c);
  for (;;) {
    cm::Event e;
    std::error_code ec = the_cm().get_event(c->h, &e);
    if (c->destroyed) wait_forever();
    if (ec == std::errc::resource_unavailable_try_again) {
      int fl = fcntl(c->ch.fd, F_GETFL);
      if (fl >= 0 && (fl & O_NONBLOCK)) return fail(EAGAIN);
      pollfd p{c->ch.fd, POLLIN, 0};
      if (poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
      continue;
    }
    if (ec) return fail(ec.value());
    auto* out = new (std::nothrow) rocelab::rdmacm_shim::Event{};
    if (!out) return fail(ENOMEM);
    std::memcpy(out->data, e.private_data.data(), e.private_data_len);
    out->ev.event = static_cast<rdma_cm_event_type>(e.type);
    out->ev.status = e.status;
    Id* i = static_cast<Id*>(e.id_context);
    switch (e.type) {
      case cm::EventType::kConnectRequest: {
        Id* listen = static_cast<Id*>(e.listen_context);
        if (!listen) break;
        int err = 0;
        // The new id: the listener's channel and context (ucma_alloc_id), or
        // a channel of its own when the listener is synchronous.
        auto* ni = new (std::nothrow) Id{};
        if (!ni) {
          err = ENOMEM;
        } else {
          ni->h = e.id;
          ni->id.channel = listen->id.channel;
          ni->id.context = listen->id.context;
          ni->id.ps = listen->id.ps;
          ni->id.qp_type = listen->id.qp_type;
          (void)the_cm().set_context(e.id, ni);
          if (listen->sync) {
            Channel* own = new_channel();
            if (own && !the_cm().migrate_id(e.id, own->h)) {
              ni->id.channel = &own->ch;
              ni->sync = true;
            } else if (own) {
              free_channel(own);
            }
          }
          ni->responder_resources = e.conn.responder_resources;
          ni->initiator_depth = e.conn.initiator_depth;
          refresh(ni);
        }
        (void)err;
        i = ni;
        out->ev.listen_id = &listen->id;
        if (ni && is_ud(&ni->id)) {
          copy_ud(e, out);
        } else {
          copy_conn(e, out);
        }
        break;
      }
      case cm::EventType::kConnectResponse:
        copy_conn(e, out);
        if (i && i->id.qp) {
          // ucma_process_conn_resp: the QP to RTR and RTS, then the RTU.
          int r = modify_qp_rtr_rts(i);
          if (r == 0) r = result(the_cm().establish(i->h));
          if (r == 0) {
            out->ev.event = RDMA_CM_EVENT_ESTABLISHED;
          } else {
            out->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
            out->ev.status = -errno;
          }
        }
        break;
      case cm::EventType::kRejected:
        copy_conn(e, out);
        if (i) modify_qp_err(i);
        break;
      case cm::EventType::kEstablished:
        if (i && is_ud(&i->id)) {
          copy_ud(e, out);
        } else {
          copy_conn(e, out);
        }
        break;
      case cm::EventType::kMulticastJoin:
      case cm::EventType::kMulticastError:
        copy_ud(e, out);
        out->ev.param.ud.private_data = e.mc_context;
        out->ev.param.ud.private_data_len = 0;
        if (e.type == cm::EventType::kMulticastJoin && i && i->id.qp) {
          // ucma_process_join: attach the QP to the group.
          ibv_gid mgid;
          std::memcpy(mgid.raw, e.ud.ah_attr.dgid.data(), 16);
          if (int r = ibv_attach_mcast(i->id.qp, &mgid, 0)) {  // a positive errno
            out->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
            out->ev.status = -r;
          }
        }
        break;
      case cm::EventType::kAddrResolved:
      case cm::EventType::kAddrError:
      case cm::EventType::kRouteResolved:
      case cm::EventType::kRouteError:
      case cm::EventType::kConnectError:
      case cm::EventType::kUnreachable:
      case cm::EventType::kDisconnected:
      case cm::EventType::kDeviceRemoval:
      case cm::EventType::kAddrChange:
      case cm::EventType::kTimewaitExit:
        copy_conn(e, out);
        break;
    }
    if (!i) {  // an id that went away between queueing and now
      delete out;
      continue;
    }
    refresh(i);
    out->ev.id = &i->id;
    {
      std::lock_guard lock(State::get().ack_mu);
      ++i->events_reported;
    }
    *event = &out->ev;
    return 0;
  }
}

int do_connect_param(Id* i, rdma_conn_param* p, cm::ConnParam* cp, bool accept) noexcept {
  Dev* d = i->id.verbs ? State::get().dev_of(i->id.verbs) : nullptr;
  uint8_t max_rr = d ? d->max_responder_resources : 0, max_id = d ? d->max_initiator_depth : 0;
  // ucma_valid_param
  if (i->id.ps == RDMA_PS_TCP) {
    if (!i->id.qp && !p) return EINVAL;
    if (p && p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > max_rr) return EINVAL;
    if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > max_id) return EINVAL;
  }
  if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH) {
    i->initiator_depth = accept ? std::min(i->initiator_depth, max_id) : max_id;
  } else {
    i->initiator_depth = p->initiator_depth;
  }
  if (!p || p->responder_resources == RDMA_MAX_RESP_RES) {
    i->responder_resources = accept ? std::min(i->responder_resources, max_rr) : max_rr;
  } else {
    i->responder_resources = p->responder_resources;
  }
  cp->responder_resources = i->responder_resources;
  cp->initiator_depth = i->initiator_depth;
  cp->qp_num = i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0);
  cp->srq = i->id.srq ? 1 : (p ? p->srq : 0);
  if (p) {
    cp->flow_control = p->flow_control;
    cp->retry_count = p->retry_count;
    cp->rnr_retry_count = p->rnr_retry_count;
    if (p->private_data && p->private_data_len) {
      cp->private_data = {static_cast<const uint8_t*>(p->private_data), p->private_data_len};
    }
  } else {
    cp->retry_count = 7;
    cp->rnr_retry_count = 7;
  }
  return 0;
}

// ucma_create_cqs: a completion channel and CQ for each side not given.
int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) noexcept {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) return -1;
    id->recv_cq = ibv_create_cq(id->verbs, static_cast<int>(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) return -1;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) return -1;
    id->send_cq = ibv_create_cq(id->verbs, static_cast<int>(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) return -1;
  }
  return 0;
}

void destroy_cqs(rdma_cm_id* id) noexcept {
  if (id->recv_cq) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq == id->recv_cq) id->send_cq = nullptr;
    id->recv_cq = nullptr;
  }
  if (id->recv_cq_channel) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    if (id->send_cq_channel == id->recv_cq_channel) id->send_cq_channel = nullptr;
    id->recv_cq_channel = nullptr;
  }
  if (id->send_cq) {
    ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
  }
  if (id->send_cq_channel) {
    ibv_destroy_comp_channel(id->send_cq_channel);
    id->send_cq_channel = nullptr;
  }
}

// ucma_init_conn_qp / ucma_init_ud_qp.
int init_new_qp(Id* i, ibv_qp* qp) noexcept {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(&i->id, &attr, &mask) != 0) return -1;
  int r = ibv_modify_qp(qp, &attr, mask);
  if (r) return fail(r);
  if (!is_ud(&i->id)) return 0;
  std::memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTR;
  r = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
  if (r) return fail(r);
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  r = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (r) return fail(r);
  return 0;
}

const char* const kEventNames[] = {
    "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
    "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
    "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
    "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
    "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
    "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

}  // namespace

// ---------------------------------------------------------------- channels

extern "C" rdma_event_channel* rdma_create_event_channel(void) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_create_event_channel, V10);
    if (!real) {
      errno = ENOSYS;
      return nullptr;
    }
    return real();
  }
  Channel* c = new_channel();
  return c ? &c->ch : nullptr;
}

extern "C" void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_event_channel, V10)) real(channel);
    return;
  }
  if (channel) (void)free_channel(chan_of(channel));
}

extern "C" int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!emulated()) ROCELAB_FORWARD(rdma_get_cm_event, V10, -1, channel, event);
  return get_event(channel, event);
}

extern "C" int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!emulated()) ROCELAB_FORWARD(rdma_ack_cm_event, V10, -1, event);
  if (!event) return fail(EINVAL);
  if (event->id) {
    State& st = State::get();
    std::lock_guard lock(st.ack_mu);
    ++id_of(event->id)->events_acked;
    st.ack_cv.notify_all();
  }
  delete reinterpret_cast<rocelab::rdmacm_shim::Event*>(event);
  return 0;
}

extern "C" const char* rdma_event_str(rdma_cm_event_type event) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_event_str, V10)) return real(event);
  }
  auto n = static_cast<unsigned>(event);
  return n < std::size(kEventNames) ? kEventNames[n] : "UNKNOWN EVENT";
}

// ---------------------------------------------------------------- ids

extern "C" int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                              rdma_port_space ps) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_id, V10, -1, channel, id, context, ps);
  if (!id) return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) return fail(EINVAL);
  int err = 0;
  Id* i = new_id(channel ? chan_of(channel) : nullptr, context, ps,
                 static_cast<ibv_qp_type>(qp_type_for(ps)), &err);
  if (!i) return fail(err);
  *id = &i->id;
  return 0;
}

extern "C" int rdma_destroy_id(rdma_cm_id* id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_destroy_id, V10, -1, id);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().destroy_id(i->h)) return fail(ec.value());
  if (id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  {
    // As librdmacm: the events handed out for this id are acknowledged first
    // (another thread of the program may still be handling one).
    State& st = State::get();
    std::unique_lock lock(st.ack_mu);
    st.ack_cv.wait(lock, [i] { return i->events_acked >= i->events_reported; });
  }
  if (i->sync) (void)free_channel(chan_of(id->channel));
  delete i;
  return 0;
}

extern "C" int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (!emulated()) ROCELAB_FORWARD(rdma_migrate_id, V10, -1, id, channel);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  Channel* c = channel ? chan_of(channel) : new_channel();
  if (!c) return -1;
  if (std::error_code ec = the_cm().migrate_id(i->h, c->h)) {
    if (!channel) free_channel(c);
    return fail(ec.value());
  }
  if (i->sync) (void)free_channel(chan_of(id->channel));
  i->sync = channel == nullptr;
  id->channel = &c->ch;
  return 0;
}

extern "C" int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (!emulated()) ROCELAB_FORWARD(rdma_set_option, V10, -1, id, level, optname, optval, optlen);
  if (!id || !optval) return fail(EINVAL);
  Id* i = id_of(id);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        return result(the_cm().set_tos(i->h, *static_cast<uint8_t*>(optval)));
      case RDMA_OPTION_ID_REUSEADDR:
        if (optlen != sizeof(int)) return fail(EINVAL);
        return result(the_cm().set_reuseaddr(i->h, *static_cast<int*>(optval) != 0));
      case RDMA_OPTION_ID_AFONLY:
        if (optlen != sizeof(int)) return fail(EINVAL);
        return result(the_cm().set_afonly(i->h, *static_cast<int*>(optval) != 0));
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        return result(the_cm().set_ack_timeout(i->h, *static_cast<uint8_t*>(optval)));
      default:
        return fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB) return fail(ENOSYS);  // IB path records: not on RoCE
  return fail(ENOSYS);
}

// ---------------------------------------------------------------- addresses

extern "C" int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_bind_addr, V10, -1, id, addr);
  if (!id) return fail(EINVAL);
  cm::SockAddr a;
  if (int e = to_sock(addr, &a)) return fail(e);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().bind(i->h, a)) return fail(ec.value());
  refresh(i);
  return 0;
}

extern "C" int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  if (!emulated()) ROCELAB_FORWARD(rdma_resolve_addr, V10, -1, id, src_addr, dst_addr, timeout_ms);
  if (!id) return fail(EINVAL);
  cm::SockAddr dst;
  if (int e = to_sock(dst_addr, &dst)) return fail(e);
  std::optional<cm::SockAddr> src;
  if (src_addr && src_addr->sa_family != AF_UNSPEC) {
    cm::SockAddr s;
    if (int e = to_sock(src_addr, &s)) return fail(e);
    src = s;
  }
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().resolve_addr(i->h, src, dst, timeout_ms)) return fail(ec.value());
  refresh(i);
  return complete(i);
}

extern "C" int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (!emulated()) ROCELAB_FORWARD(rdma_resolve_route, V10, -1, id, timeout_ms);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().resolve_route(i->h, timeout_ms)) return fail(ec.value());
  refresh(i);
  return complete(i);
}

extern "C" __be16 rdma_get_src_port(rdma_cm_id* id) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_get_src_port, V10);
    return real ? real(id) : 0;
  }
  if (!id) return 0;
  const sockaddr* sa = &id->route.addr.src_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}

extern "C" __be16 rdma_get_dst_port(rdma_cm_id* id) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_get_dst_port, V10);
    return real ? real(id) : 0;
  }
  if (!id) return 0;
  const sockaddr* sa = &id->route.addr.dst_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}

// ---------------------------------------------------------------- connections

extern "C" int rdma_listen(rdma_cm_id* id, int backlog) {
  if (!emulated()) ROCELAB_FORWARD(rdma_listen, V10, -1, id, backlog);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().listen(i->h, backlog)) return fail(ec.value());
  refresh(i);
  if (State::get().explain()) {
    auto info = the_cm().query(i->h);
    if (info.ok()) {
      std::fprintf(stderr, "rocelab: rdma_listen on %s port %u (port space 0x%04x)\n",
                   info->src.ip.to_string().c_str(), info->src.port, static_cast<unsigned>(info->ps));
    }
  }
  return 0;
}

extern "C" int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!emulated()) ROCELAB_FORWARD(rdma_connect, V10, -1, id, conn_param);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  cm::ConnParam cp;
  if (int e = do_connect_param(i, conn_param, &cp, false)) return fail(e);
  if (std::error_code ec = the_cm().connect(i->h, cp)) return fail(ec.value());
  return complete(i);
}

extern "C" int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!emulated()) ROCELAB_FORWARD(rdma_accept, V10, -1, id, conn_param);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  cm::ConnParam cp;
  if (int e = do_connect_param(i, conn_param, &cp, true)) return fail(e);
  if (!is_ud(id) && id->qp) {
    if (modify_qp_rtr_rts(i) != 0) return -1;
  }
  if (std::error_code ec = the_cm().accept(i->h, cp)) return fail(ec.value());
  if (is_ud(id)) return 0;
  return complete(i);
}

extern "C" int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (!emulated()) ROCELAB_FORWARD(rdma_reject, V10, -1, id, private_data, private_data_len);
  if (!id) return fail(EINVAL);
  std::span<const uint8_t> pd;
  if (private_data && private_data_len) pd = {static_cast<const uint8_t*>(private_data), private_data_len};
  return result(the_cm().reject(id_of(id)->h, pd));
}

extern "C" int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (!emulated()) ROCELAB_FORWARD(rdma_reject_ece, V13, -1, id, private_data, private_data_len);
  // The kernel rejects with reason 35 (vendor option not supported); the Cm
  // sends 28 (consumer reject) with the private data.
  return rdma_reject(id, private_data, private_data_len);
}

extern "C" int rdma_establish(rdma_cm_id* id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_establish, V12, -1, id);
  if (!id) return fail(EINVAL);
  return result(the_cm().establish(id_of(id)->h));
}

extern "C" int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (!emulated()) ROCELAB_FORWARD(rdma_notify, V10, -1, id, event);
  if (!id) return fail(EINVAL);
  return result(the_cm().notify(id_of(id)->h, static_cast<emu::EventType>(event)));
}

extern "C" int rdma_disconnect(rdma_cm_id* id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_disconnect, V10, -1, id);
  if (!id) return fail(EINVAL);
  modify_qp_err(id_of(id));
  return result(the_cm().disconnect(id_of(id)->h));
}

extern "C" int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!emulated()) ROCELAB_FORWARD(rdma_init_qp_attr, V12, -1, id, qp_attr, qp_attr_mask);
  if (!id || !qp_attr || !qp_attr_mask) return fail(EINVAL);
  emu::QpAttr a;
  uint32_t mask = 0;
  auto state = static_cast<emu::QpState>(qp_attr->qp_state);
  if (std::error_code ec = the_cm().init_qp_attr(id_of(id)->h, state, &a, &mask)) return fail(ec.value());
  rocelab::verbs_shim::to_ibv(a, qp_attr);
  *qp_attr_mask = static_cast<int>(mask);
  return 0;
}

extern "C" int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!emulated()) ROCELAB_FORWARD(rdma_set_local_ece, V13, -1, id, ece);
  if (!id || !ece) return fail(EINVAL);
  id_of(id)->local_ece = *ece;
  return 0;
}

extern "C" int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!emulated()) ROCELAB_FORWARD(rdma_get_remote_ece, V13, -1, id, ece);
  if (!id || !ece) return fail(EINVAL);
  // RoCE CM MADs of a device without ECE carry none: vendor 0, no options.
  *ece = ibv_ece{};
  return 0;
}

// ---------------------------------------------------------------- QPs and SRQs

extern "C" int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_qp_ex, V10, -1, id, attr);
  if (!id || !attr) return fail(EINVAL);
  if (id->qp) return fail(EINVAL);
  if (!id->verbs) return fail(EINVAL);
  Dev* d = State::get().dev_of(id->verbs);
  if (!d) return fail(ENODEV);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd ? id->pd : State::get().default_pd(*d);
    if (!attr->pd) return fail(ENOMEM);
  } else if (attr->pd->context != id->verbs) {
    return fail(EINVAL);
  }
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq)) {
    return fail(EINVAL);
  }
  if (create_cqs(id, (attr->send_cq || id->send_cq) ? 0 : attr->cap.max_send_wr,
                 (attr->recv_cq || id->recv_cq) ? 0 : attr->cap.max_recv_wr) != 0) {
    int e = errno;
    destroy_cqs(id);
    return fail(e);
  }
  if (!attr->send_cq) attr->send_cq = id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
  if (id->srq && !attr->srq) attr->srq = id->srq;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (!qp) {
    int e = errno ? errno : ENOMEM;
    destroy_cqs(id);
    return fail(e);
  }
  if (init_new_qp(id_of(id), qp) != 0) {
    int e = errno;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(e);
  }
  id->pd = qp->pd;
  id->qp = qp;
  return 0;
}

extern "C" int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_qp, V10, -1, id, pd, qp_init_attr);
  if (!id || !qp_init_attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, qp_init_attr, sizeof *qp_init_attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd ? pd : id->pd;
  int r = rdma_create_qp_ex(id, &ex);
  std::memcpy(qp_init_attr, &ex, sizeof *qp_init_attr);
  return r;
}

extern "C" void rdma_destroy_qp(rdma_cm_id* id) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_qp, V10)) real(id);
    return;
  }
  if (!id) return;
  if (id->qp) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(id);
}

extern "C" int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_srq_ex, V10, -1, id, attr);
  if (!id || !attr || !id->verbs) return fail(EINVAL);
  Dev* d = State::get().dev_of(id->verbs);
  if (!d) return fail(ENODEV);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
    attr->srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    attr->pd = id->pd ? id->pd : State::get().default_pd(*d);
    if (!attr->pd) return fail(ENOMEM);
  }
  if (attr->srq_type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
      if (create_cqs(id, 0, attr->attr.max_wr) != 0) return -1;
      attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
      attr->cq = id->recv_cq;
    }
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (!srq) {
    int e = errno ? errno : ENOMEM;
    destroy_cqs(id);
    return fail(e);
  }
  id->pd = attr->pd;
  id->srq = srq;
  return 0;
}

extern "C" int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_srq, V10, -1, id, pd, attr);
  if (!id || !attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd ? pd : id->pd;
  int r = rdma_create_srq_ex(id, &ex);
  attr->attr = ex.attr;
  return r;
}

extern "C" void rdma_destroy_srq(rdma_cm_id* id) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_srq, V10)) real(id);
    return;
  }
  if (!id || !id->srq) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  if (!id->qp) destroy_cqs(id);
}

// ---------------------------------------------------------------- multicast

extern "C" int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  if (!emulated()) ROCELAB_FORWARD(rdma_join_multicast, V10, -1, id, addr, context);
  if (!id) return fail(EINVAL);
  cm::SockAddr g;
  if (int e = to_sock(addr, &g)) return fail(e);
  return result(the_cm().join_multicast(id_of(id)->h, g, context));
}

extern "C" int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  if (!emulated()) ROCELAB_FORWARD(rdma_join_multicast_ex, V11, -1, id, mc_join_attr, context);
  if (!id || !mc_join_attr) return fail(EINVAL);
  if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
  if ((mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
      mc_join_attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
      mc_join_attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
    return fail(EINVAL);
  }
  return rdma_join_multicast(id, mc_join_attr->addr, context);
}

extern "C" int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_leave_multicast, V10, -1, id, addr);
  if (!id) return fail(EINVAL);
  cm::SockAddr g;
  if (int e = to_sock(addr, &g)) return fail(e);
  if (std::error_code ec = the_cm().leave_multicast(id_of(id)->h, g)) return fail(ec.value());
  if (id->qp) {
    ibv_gid mgid;
    auto gid = g.ip.gid();
    std::memcpy(mgid.raw, gid.data(), 16);
    (void)ibv_detach_mcast(id->qp, &mgid, 0);
  }
  return 0;
}

// ---------------------------------------------------------------- devices

extern "C" ibv_context** rdma_get_devices(int* num_devices) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_get_devices, V10);
    if (!real) {
      errno = ENOSYS;
      return nullptr;
    }
    return real(num_devices);
  }
  auto& devs = State::get().devs();
  auto** list = static_cast<ibv_context**>(std::calloc(devs.size() + 1, sizeof(ibv_context*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t k = 0; k < devs.size(); ++k) list[k] = devs[k].ctx;
  if (num_devices) *num_devices = static_cast<int>(devs.size());
  return list;
}

extern "C" void rdma_free_devices(ibv_context** list) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_free_devices, V10)) real(list);
    return;
  }
  std::free(list);
}

// ---------------------------------------------------------------- synchronous endpoints

extern "C" int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                rdma_addrinfo** res) {
  // getaddrinfo and a little formatting: the real library's serves both kinds
  // of device (it asks the kernel for nothing on RoCE addresses).
  ROCELAB_FORWARD(rdma_getaddrinfo, V10, -1, node, service, hints, res);
}

extern "C" void rdma_freeaddrinfo(rdma_addrinfo* res) {
  if (auto real = ROCELAB_REAL_CM(rdma_freeaddrinfo, V10)) real(res);
}

extern "C" int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_create_ep, V10, -1, id, res, pd, qp_init_attr);
  if (!id || !res) return fail(EINVAL);
  auto ps = static_cast<rdma_port_space>(res->ai_port_space);
  auto qpt = static_cast<ibv_qp_type>(res->ai_qp_type);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) return fail(EINVAL);
  int err = 0;
  Id* i = new_id(nullptr, nullptr, ps, qpt, &err);
  if (!i) return fail(err);
  rdma_cm_id* cid = &i->id;
  int r = 0;
  if (qp_init_attr) qp_init_attr->qp_type = qpt;
  if (res->ai_flags & RAI_PASSIVE) {
    r = rdma_bind_addr(cid, res->ai_src_addr);
    if (r == 0 && qp_init_attr) {
      i->has_qp_init_attr = true;
      i->qp_init_attr = *qp_init_attr;
    }
    if (r == 0) cid->pd = pd;
  } else {
    r = rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : nullptr, res->ai_dst_addr, 2000);
    if (r == 0) r = rdma_resolve_route(cid, 2000);
    if (r == 0 && qp_init_attr) {
      r = rdma_create_qp(cid, pd, qp_init_attr);
    }
  }
  if (r != 0) {
    int e = errno;
    rdma_destroy_ep(cid);
    return fail(e);
  }
  *id = cid;
  return 0;
}

extern "C" void rdma_destroy_ep(rdma_cm_id* id) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_destroy_ep, V10)) real(id);
    return;
  }
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

extern "C" int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!emulated()) ROCELAB_FORWARD(rdma_get_request, V10, -1, listen, id);
  if (!listen || !id) return fail(EINVAL);
  Id* l = id_of(listen);
  if (!l->sync) return fail(EINVAL);
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (get_event(listen->channel, &event) != 0) return -1;
  int e = 0;
  if (event->status) {
    e = event->status < 0 ? -event->status : event->status;
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    e = EINVAL;
  } else if (l->has_qp_init_attr) {
    ibv_qp_init_attr attr = l->qp_init_attr;
    if (rdma_create_qp(event->id, listen->pd, &attr) != 0) e = errno;
  }
  if (e) {
    rdma_ack_cm_event(event);
    return fail(e);
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}
