#include "emu/transport/fault_injector.h"

#include <algorithm>

#include "wire/bth.h"
#include "wire/byte_order.h"
#include "wire/icrc.h"

namespace rocelab::emu {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) from the top 53 bits (portable, unlike
// std::uniform_real_distribution).
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// A uniform-enough integer in [0, n].
int64_t upto(std::mt19937_64& rng, int64_t n) {
  return n <= 0 ? 0 : static_cast<int64_t>(rng() % (static_cast<uint64_t>(n) + 1));
}

bool covers(FaultDir rule, FaultDir dir) {
  return (static_cast<uint8_t>(rule) & static_cast<uint8_t>(dir)) != 0;
}

bool by_due(const auto& a, const auto& b) { return a.due != b.due ? a.due < b.due : a.seq < b.seq; }

}  // namespace

std::unique_ptr<FaultInjector> FaultInjector::wrap(std::unique_ptr<Transport> inner,
                                                   const FaultConfig& cfg, std::string* error) {
  FaultRules r = fault_rules(cfg);
  if (!r.ok()) {
    if (error != nullptr) *error = r.error;
    return nullptr;
  }
  return std::make_unique<FaultInjector>(std::move(inner), cfg.seed, std::move(r.rules));
}

FaultInjector::FaultInjector(std::unique_ptr<Transport> inner, uint64_t seed,
                             std::vector<FaultRule> rules)
    : inner_(std::move(inner)), seed_(seed), start_(inner_->now()) {
  add_rules(rules);
  timer_ = inner_->make_timer([this] { flush_tx_due(); });
  rx_hook_ = [this](const Datagram& d) { on_rx(d); };
}

FaultInjector::~FaultInjector() = default;

void FaultInjector::add_rules(const std::vector<FaultRule>& rules) {
  for (const FaultRule& r : rules) {
    // One stream per rule: a rule's faults do not depend on the other rules.
    const uint64_t i = rules_.size();
    rules_.push_back({r, std::mt19937_64(splitmix64(seed_ ^ splitmix64(i + 1))), 0, 0});
  }
}

bool FaultInjector::fires(RuleState& s, FaultDir dir, const Datagram& d, Nanos since_start) {
  const FaultRule& r = s.rule;
  if (!covers(r.dir, dir)) return false;
  const bool has_bth = d.payload.size() >= wire::kBthLen;
  if (r.cls != wire::OpClass::kNone || r.opcode || r.psn || r.qpn) {
    if (!has_bth) return false;
    wire::BthView bth(d.payload.data());
    if (r.cls != wire::OpClass::kNone) {
      const wire::OpInfo& info = wire::op_info(bth.opcode());
      if (!info.valid || !info.is(r.cls)) return false;
    }
    if (r.opcode && bth.opcode() != *r.opcode) return false;
    if (r.psn && bth.psn().value() != *r.psn) return false;
    if (r.qpn && bth.dest_qpn().value() != *r.qpn) return false;
  }
  if (since_start < r.from) return false;
  if (r.duration != Nanos::max() && since_start - r.from >= r.duration) return false;
  ++s.matches;
  if (r.nth != 0 && s.matches != r.nth) return false;
  if (r.every != 0 && s.matches % r.every != 0) return false;
  if (r.count != 0 && s.fired >= r.count) return false;
  if (r.p < 1.0 && !(r.p > 0.0 && unit(s.rng) < r.p)) return false;
  ++s.fired;
  return true;
}

FaultInjector::Decision FaultInjector::decide(FaultDir dir, const Datagram& d) {
  Decision dec;
  const Nanos since = inner_->now() - start_;
  for (RuleState& s : rules_) {
    if (!fires(s, dir, d, since)) continue;
    switch (s.rule.action) {
      case FaultAction::kDrop: dec.drop = true; break;
      case FaultAction::kDuplicate: dec.duplicate = true; break;
      case FaultAction::kCorrupt:
        dec.corrupt = true;
        dec.corrupt_draw = s.rng();
        break;
      case FaultAction::kDelay:
        dec.delay += s.rule.delay + Nanos(upto(s.rng, s.rule.jitter.count()));
        break;
      case FaultAction::kReorder:
        dec.reorder = true;
        dec.reorder_by = std::max(dec.reorder_by, s.rule.by);
        dec.reorder_max = std::max(dec.reorder_max, s.rule.max_hold);
        break;
    }
  }
  return dec;
}

