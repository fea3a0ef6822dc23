#include "emu/transport/sim_fabric.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "emu/transport/timer_queue.h"
#include "emu/transport/unreachable_set.h"

namespace rocelab::emu {

namespace {
constexpr size_t kMaxUdpPayload = 65507;
constexpr size_t kEthOverhead = wire::kEthHeaderLen + 4;  // header + FCS, for serialization
}  // namespace

// One port: the transport of one attached address.
class SimPort final : public Transport {
 public:
  SimPort(SimFabric& fabric, const wire::IpAddr& addr) : fabric_(fabric), addr_(addr) {}
  ~SimPort() override {
    for (const Arrival& a : arrivals_) {
      fabric_.pool_.release(a.buf);
      ++fabric_.stats_.dropped_detached;
    }
    fabric_.detach(this);
  }

  const wire::IpAddr& local_address() const override { return addr_; }

  size_t send(std::span<const Datagram> batch) override {
    ++stats_.tx_batches;
    size_t sent = 0;
    for (const Datagram& d : batch) {
      if (d.payload.size() > kMaxUdpPayload) {
        ++stats_.tx_errors;
        ++fabric_.stats_.dropped_oversize;
        continue;
      }
      ++stats_.tx_datagrams;
      stats_.tx_bytes += d.payload.size();
      ++sent;
      Nanos depart = fabric_.now_;
      if (fabric_.cfg_.link_bits_per_sec != 0 && !fabric_.cfg_.network) {
        const uint64_t bits =
            8 * (d.payload.size() + wire::ip_udp_header_len(d.ip.dst.v6) + kEthOverhead);
        depart = std::max(depart, busy_until_) +
                 Nanos(bits * 1'000'000'000ull / fabric_.cfg_.link_bits_per_sec);
        busy_until_ = depart;
      }
      if (d.ip.dst.is_multicast()) {
        // A copy for every member (the sender too, when it joined); no member
        // is no error: multicast has no ICMP unreachable.
        for (const SimFabric::Member& m : fabric_.members_) {
          if (m.group == d.ip.dst) fabric_.transmit(*this, *m.port, d, depart);
        }
        continue;
      }
      SimPort* dst = fabric_.find(d.ip.dst);
      if (dst == nullptr) {
        ++fabric_.stats_.dropped_no_port;
        unreachable_.add(d.ip.dst);  // what ICMP port unreachable tells a UDP sender
        continue;
      }
      fabric_.transmit(*this, *dst, d, depart);
    }
    return sent;
  }

  size_t poll(const RecvHandler& handler, size_t max) override {
    timers_.run_due(fabric_.now_);
    if (fabric_.cfg_.network) fabric_.cfg_.network->run(fabric_.now_);
    size_t n = 0;
    while (n < max && !arrivals_.empty() && arrivals_.front().at <= fabric_.now_) {
      std::pop_heap(arrivals_.begin(), arrivals_.end(), later);
      const Arrival a = arrivals_.back();
      arrivals_.pop_back();
      Datagram d{a.ip, std::as_const(fabric_.pool_).bytes(a.buf, a.len)};
      ++stats_.rx_datagrams;
      stats_.rx_bytes += a.len;
      ++fabric_.stats_.delivered;
      ++n;
      handler(d);  // may send, even to this port
      fabric_.pool_.release(a.buf);
    }
    if (n != 0) ++stats_.rx_batches;
    return n;
  }

  void wait(Nanos deadline) override {
    if (woken_.exchange(false)) return;
    fabric_.advance(deadline);
  }
  void wake() override { woken_.store(true); }

  Nanos now() const override { return fabric_.now_; }
  std::unique_ptr<Timer> make_timer(std::function<void()> on_expiry) override {
    return timers_.make_timer(std::move(on_expiry));
  }
  TransportStats stats() const override { return stats_; }
  size_t take_unreachable(std::span<wire::IpAddr> out) override { return unreachable_.take(out); }
  std::error_code join_group(const wire::IpAddr& group) override {
    if (!group.is_multicast()) return std::make_error_code(std::errc::invalid_argument);
    for (SimFabric::Member& m : fabric_.members_) {
      if (m.port == this && m.group == group) {
        ++m.joins;
        return {};
      }
    }
    fabric_.members_.push_back({group, this, 1});
    return {};
  }
  void leave_group(const wire::IpAddr& group) override {
    auto& ms = fabric_.members_;
    for (auto it = ms.begin(); it != ms.end(); ++it) {
      if (it->port == this && it->group == group) {
        if (--it->joins == 0) ms.erase(it);
        return;
      }
    }
  }

  Nanos next_event() {
    Nanos t = timers_.next_deadline();
    if (!arrivals_.empty()) t = std::min(t, arrivals_.front().at);
    return t;
  }
  size_t pending() const { return arrivals_.size(); }
  bool timers_armed() const { return timers_.armed_count() != 0; }
  // SimFabric::reset: what is in flight to this port, its stats, its link.
  void reset() {
    for (const Arrival& a : arrivals_) fabric_.pool_.release(a.buf);
    arrivals_.clear();
    busy_until_ = Nanos{0};
    woken_.store(false);
    stats_ = TransportStats{};
    unreachable_ = UnreachableSet{};
  }

  struct Arrival {
    Nanos at;
    uint64_t seq;  // send order: breaks ties between equal arrival times
    uint32_t buf, len;
    wire::IpUdpInfo ip;
  };
  void arrive(const Arrival& a) {
    arrivals_.push_back(a);
    std::push_heap(arrivals_.begin(), arrivals_.end(), later);
  }

 private:
  static bool later(const Arrival& a, const Arrival& b) {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }

  SimFabric& fabric_;
  wire::IpAddr addr_;
  TimerQueue timers_;
  std::vector<Arrival> arrivals_;  // a heap, earliest on top
  Nanos busy_until_{0};
  std::atomic<bool> woken_{false};
  TransportStats stats_;
  UnreachableSet unreachable_;
};

SimFabric::SimFabric(SimFabricConfig cfg) : cfg_(std::move(cfg)), now_(cfg_.start) {
  if (cfg_.network) cfg_.network->bind(&sink_);
}

void SimFabric::transmit(SimPort& from, SimPort& to_port, const Datagram& d, Nanos depart) {
  const uint32_t len = static_cast<uint32_t>(d.payload.size());
  const uint32_t buf = pool_.copy(d.payload);
  if (!cfg_.network) {
    to_port.arrive({depart + cfg_.latency, next_seq_++, buf, len, d.ip});
    return;
  }
  const SimPacket p{buf, len, next_seq_++, to_port.local_address(), d.ip};
  if (!cfg_.network->send(now_, from.local_address(), p)) {
    pool_.release(buf);
    ++stats_.dropped_no_route;
  }
}

void SimFabric::Sink::deliver(Nanos at, const SimPacket& p) {
  SimPort* port = f_.find(p.to);
  if (port == nullptr) {
    f_.pool_.release(p.buf);
    ++f_.stats_.dropped_detached;
    return;
  }
  port->arrive({at, p.seq, p.buf, p.len, p.ip});
}

void SimFabric::Sink::discard(const SimPacket& p) {
  f_.pool_.release(p.buf);
  ++f_.stats_.dropped_network;
}

std::span<const std::byte> SimFabric::Sink::payload(const SimPacket& p) const {
  return std::as_const(f_.pool_).bytes(p.buf, p.len);
}

SimFabric::~SimFabric() {
  if (cfg_.network) cfg_.network->bind(nullptr);
}

std::unique_ptr<Transport> SimFabric::attach(const wire::IpAddr& addr) {
  if (find(addr) != nullptr) return nullptr;
  if (cfg_.network && !cfg_.network->has_host(addr)) return nullptr;
  auto port = std::make_unique<SimPort>(*this, addr);
  ports_.push_back(port.get());
  return port;
}

SimPort* SimFabric::find(const wire::IpAddr& addr) const {
  for (SimPort* p : ports_) {
    if (p->local_address() == addr) return p;
  }
  return nullptr;
}

void SimFabric::detach(SimPort* port) {
  std::erase(ports_, port);
  std::erase_if(members_, [port](const Member& m) { return m.port == port; });
}

Nanos SimFabric::next_event() const {
  Nanos t = cfg_.network ? cfg_.network->next_event() : Nanos::max();
  for (SimPort* p : ports_) t = std::min(t, p->next_event());
  return t;
}

size_t SimFabric::in_flight() const {
  size_t n = cfg_.network ? cfg_.network->in_flight() : 0;
  for (SimPort* p : ports_) n += p->pending();
  return n;
}

Nanos SimFabric::advance(Nanos deadline) {
  const Nanos target = std::min(next_event(), deadline);
  if (target > now_) now_ = target;
  if (cfg_.network) cfg_.network->run(now_);
  return now_;
}

std::error_code SimFabric::reset() {
  for (const SimPort* p : ports_)
    if (p->timers_armed()) return std::make_error_code(std::errc::device_or_resource_busy);
  for (SimPort* p : ports_) p->reset();
  if (cfg_.network) cfg_.network->reset(cfg_.start);
  now_ = cfg_.start;
  next_seq_ = 0;
  stats_ = SimFabricStats{};
  return {};
}

bool SimFabric::run_until(const std::function<bool()>& done, Nanos deadline,
                          const std::function<void()>& step) {
  // How often step() may leave the clock stuck on a due event before we give up.
  constexpr int kMaxStuck = 100000;
  int stuck = 0;
  for (;;) {
    step();
    if (done()) return true;
    const Nanos next = next_event();
    if (next > deadline) {
      if (deadline > now_) now_ = deadline;
      return false;
    }
    if (next <= now_) {
      if (++stuck > kMaxStuck) return false;
    } else {
      stuck = 0;
    }
    advance(deadline);
  }
}

}  // namespace rocelab::emu
