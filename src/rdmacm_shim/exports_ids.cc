// rdma_cm ids: rdma_create_id, rdma_destroy_id, rdma_migrate_id (to another
// channel, or to none: synchronous) and rdma_set_option.
#include "rdmacm_shim/exports.h"

#include <mutex>
#include <new>

#include "rdmacm_shim/real_rdmacm.h"

namespace rocelab::rdmacm_shim {
namespace {

emu::QpType qp_type_for(rdma_port_space ps) noexcept {
  return (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? emu::QpType::kUD : emu::QpType::kRC;
}

}  // namespace

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

}  // namespace rocelab::rdmacm_shim

using rocelab::rdmacm_shim::chan_of;
using rocelab::rdmacm_shim::Channel;
using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::free_channel;
using rocelab::rdmacm_shim::Id;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::new_channel;
using rocelab::rdmacm_shim::new_id;
using rocelab::rdmacm_shim::qp_type_for;
using rocelab::rdmacm_shim::result;
using rocelab::rdmacm_shim::State;
using rocelab::rdmacm_shim::the_cm;

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