void FaultInjector::report(FaultDir dir, const Datagram& d, const Decision& dec) {
  if (!observer_) return;
  if (!dec.drop && !dec.duplicate && !dec.corrupt && dec.delay == Nanos(0) && !dec.reorder) return;
  FaultRecord r;
  r.dir = dir;
  r.datagram = &d;
  r.dropped = dec.drop;
  r.duplicated = dec.duplicate;
  r.corrupted = dec.corrupt;
  r.delayed = dec.delay > Nanos(0);
  r.reordered = dec.reorder;
  observer_(r);
}

// Flips one bit. BTH byte 4 (FECN, BECN, reserved) is masked out of the ICRC,
// so a flip there would go unnoticed: that draw flips the ICRC's last byte instead.
void FaultInjector::flip_bit(std::span<std::byte> p, uint64_t draw) {
  if (p.empty()) return;
  const uint64_t bit = draw % (p.size() * 8);
  size_t byte = bit / 8;
  if (byte == 4 && p.size() >= wire::kBthLen) byte = p.size() - 1;
  p[byte] ^= std::byte(1u << (bit % 8));
}

Datagram FaultInjector::corrupted(const Datagram& d, uint64_t draw, uint32_t* buf) {
  const uint32_t len = static_cast<uint32_t>(d.payload.size());
  *buf = copy(d.payload);
  const std::span<std::byte> p = bytes(*buf, len);
  if (d.icrc_omitted && len >= wire::kBthLen + wire::kIcrcLen)
    wire::store_le32(p.data() + len - wire::kIcrcLen, wire::roce_icrc(d.ip, p));
  flip_bit(p, draw);
  return {d.ip, p, false};
}

void FaultInjector::hold(FaultDir dir, const Datagram& d, const Decision& dec) {
  Held h{dir, inner_->now(), 0, next_seq_++, d.ip, copy(d.payload), static_cast<uint32_t>(d.payload.size()),
         d.icrc_omitted};
  if (dec.delay > Nanos(0)) {
    h.due += dec.delay;
  } else {
    h.due += dec.reorder_max;
    h.after = dec.reorder_by;
  }
  held_.push_back(h);
}

