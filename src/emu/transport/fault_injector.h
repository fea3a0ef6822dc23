// Fault injection: a Transport decorator that drops,
// duplicates, corrupts, delays and reorders datagrams by probability or by an
// explicit schedule (fault_config.h), per direction and per opcode class. It
// works over the simulated fabric and the UDP transport alike, and is
// reproducible: each rule draws from its own std::mt19937_64 (seeded from the
// config's seed and the rule's index) through integer math of our own, so the
// same seed and the same packets give the same faults on every platform, and
// adding a rule does not change what the others do.
//
// Every rule looks at every packet of its direction (all rules are evaluated,
// then their actions are combined: drop wins; corrupt flips one bit of a copy
// so that the ICRC no longer matches; duplicate emits the packet twice; delay
// and reorder hold a copy back; a packet both delayed and reordered is held for
// its delay only). Held packets are released by a timer of the
// inner transport, so wait() on the inner transport wakes for them.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "emu/transport/fault_config.h"
#include "emu/transport/datagram_pool.h"
#include "emu/transport/transport.h"

namespace rocelab::emu {

struct FaultStats {
  struct Dir {
    uint64_t seen = 0, dropped = 0, duplicated = 0, corrupted = 0, delayed = 0, reordered = 0;
    bool operator==(const Dir&) const = default;
  };
  Dir tx, rx;
  bool operator==(const FaultStats&) const = default;
};

// What the injector did to one datagram (only datagrams it touched are reported).
struct FaultRecord {
  FaultDir dir = FaultDir::kTx;
  const Datagram* datagram = nullptr;  // as it came, before any change; valid during the call
  bool dropped = false, duplicated = false, corrupted = false, delayed = false, reordered = false;
};

class FaultInjector final : public Transport {
 public:
  // Builds the injector for cfg; nullptr with a message in *error when cfg is
  // invalid (a probability outside [0,1], a bad schedule).
  static std::unique_ptr<FaultInjector> wrap(std::unique_ptr<Transport> inner,
                                             const FaultConfig& cfg, std::string* error);
  FaultInjector(std::unique_ptr<Transport> inner, uint64_t seed, std::vector<FaultRule> rules);
  ~FaultInjector() override;

  const wire::IpAddr& local_address() const override { return inner_->local_address(); }
  // Returns how many of the batch were accepted: injected drops count as sent
  // (the network lost them); datagrams the inner transport refused do not.
  size_t send(std::span<const Datagram> batch) override;
  // Delivers what passes the rx rules (duplicates included; may deliver more
  // than max when duplicating), then held packets that are due.
  size_t poll(const RecvHandler& handler, size_t max = 64) override;
  void wait(Nanos deadline) override { inner_->wait(deadline); }
  void wake() override { inner_->wake(); }
  void sleep_until(Nanos deadline) override { inner_->sleep_until(deadline); }
  Nanos now() const override { return inner_->now(); }
  std::unique_ptr<Timer> make_timer(std::function<void()> on_expiry) override {
    return inner_->make_timer(std::move(on_expiry));
  }
  TransportStats stats() const override { return inner_->stats(); }
  wire::Result<uint16_t> reserve_source_port(uint16_t preferred = 0) override {
    return inner_->reserve_source_port(preferred);
  }
  size_t take_unreachable(std::span<wire::IpAddr> out) override { return inner_->take_unreachable(out); }
  // What the inner transport allows: a datagram corrupted here gets its ICRC
  // filled in before the bit flips (so that the receiver sees it damaged).
  bool icrc_optional() const override { return inner_->icrc_optional(); }
  std::error_code join_group(const wire::IpAddr& group) override { return inner_->join_group(group); }
  void leave_group(const wire::IpAddr& group) override { inner_->leave_group(group); }

  // Adds rules from now on (e.g. a scenario's `fault` step): their nth=/count=
  // count matches from now; from=/for= still count from the injector's start.
  // Their random streams continue the numbering of the rules already there.
  void add_rules(const std::vector<FaultRule>& rules);

  // Called for every datagram a rule fired on (e.g. the ladder of `rocelab sim`
  // marks the packets it lost); runs inside send()/poll(). Set once, before traffic.
  void set_observer(std::function<void(const FaultRecord&)> observer) { observer_ = std::move(observer); }

  FaultStats fault_stats() const { return stats_; }
  size_t held() const { return held_.size(); }
  Transport& inner() { return *inner_; }

 private:
  struct RuleState {
    FaultRule rule;
    std::mt19937_64 rng;
    uint64_t matches = 0, fired = 0;
  };
  struct Decision {
    bool drop = false, duplicate = false, corrupt = false, reorder = false;
    Nanos delay{0};
    uint32_t reorder_by = 0;
    Nanos reorder_max{0};
    uint64_t corrupt_draw = 0;
  };
  struct Held {
    FaultDir dir;
    Nanos due;           // released at this time at the latest
    uint32_t after = 0;  // ... or once this many later packets have passed (0: time only)
    uint64_t seq;
    wire::IpUdpInfo ip;
    uint32_t buf, len;
    bool icrc_omitted;
  };

  Decision decide(FaultDir dir, const Datagram& d);
  void report(FaultDir dir, const Datagram& d, const Decision& dec);
  bool fires(RuleState& s, FaultDir dir, const Datagram& d, Nanos since_start);
  uint32_t copy(std::span<const std::byte> payload) { return pool_.copy(payload); }
  std::span<std::byte> bytes(uint32_t buf, uint32_t len) { return pool_.bytes(buf, len); }
  void release_buffer(uint32_t buf) { pool_.release(buf); }
  static void flip_bit(std::span<std::byte> p, uint64_t draw);
  // A copy of d with one bit flipped (its ICRC filled in first if omitted);
  // the copy's buffer goes in *buf.
  Datagram corrupted(const Datagram& d, uint64_t draw, uint32_t* buf);
  void hold(FaultDir dir, const Datagram& d, const Decision& dec);
  void passed(FaultDir dir);  // a packet went by: count down reorder holds
  void deliver_raw(const Datagram& d);
  void flush_tx_due();
  void deliver_rx_due();
  void deliver(const Datagram& d);
  void on_rx(const Datagram& d);
  void rearm();

  std::unique_ptr<Transport> inner_;
  std::vector<RuleState> rules_;
  uint64_t seed_;
  Nanos start_;
  FaultStats stats_;
  DatagramPool pool_;
  std::vector<Held> held_;
  uint64_t next_seq_ = 0;
  std::vector<Datagram> out_;          // send scratch
  std::vector<uint32_t> out_bufs_;     // buffers to give back after the send
  std::vector<Held> released_tx_, released_rx_;  // scratch
  std::vector<Datagram> flush_out_;    // scratch of flush_tx_due
  Nanos armed_at_ = Nanos::max();
  std::unique_ptr<Timer> timer_;       // for held packets
  std::function<void(const FaultRecord&)> observer_;
  const RecvHandler* user_ = nullptr;  // during poll()
  RecvHandler rx_hook_;
  size_t delivered_ = 0;
};

}  // namespace rocelab::emu
