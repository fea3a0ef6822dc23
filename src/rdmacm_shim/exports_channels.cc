// Event channels and the events on them: rdma_create_event_channel,
// rdma_destroy_event_channel, rdma_get_cm_event (the Cm's events turned into
// librdmacm's, with what librdmacm does on the way: a new id for a connection
// request, the QP moved on CONNECT_RESPONSE, attached on MULTICAST_JOIN),
// rdma_ack_cm_event and rdma_event_str.
#include "rdmacm_shim/exports.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <thread>

#include "rdmacm_shim/real_rdmacm.h"
#include "verbs_shim/convert.h"

namespace rocelab::rdmacm_shim {
namespace {

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

const char* const kEventNames[] = {
    "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
    "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
    "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
    "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
    "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
    "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

}  // namespace

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

int free_channel(Channel* c) noexcept {
  if (std::error_code ec = the_cm().destroy_channel(c->h)) return fail(ec.value());
  c->destroyer = std::this_thread::get_id();
  c->destroyed = true;
  if (c->waiters.load() == 0) close(c->ch.fd);
  State::get().bury(c);
  return 0;
}

int get_event(rdma_event_channel* channel, rdma_cm_event** event) noexcept {
  if (!channel || !event) return fail(EINVAL);
  Channel* c = chan_of(channel);
  if (c->destroyed) {
    if (c->destroyer == std::this_thread::get_id()) return fail(EBADF);  // as read() on the closed fd
    wait_forever();
  }
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

}  // namespace rocelab::rdmacm_shim

using rocelab::rdmacm_shim::chan_of;
using rocelab::rdmacm_shim::Channel;
using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::free_channel;
using rocelab::rdmacm_shim::get_event;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::kEventNames;
using rocelab::rdmacm_shim::new_channel;
using rocelab::rdmacm_shim::State;

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