void FaultInjector::passed(FaultDir dir) {
  auto& released = dir == FaultDir::kTx ? released_tx_ : released_rx_;
  released.clear();
  for (size_t i = 0; i < held_.size();) {
    Held& h = held_[i];
    if (h.dir == dir && h.after != 0 && --h.after == 0) {
      released.push_back(h);
      held_.erase(held_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  std::sort(released.begin(), released.end(), by_due<Held, Held>);
  for (const Held& h : released) {
    if (dir == FaultDir::kTx) {
      out_.push_back({h.ip, bytes(h.buf, h.len), h.icrc_omitted});
      out_bufs_.push_back(h.buf);
    } else {
      deliver_raw({h.ip, bytes(h.buf, h.len), h.icrc_omitted});
      release_buffer(h.buf);
    }
  }
}

size_t FaultInjector::send(std::span<const Datagram> batch) {
  out_.clear();
  out_bufs_.clear();
  for (const Datagram& d : batch) {
    ++stats_.tx.seen;
    const Decision dec = decide(FaultDir::kTx, d);
    report(FaultDir::kTx, d, dec);
    if (dec.drop) {
      ++stats_.tx.dropped;
      continue;
    }
    Datagram x = d;
    if (dec.corrupt) {
      uint32_t b;
      x = corrupted(d, dec.corrupt_draw, &b);
      out_bufs_.push_back(b);
      ++stats_.tx.corrupted;
    }
    const int copies = dec.duplicate ? 2 : 1;
    if (dec.duplicate) ++stats_.tx.duplicated;
    if (dec.delay > Nanos(0) || dec.reorder) {
      if (dec.delay > Nanos(0)) ++stats_.tx.delayed;
      if (dec.reorder) ++stats_.tx.reordered;
      for (int c = 0; c < copies; ++c) hold(FaultDir::kTx, x, dec);
      continue;
    }
    for (int c = 0; c < copies; ++c) {
      out_.push_back(x);
      passed(FaultDir::kTx);
    }
  }
  const size_t sent = out_.empty() ? 0 : inner_->send(out_);
  const size_t refused = std::min(batch.size(), out_.size() - std::min(out_.size(), sent));
  for (uint32_t b : out_bufs_) release_buffer(b);
  out_.clear();
  out_bufs_.clear();
  rearm();
  return batch.size() - refused;
}

void FaultInjector::flush_tx_due() {
  const Nanos now = inner_->now();
  released_tx_.clear();
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].dir == FaultDir::kTx && held_[i].due <= now) {
      released_tx_.push_back(held_[i]);
      held_.erase(held_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  std::sort(released_tx_.begin(), released_tx_.end(), by_due<Held, Held>);
  flush_out_.clear();
  for (const Held& h : released_tx_) flush_out_.push_back({h.ip, bytes(h.buf, h.len), h.icrc_omitted});
  if (!flush_out_.empty()) inner_->send(flush_out_);
  for (const Held& h : released_tx_) release_buffer(h.buf);
  flush_out_.clear();
  armed_at_ = Nanos::max();  // this timer has just fired
  rearm();
}

void FaultInjector::deliver_raw(const Datagram& d) {
  ++delivered_;
  (*user_)(d);
}

void FaultInjector::deliver(const Datagram& d) {
  deliver_raw(d);
  passed(FaultDir::kRx);
}

void FaultInjector::deliver_rx_due() {
  const Nanos now = inner_->now();
  released_rx_.clear();
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].dir == FaultDir::kRx && held_[i].due <= now) {
      released_rx_.push_back(held_[i]);
      held_.erase(held_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  std::sort(released_rx_.begin(), released_rx_.end(), by_due<Held, Held>);
  for (const Held& h : released_rx_) {
    deliver_raw({h.ip, bytes(h.buf, h.len), h.icrc_omitted});
    release_buffer(h.buf);
  }
}

void FaultInjector::on_rx(const Datagram& d) {
  ++stats_.rx.seen;
  const Decision dec = decide(FaultDir::kRx, d);
  report(FaultDir::kRx, d, dec);
  if (dec.drop) {
    ++stats_.rx.dropped;
    return;
  }
  Datagram x = d;
  uint32_t b = UINT32_MAX;
  if (dec.corrupt) {
    x = corrupted(d, dec.corrupt_draw, &b);
    ++stats_.rx.corrupted;
  }
  const int copies = dec.duplicate ? 2 : 1;
  if (dec.duplicate) ++stats_.rx.duplicated;
  if (dec.delay > Nanos(0) || dec.reorder) {
    if (dec.delay > Nanos(0)) ++stats_.rx.delayed;
    if (dec.reorder) ++stats_.rx.reordered;
    for (int c = 0; c < copies; ++c) hold(FaultDir::kRx, x, dec);
  } else {
    for (int c = 0; c < copies; ++c) deliver(x);
  }
  if (b != UINT32_MAX) release_buffer(b);
}

size_t FaultInjector::poll(const RecvHandler& handler, size_t max) {
  user_ = &handler;
  delivered_ = 0;
  inner_->poll(rx_hook_, max);  // runs our timer too: due tx holds leave here
  deliver_rx_due();
  user_ = nullptr;
  rearm();
  return delivered_;
}

void FaultInjector::rearm() {
  Nanos next = Nanos::max();
  for (const Held& h : held_) next = std::min(next, h.due);
  if (next == armed_at_) return;
  armed_at_ = next;
  if (next == Nanos::max()) timer_->cancel();
  else timer_->arm_at(next);
}

}  // namespace rocelab::emu
