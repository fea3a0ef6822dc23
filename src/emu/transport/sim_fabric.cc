#include "emu/transport/sim_fabric.h"

#include <algorithm>
#include <atomic>
#include <cstring>
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
  SimPort(SimFabric& fabric, const wire::IpAddr& addr, uint32_t id) : fabric_(fabric), addr_(addr), id_(id) {
    timers_.set_on_arm([this](Nanos deadline) { fabric_.events_.lower(id_, deadline); });
    fabric_.events_.set(id_, Nanos::max());
  }
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
        if (!reporting_) {
          reporting_ = true;
          fabric_.reporting_.push_back(id_);
        }
        unreachable_.add(d.ip.dst);  // what ICMP port unreachable tells a UDP sender
        continue;
      }
      fabric_.transmit(*this, *dst, d, depart);
    }
    return sent;
  }

  size_t poll(const RecvHandler& handler, size_t max) override {
    const size_t fired = timers_.run_due(fabric_.now_);
    if (fabric_.cfg_.network) fabric_.cfg_.network->run(fabric_.now_);
    size_t n = 0;
    while (n < max && !arrivals_.empty() && arrivals_.front().at <= fabric_.now_) {
      std::pop_heap(arrivals_.begin(), arrivals_.end(), Later{});
      const Arrival a = arrivals_.back();
      arrivals_.pop_back();
      Datagram d{a.ip, std::as_const(fabric_.pool_).bytes(a.buf, a.len), a.icrc_omitted};
      ++stats_.rx_datagrams;
      stats_.rx_bytes += a.len;
      ++fabric_.stats_.delivered;
      ++n;
      handler(d);  // may send, even to this port
      fabric_.pool_.release(a.buf);
    }
    if (n != 0) ++stats_.rx_batches;
    // A poll that took nothing leaves the port's entry as it was: still a
    // lower bound.
    if (n != 0 || fired != 0) fabric_.events_.set(id_, next_event());
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
  // Nothing between two ports reads a packet's bytes: the network sees only
  // SimPacket's fields, a FaultInjector fills the ICRC in before it corrupts.
  bool icrc_optional() const override { return true; }
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
  uint32_t id() const { return id_; }
  // Whether a poll now would find something: a timer or datagram due, an
  // unreachable address; corrects the port's entry on the way.
  bool has_work() {
    const Nanos now = fabric_.now_;
    if (!unreachable_.empty()) return true;
    if (fabric_.events_.key(id_) > now) return false;
    const Nanos t = next_event();
    fabric_.events_.set(id_, t);
    return t <= now;
  }
  // Whether the port holds unreachable addresses; else it leaves
  // SimFabric::reporting_.
  bool still_reporting() {
    reporting_ = !unreachable_.empty();
    return reporting_;
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
    reporting_ = false;
    fabric_.events_.set(id_, next_event());
  }

  struct Arrival {
    Nanos at;
    uint64_t seq;  // send order: breaks ties between equal arrival times
    uint32_t buf, len;
    wire::IpUdpInfo ip;
    bool icrc_omitted;
  };
  void arrive(const Arrival& a) {
    arrivals_.push_back(a);
    std::push_heap(arrivals_.begin(), arrivals_.end(), Later{});
    fabric_.events_.lower(id_, a.at);
  }

 private:
  struct Later {  // heap order, earliest on top; an object, so that the sifts inline it
    bool operator()(const Arrival& a, const Arrival& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };

  SimFabric& fabric_;
  wire::IpAddr addr_;
  uint32_t id_;  // in fabric_.ports_ and fabric_.events_
  TimerQueue timers_;
  std::vector<Arrival> arrivals_;  // a heap, earliest on top
  Nanos busy_until_{0};
  std::atomic<bool> woken_{false};
  TransportStats stats_;
  UnreachableSet unreachable_;
  bool reporting_ = false;  // listed in fabric_.reporting_
};

SimFabric::SimFabric(SimFabricConfig cfg) : cfg_(std::move(cfg)), now_(cfg_.start) {
  if (cfg_.network) cfg_.network->bind(&sink_);
}

void SimFabric::transmit(SimPort& from, SimPort& to_port, const Datagram& d, Nanos depart) {
  const uint32_t len = static_cast<uint32_t>(d.payload.size());
  const uint32_t buf = pool_.copy(d.payload);
  if (!cfg_.network) {
    to_port.arrive({depart + cfg_.latency, next_seq_++, buf, len, d.ip, d.icrc_omitted});
    return;
  }
  const uint8_t opcode = d.payload.empty() ? 0 : std::to_integer<uint8_t>(d.payload[0]);
  const SimPacket p{buf, len, next_seq_++, to_port.id(), opcode, d.icrc_omitted, to_port.local_address(), d.ip};
  if (!cfg_.network->send(now_, from.local_address(), p)) {
    pool_.release(buf);
    ++stats_.dropped_no_route;
  }
}

void SimFabric::Sink::deliver(Nanos at, const SimPacket& p) {
  // The port it was sent to, unless that one has detached since (then
  // whichever port is at its address now, as for a datagram sent now).
  SimPort* port = p.port < f_.ports_.size() ? f_.ports_[p.port] : nullptr;
  if (port == nullptr || port->local_address() != p.to) port = f_.find(p.to);
  if (port == nullptr) {
    f_.pool_.release(p.buf);
    ++f_.stats_.dropped_detached;
    return;
  }
  port->arrive({at, p.seq, p.buf, p.len, p.ip, p.icrc_omitted});
}

void SimFabric::Sink::discard(const SimPacket& p) {
  f_.pool_.release(p.buf);
  ++f_.stats_.dropped_network;
}

SimFabric::~SimFabric() {
  if (cfg_.network) cfg_.network->bind(nullptr);
}

size_t SimFabric::AddrHash::operator()(const wire::IpAddr& a) const {
  uint64_t lo, hi;
  std::memcpy(&lo, a.b.data(), 8);
  std::memcpy(&hi, a.b.data() + 8, 8);
  uint64_t h = (lo ^ (hi * 0x9E3779B97F4A7C15ull) ^ uint64_t{a.v6}) * 0xBF58476D1CE4E5B9ull;
  return static_cast<size_t>(h ^ (h >> 31));
}

std::unique_ptr<Transport> SimFabric::attach(const wire::IpAddr& addr) {
  if (find(addr) != nullptr) return nullptr;
  if (cfg_.network && !cfg_.network->has_host(addr)) return nullptr;
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<uint32_t>(ports_.size());
    ports_.push_back(nullptr);
  }
  auto port = std::make_unique<SimPort>(*this, addr, id);
  ports_[id] = port.get();
  by_addr_.emplace(addr, id);
  return port;
}

