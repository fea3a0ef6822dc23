// The UDP transport (udp_impl.h): opening it, its clock and timers, and the
// helper thread's wait and wake.
#include "emu/transport/udp_impl.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace rocelab::emu {

Result<std::unique_ptr<UdpTransport>> UdpTransport::open(const wire::IpAddr& local,
                                                        const UdpTransportConfig& cfg) {
  auto rx = bind_rx_socket(local, cfg.scope_id);
  if (!rx) return rx.error();
  return open(std::move(*rx), cfg);
}

Result<std::unique_ptr<UdpTransport>> UdpTransport::open(RxSocket rx_sock,
                                                        const UdpTransportConfig& cfg) {
  if (rx_sock.fd() < 0) return std::make_error_code(std::errc::bad_file_descriptor);
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->cfg.rx_batch = std::clamp<size_t>(cfg.rx_batch, 1, 1024);
  impl->local = rx_sock.address();
  const int fd = rx_sock.fd();
  set_rx_options(fd, impl->local.v6, cfg);

  boost::system::error_code ec;
  impl->rx.assign(impl->local.v6 ? udp::v6() : udp::v4(), rx_sock.release(), ec);
  if (ec) return std::error_code(ec.value(), std::system_category());
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return last_error();
  impl->wake_fd.assign(efd, ec);
  if (ec) {
    ::close(efd);
    return std::error_code(ec.value(), std::system_category());
  }
  int epfd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) return last_error();
  impl->group_ep.assign(epfd, ec);
  if (ec) {
    ::close(epfd);
    return std::error_code(ec.value(), std::system_category());
  }

  const size_t n = impl->cfg.rx_batch;
  impl->rx_buf.resize(n * kRxSlotBytes);
  impl->rx_msgs.resize(n);
  impl->rx_iov.resize(n);
  impl->rx_from.resize(n);
  impl->rx_cmsg.resize(n);

  Impl* raw = impl.get();
  impl->timers.set_on_arm([raw](Nanos deadline) {
    int64_t d = deadline.count();
    int64_t cur = raw->timer_hint.load();
    while (d < cur && !raw->timer_hint.compare_exchange_weak(cur, d)) {
    }
    // A thread asleep for a later deadline must come back for this one.
    if (d < raw->sleeping_until.load()) {
      uint64_t one = 1;
      [[maybe_unused]] auto r = ::write(raw->wake_fd.native_handle(), &one, sizeof one);
    }
  });
  return std::unique_ptr<UdpTransport>(new UdpTransport(std::move(impl)));
}

UdpTransport::UdpTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UdpTransport::~UdpTransport() = default;

const wire::IpAddr& UdpTransport::local_address() const { return impl_->local; }
Nanos UdpTransport::now() const {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}
TransportStats UdpTransport::stats() const { return impl_->stats; }
UdpStats UdpTransport::udp_stats() const { return impl_->ustats; }

void UdpTransport::set_control_handler(uint32_t magic,
                                       std::function<void(const Datagram&)> on_control) {
  impl_->control_magic = magic;
  impl_->on_control = std::move(on_control);
}

std::unique_ptr<Timer> UdpTransport::make_timer(std::function<void()> on_expiry) {
  return impl_->timers.make_timer(std::move(on_expiry));
}


// ---- wait / wake ----

void UdpTransport::wait(Nanos deadline) {
  Impl& m = *impl_;
  // Publish the deadline before reading the timer hint: a timer armed meanwhile
  // for an earlier time then sees it and wakes us (see set_on_arm).
  m.sleeping_until.store(deadline.count());
  const Nanos until = std::min(deadline, Nanos(m.timer_hint.load()));
  if (until > now() && !m.rx_backlog.load()) {
    bool fired = false;
    auto done = [&fired](const boost::system::error_code&) { fired = true; };
    m.io.restart();
    m.rx.async_wait(udp::socket::wait_read, done);
    m.wake_fd.async_wait(asio::posix::stream_descriptor::wait_read, done);
    m.group_ep.async_wait(asio::posix::stream_descriptor::wait_read, done);
    m.sleep_timer.expires_at(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(until)));
    m.sleep_timer.async_wait(done);
    m.io.run_one();
    boost::system::error_code ec;
    m.rx.cancel(ec);
    m.wake_fd.cancel(ec);
    m.group_ep.cancel(ec);
    m.sleep_timer.cancel();
    m.io.poll();  // completes the cancelled waits
  }
  uint64_t count;
  [[maybe_unused]] auto r = ::read(m.wake_fd.native_handle(), &count, sizeof count);
  m.sleeping_until.store(kNotSleeping);
}

void UdpTransport::sleep_until(Nanos deadline) {
  Impl& m = *impl_;
  // ppoll on the wake eventfd alone, not Asio: Asio's reactor has the
  // receive socket in its epoll set and would be woken by every arrival.
  // sleeping_until stays unset, so arming a timer does not wake this either.
  const Nanos left = deadline - now();
  if (left > Nanos(0)) {
    pollfd p{m.wake_fd.native_handle(), POLLIN, 0};
    const timespec ts{static_cast<time_t>(left.count() / 1'000'000'000),
                      static_cast<long>(left.count() % 1'000'000'000)};
    ::ppoll(&p, 1, &ts, nullptr);
  }
  uint64_t count;
  [[maybe_unused]] auto r = ::read(m.wake_fd.native_handle(), &count, sizeof count);
}

void UdpTransport::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(impl_->wake_fd.native_handle(), &one, sizeof one);
}

}  // namespace rocelab::emu
