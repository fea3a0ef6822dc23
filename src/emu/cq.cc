// Completion queues and completion channels (IBTA 11.4.2; ibv_req_notify_cq).
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "emu/engine.h"

namespace rocelab::emu {

void ChannelImpl::signal(Cq* cq) {
  {
    std::lock_guard lk(qmu);
    fired.push_back(cq);
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(efd, &one, sizeof one);
}

bool CqImpl::push(const Wc& wc, bool solicited) {
  if (count == static_cast<size_t>(cap)) {
    overflowed = true;
    return false;
  }
  Wc& slot = ring[(head + count) % ring.size()];
  slot = wc;
  slot.timestamp_ns = static_cast<uint64_t>(eng->transport->now().count());
  ++count;
  // IBTA 11.4.2.2: solicited-only fires on a solicited or an unsuccessful completion.
  const bool fire = arm == Arm::kNext ||
                    (arm == Arm::kSolicited && (solicited || wc.status != WcStatus::kSuccess));
  if (fire && ch) {
    arm = Arm::kNone;
    eng->armed_cqs.fetch_sub(1);
    ch->signal(this);
  }
  return true;
}

Result<CompChannel*> Device::create_comp_channel() {
  Engine& e = *engine_;
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return errc(errno);
  std::lock_guard lk(e.mu);
  auto ch = std::make_unique<ChannelImpl>();
  ch->eng = &e;
  ch->efd = fd;
  CompChannel* r = ch.get();
  e.channels.push_back(std::move(ch));
  return r;
}

std::error_code Device::destroy_comp_channel(CompChannel* c) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_channel(e, c)) return errc(EINVAL);
  auto* ch = static_cast<ChannelImpl*>(c);
  if (ch->users > 0) return errc(EBUSY);
  ::close(ch->efd);
  for (auto it = e.channels.begin(); it != e.channels.end(); ++it) {
    if (it->get() == ch) {
      e.channels.erase(it);
      break;
    }
  }
  return {};
}

int CompChannel::fd() const { return static_cast<const ChannelImpl*>(this)->efd; }

std::error_code CompChannel::get_event(Cq** cq) {
  auto* ch = static_cast<ChannelImpl*>(this);
  // A count whose CQ was destroyed before its event was taken is passed over.
  for (;;) {
    uint64_t v = 0;
    if (::read(ch->efd, &v, sizeof v) != sizeof v) return errc(errno);
    std::lock_guard lk(ch->qmu);
    if (ch->fired.empty()) continue;
    Cq* c = ch->fired.front();
    ch->fired.pop_front();
    static_cast<CqImpl*>(c)->delivered++;
    if (cq) *cq = c;
    return {};
  }
}

Result<Cq*> Device::create_cq(int cqe, CompChannel* channel, int comp_vector) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (cqe < 1 || cqe > e.dattr.max_cqe || comp_vector < 0) return errc(EINVAL);
  if (channel && !device_owns_channel(e, channel)) return errc(EINVAL);
  auto cq = std::make_unique<CqImpl>();
  cq->eng = &e;
  cq->num = e.next_cq_num++;
  cq->ch = static_cast<ChannelImpl*>(channel);
  cq->cap = cqe;
  cq->ring.resize(static_cast<size_t>(cqe));
  if (cq->ch) cq->ch->users++;
  Cq* r = cq.get();
  e.cqs.push_back(std::move(cq));
  return r;
}

std::error_code Device::destroy_cq(Cq* c) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_cq(e, c)) return errc(EINVAL);
  auto* cq = static_cast<CqImpl*>(c);
  if (cq->users > 0) return errc(EBUSY);
  if (cq->ch) {
    if (cq->arm != CqImpl::Arm::kNone) e.armed_cqs.fetch_sub(1);
    cq->ch->users--;
    std::lock_guard qlk(cq->ch->qmu);  // forget events of this CQ not yet taken
    std::erase(cq->ch->fired, c);
  }
  e.forget_async(c);
  for (auto it = e.cqs.begin(); it != e.cqs.end(); ++it) {
    if (it->get() == cq) {
      e.cqs.erase(it);
      break;
    }
  }
  return {};
}

int Cq::capacity() const { return static_cast<const CqImpl*>(this)->cap; }

std::error_code Cq::resize(int cqe) {
  auto* cq = static_cast<CqImpl*>(this);
  std::lock_guard lk(cq->eng->mu);
  if (cqe < 1 || cqe > cq->eng->dattr.max_cqe || static_cast<size_t>(cqe) < cq->count)
    return errc(EINVAL);
  // A new ring, the held completions first and oldest first. Resizing is a
  // control-path verb: it may allocate (the data path never does).
  std::vector<Wc> ring(static_cast<size_t>(cqe));
  for (size_t i = 0; i < cq->count; ++i) ring[i] = cq->ring[(cq->head + i) % cq->ring.size()];
  cq->ring = std::move(ring);
  cq->head = 0;
  cq->cap = cqe;
  return {};
}
CompChannel* Cq::channel() const { return static_cast<const CqImpl*>(this)->ch; }

int Cq::poll(std::span<Wc> out) {
  auto* cq = static_cast<CqImpl*>(this);
  std::lock_guard lk(cq->eng->mu);
  if (cq->count < out.size()) {
    cq->eng->progress_locked();
    // Seen by the helper thread, which stands back while this goes on
    // (device.cc, helper_loop).
    Device::Engine& e = *cq->eng;
    const int64_t now = e.transport->now().count();
    const int64_t prev = e.app_polled.load(std::memory_order_relaxed);
    e.app_polled.store(now, std::memory_order_relaxed);
    // A poll in a loop wakes a helper on the socket to stand back, unless a
    // CQ is armed: then the helper stays there, and waking it would only
    // cost this poll a system call and the helper a round.
    if (now - prev < Device::Engine::kPolling.count() && e.helper_on_socket.load(std::memory_order_relaxed) &&
        e.armed_cqs.load(std::memory_order_relaxed) == 0 && e.helper_on_socket.exchange(false))
      e.transport->wake();
  }
  size_t n = 0;
  while (n < out.size() && cq->count > 0) {
    out[n++] = cq->ring[cq->head];
    cq->head = (cq->head + 1) % cq->ring.size();
    --cq->count;
  }
  return static_cast<int>(n);
}

std::error_code Cq::req_notify(bool solicited_only) {
  auto* cq = static_cast<CqImpl*>(this);
  std::lock_guard lk(cq->eng->mu);
  const bool was_armed = cq->arm != CqImpl::Arm::kNone;
  // Arming "next" overrides "solicited"; arming "solicited" keeps "next".
  if (!solicited_only) {
    cq->arm = CqImpl::Arm::kNext;
  } else if (cq->arm == CqImpl::Arm::kNone) {
    cq->arm = CqImpl::Arm::kSolicited;
  }
  // The application may now block for the event, which the helper thread
  // delivers: it must not stand back while this CQ is armed (device.cc,
  // helper_loop).
  Device::Engine& e = *cq->eng;
  if (cq->ch && !was_armed) {
    e.armed_cqs.fetch_add(1);
    if (e.standing_back.load()) e.transport->wake();
  }
  return {};
}

void Cq::ack_events(unsigned n) { static_cast<CqImpl*>(this)->acked += n; }
unsigned Cq::events_delivered() const { return static_cast<const CqImpl*>(this)->delivered; }
unsigned Cq::events_acked() const { return static_cast<const CqImpl*>(this)->acked; }

}  // namespace rocelab::emu
