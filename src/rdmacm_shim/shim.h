// The objects librocelab_rdmacm.so hands out for emulated devices, and the
// process-wide state behind them (docs/rdma-cm.md, sections 1 and 8). Each
// object is a standard-layout struct whose first member is the librdmacm
// struct the program sees, so the two pointers convert both ways.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "cm/rdma_cm.h"
#include "rdmacm_shim/reaper.h"

namespace rocelab::rdmacm_shim {

// One emulated device: the context the shim keeps open on it (id->verbs), its
// engine, and the PD librdmacm would allocate for ids without one.
struct Dev {
  ibv_context* ctx = nullptr;
  emu::Device* engine = nullptr;
  ibv_pd* pd = nullptr;  // allocated on first need
  uint8_t max_responder_resources = 0, max_initiator_depth = 0;
};

struct Channel {
  rdma_event_channel ch;  // ch.fd: an epoll fd holding the Cm channel's eventfd
  cm::ChannelHandle h = 0;
  // Threads inside rdma_get_cm_event. A channel destroyed while one waits
  // stays allocated (and its fd open, so the number is not reused under the
  // waiter), and the waiter waits for ever, as a thread blocked in read() on
  // librdmacm's fd does when another thread closes it (rping's cm_thread).
  // A thread other than the destroyer that comes back to the channel just
  // after it was destroyed waits for ever too: in librdmacm that is a read of
  // freed memory whose outcome depends on which thread got there first, and a
  // program's event-loop thread is almost always back in read() by then.
  std::atomic<int> waiters{0};
  std::thread::id destroyer;  // written before destroyed is set
  std::atomic<bool> destroyed{false};
};

struct Id {
  rdma_cm_id id;
  cm::IdHandle h = 0;
  bool sync = false;       // created without a channel: calls wait for their event
  ibv_sa_path_rec path{};  // id.route.path_rec once the route is known
  // The connection request's values (rdma_accept's defaults), then what
  // rdma_connect / rdma_accept settled on (the QP's RTR / RTS overrides).
  uint8_t responder_resources = 0, initiator_depth = 0;
  bool has_qp_init_attr = false;  // rdma_create_ep on a passive id: rdma_get_request's QP
  ibv_qp_init_attr qp_init_attr{};
  ibv_ece local_ece{};
  // Events handed out for this id and those acknowledged (State::ack_mu):
  // rdma_destroy_id waits until they are equal, as librdmacm's does.
  uint64_t events_reported = 0, events_acked = 0;
};

struct Event {
  rdma_cm_event ev;
  uint8_t data[cm::kMaxPrivateData];
};

template <typename T>
constexpr bool kMirror = std::is_standard_layout_v<T>;
static_assert(kMirror<Channel> && kMirror<Event> && kMirror<Id>);
static_assert(offsetof(Channel, ch) == 0);

inline Id* id_of(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* chan_of(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

// The process-wide state. emulated() is false when the verbs shim is absent or
// has no emulated device: then every call goes to the real librdmacm.
class State {
 public:
  static State& get() noexcept;
  bool emulated() const noexcept { return cm_ != nullptr; }
  // rocelab run --explain (ROCELAB_EXPLAIN): say on stderr when an id listens.
  bool explain() const noexcept { return explain_; }
  cm::Cm& cm() noexcept { return *cm_; }
  Dev* dev_of(const emu::Device* engine) noexcept;
  Dev* dev_of(const ibv_context* ctx) noexcept;
  std::vector<Dev>& devs() noexcept { return devs_; }
  ibv_pd* default_pd(Dev& d) noexcept;
  // Guards Id::events_reported/acked; ack_cv is signalled on every ack.
  std::mutex ack_mu;
  std::condition_variable ack_cv;
  // Destroyed channels, kept (see free_channel in exports.h).
  void bury(Channel* c) noexcept;

 private:
  State() noexcept;
  static void at_exit() noexcept;
  // Never deleted: other threads may still call in while the process exits
  // (at_exit only takes the devices away from it).
  cm::Cm* cm_ = nullptr;
  Reaper reaper_;
  bool explain_ = false;
  std::vector<Dev> devs_;
  std::vector<Channel*> graveyard_;
  std::mutex mu_;
};

}  // namespace rocelab::rdmacm_shim