SimPort* SimFabric::find(const wire::IpAddr& addr) const {
  const auto it = by_addr_.find(addr);
  return it == by_addr_.end() ? nullptr : ports_[it->second];
}

void SimFabric::detach(SimPort* port) {
  const uint32_t id = port->id();
  ports_[id] = nullptr;
  free_ids_.push_back(id);
  by_addr_.erase(port->local_address());
  events_.erase(id);
  std::erase(reporting_, id);
  std::erase_if(members_, [port](const Member& m) { return m.port == port; });
}

Nanos SimFabric::next_event() const {
  const Nanos net = cfg_.network ? cfg_.network->next_event() : Nanos::max();
  // The top entry is a lower bound of its port's earliest time: confirm it,
  // or correct it and look again. Every other entry is later than the top.
  while (!events_.empty()) {
    const Nanos key = events_.top_key();
    if (key >= net) return net;
    const uint32_t id = events_.top_id();
    const Nanos t = ports_[id]->next_event();
    if (t == key) return key;
    events_.set(id, t);
  }
  return net;
}

size_t SimFabric::in_flight() const {
  size_t n = cfg_.network ? cfg_.network->in_flight() : 0;
  for (const SimPort* p : ports_)
    if (p != nullptr) n += p->pending();
  return n;
}

void SimFabric::ports_with_work(std::vector<Transport*>* out) {
  if (cfg_.network) cfg_.network->run(now_);
  scratch_.clear();
  events_.collect_until(now_, &scratch_);
  // An entry may be early: keep the ports whose earliest time is really due.
  std::erase_if(scratch_, [this](uint32_t id) {
    const Nanos t = ports_[id]->next_event();
    events_.set(id, t);
    return t > now_;
  });
  std::erase_if(reporting_, [this](uint32_t id) { return !ports_[id]->still_reporting(); });
  for (uint32_t id : reporting_)
    if (std::find(scratch_.begin(), scratch_.end(), id) == scratch_.end()) scratch_.push_back(id);
  std::sort(scratch_.begin(), scratch_.end());
  for (uint32_t id : scratch_) out->push_back(ports_[id]);
}

bool SimFabric::has_work(const Transport& port) {
  SimPort* p = find(port.local_address());
  if (p != &port) return true;
  if (cfg_.network) cfg_.network->run(now_);
  return p->has_work();
}

Nanos SimFabric::advance_to(Nanos target) {
  if (target > now_) now_ = target;
  if (cfg_.network) cfg_.network->run(now_);
  return now_;
}

Nanos SimFabric::advance(Nanos deadline) { return advance_to(std::min(next_event(), deadline)); }

std::error_code SimFabric::reset() {
  for (const SimPort* p : ports_)
    if (p != nullptr && p->timers_armed()) return std::make_error_code(std::errc::device_or_resource_busy);
  for (SimPort* p : ports_)
    if (p != nullptr) p->reset();
  reporting_.clear();
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
    advance_to(next);
  }
}

}  // namespace rocelab::emu
