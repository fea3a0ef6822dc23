// The fault injector (emu/transport/fault_injector.h) in front of a simulated
// fabric: probabilistic faults repeat for a seed; scheduled rules drop,
// duplicate, corrupt (always visible to the ICRC), delay and reorder exactly
// the packets they name; bad schedules are refused with a message.
#include "emu/transport/fault_injector.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>

#include "emu/transport/sim_fabric.h"
#include "emu/transport/udp_transport.h"
#include "udp_test_util.h"
#include "wire/icrc.h"

namespace rocelab::emu {
namespace {

using namespace std::chrono_literals;

const wire::IpAddr kA = wire::IpAddr::v4(10, 0, 0, 1);
const wire::IpAddr kB = wire::IpAddr::v4(10, 0, 0, 2);

// What the receiver saw of one packet.
struct Seen {
  uint8_t opcode;
  uint32_t psn;
  Nanos at;
  bool icrc_ok;
  bool operator==(const Seen&) const = default;
};

// Device A (wrapped in a FaultInjector unless told otherwise) sends to B over a
// 1 us simulated fabric; B may be wrapped too.
class Net {
 public:
  explicit Net(const FaultConfig& a_cfg, const FaultConfig& b_cfg = {}) {
    std::string err;
    a_ = FaultInjector::wrap(fabric_.attach(kA), a_cfg, &err);
    EXPECT_TRUE(a_) << err;
    b_ = FaultInjector::wrap(fabric_.attach(kB), b_cfg, &err);
    EXPECT_TRUE(b_) << err;
  }

  // Sends one packet from A now.
  void send(uint8_t opcode, uint32_t psn, size_t len = 16) {
    wire::IpUdpInfo ip;
    ip.src = kA;
    ip.dst = kB;
    frames_.push_back(test::make_frame(ip, opcode, psn, len));
    Datagram d{ip, frames_.back().udp_payload()};
    a_->send(std::span(&d, 1));
  }

  // Runs the fabric until nothing is pending (or the virtual deadline).
  void drain(Nanos until = 1s) {
    fabric_.run_until([&] { return fabric_.next_event() == Nanos::max(); }, until, [&] { poll(); });
  }
  // Advances to virtual time t, delivering on the way.
  void run_to(Nanos t) {
    fabric_.run_until([] { return false; }, t, [&] { poll(); });
  }

  std::vector<uint32_t> psns() const {
    std::vector<uint32_t> v;
    for (const auto& s : seen_) v.push_back(s.psn);
    return v;
  }

  SimFabric fabric_;
  std::unique_ptr<FaultInjector> a_, b_;
  std::vector<Seen> seen_;
  std::deque<test::Frame> frames_;

 private:
  void poll() {
    a_->poll([](const Datagram&) {});
    b_->poll([&](const Datagram& d) {
      std::vector<std::byte> pkt(wire::ip_udp_header_len(false) + d.payload.size());
      wire::write_ip_udp(pkt.data(), d.ip, d.payload.size());
      std::copy(d.payload.begin(), d.payload.end(), pkt.begin() + wire::ip_udp_header_len(false));
      const bool ok = wire::compute_icrc(pkt, wire::kIpv4HeaderLen) ==
                      wire::load_le32(&d.payload[d.payload.size() - 4]);
      wire::BthView bth(d.payload.data());
      seen_.push_back({bth.opcode(), bth.psn().value(), b_->now(), ok});
    });
  }
};

FaultConfig with_schedule(const std::string& spec) {
  FaultConfig c;
  c.schedule = spec;
  return c;
}

// ---- probabilistic faults ----

FaultConfig lossy(uint64_t seed) {
  FaultConfig c;
  c.loss = 0.1;
  c.duplicate = 0.05;
  c.corrupt = 0.02;
  c.reorder = 0.05;
  c.jitter_us = 3;
  c.seed = seed;
  return c;
}

std::vector<Seen> lossy_run(uint64_t seed, FaultStats* stats = nullptr) {
  Net net(lossy(seed));
  for (uint32_t i = 0; i < 2000; ++i) {
    net.send(wire::op::kRcSendOnly, i);
    net.run_to(net.fabric_.now() + 1us);
  }
  net.drain();
  if (stats != nullptr) *stats = net.a_->fault_stats();
  return net.seen_;
}

TEST(FaultInjector, SameSeedGivesTheSameFaultSequence) {
  FaultStats s1, s2, s3;
  auto first = lossy_run(7, &s1);
  auto second = lossy_run(7, &s2);
  auto other = lossy_run(8, &s3);
  EXPECT_EQ(first, second);
  EXPECT_EQ(s1, s2);
  EXPECT_NE(first, other);
}

TEST(FaultInjector, RatesForAFixedSeedAreExactAndPlausible) {
  FaultStats s;
  auto seen = lossy_run(7, &s);
  EXPECT_EQ(s.tx.seen, 2000u);
  // Exact for seed 7 (the PRNG and our integer math are portable) ...
  EXPECT_EQ(s.tx.dropped, 190u);
  EXPECT_EQ(s.tx.duplicated, 85u);
  EXPECT_EQ(s.tx.corrupted, 37u);
  EXPECT_EQ(s.tx.reordered, 83u);
  // ... and near the configured rates whatever the seed.
  EXPECT_NEAR(double(s.tx.dropped) / 2000, 0.1, 0.03);
  EXPECT_NEAR(double(s.tx.duplicated) / 2000, 0.05, 0.02);
  EXPECT_NEAR(double(s.tx.corrupted) / 2000, 0.02, 0.01);
  // The receiver sees exactly what survived, and every corrupted packet fails its ICRC.
  size_t bad = 0;
  for (const auto& x : seen) bad += x.icrc_ok ? 0 : 1;
  EXPECT_EQ(seen.size(), 2000 - s.tx.dropped + s.tx.duplicated);
  EXPECT_GE(bad, s.tx.corrupted - 5);  // a corrupted packet may also be dropped or duplicated
  EXPECT_LE(bad, s.tx.corrupted * 2);
}

TEST(FaultInjector, NoRulesPassesEverythingUntouched) {
  Net net({});
  for (uint32_t i = 0; i < 20; ++i) net.send(wire::op::kRcSendOnly, i);
  net.drain();
  ASSERT_EQ(net.seen_.size(), 20u);
  for (uint32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(net.seen_[i].psn, i);
    EXPECT_TRUE(net.seen_[i].icrc_ok);
    EXPECT_EQ(net.seen_[i].at, 1us);
  }
}

// ---- schedule forms ----

TEST(FaultSchedule, DropTheSecondPacketCarryingPsn17) {
  Net net(with_schedule("drop:psn=17:nth=2"));
  for (int round = 0; round < 3; ++round)
    for (uint32_t psn = 15; psn <= 18; ++psn) net.send(wire::op::kRcSendOnly, psn);
  net.drain();
  EXPECT_EQ(net.psns(), (std::vector<uint32_t>{15, 16, 17, 18, 15, 16, 18, 15, 16, 17, 18}));
  EXPECT_EQ(net.a_->fault_stats().tx.dropped, 1u);
}

TEST(FaultSchedule, DropEveryAckForFiveMilliseconds) {
  Net net(with_schedule("drop:class=ack:from=0ms:for=5ms"));
  for (uint32_t ms = 0; ms < 10; ++ms) {
    net.run_to(Nanos(std::chrono::milliseconds(ms)));
    net.send(wire::op::kRcAck, ms);
    net.send(wire::op::kRcSendOnly, 100 + ms);
  }
  net.drain();
  std::vector<uint32_t> acks, sends;
  for (const auto& s : net.seen_) (s.opcode == wire::op::kRcAck ? acks : sends).push_back(s.psn);
  EXPECT_EQ(acks, (std::vector<uint32_t>{5, 6, 7, 8, 9}));  // sent at 0..4 ms: dropped
  EXPECT_EQ(sends.size(), 10u);
}

TEST(FaultSchedule, WindowStartsLater) {
  Net net(with_schedule("drop:from=2ms:for=1ms"));
  for (uint32_t ms = 0; ms < 5; ++ms) {
    net.run_to(Nanos(std::chrono::milliseconds(ms)));
    net.send(wire::op::kRcSendOnly, ms);
  }
  net.drain();
  EXPECT_EQ(net.psns(), (std::vector<uint32_t>{0, 1, 3, 4}));
}

TEST(FaultSchedule, DuplicateEveryThirdAndCountLimits) {
  Net net(with_schedule("dup:every=3:count=2"));
  for (uint32_t i = 1; i <= 10; ++i) net.send(wire::op::kRcSendOnly, i);
  net.drain();
  EXPECT_EQ(net.psns(), (std::vector<uint32_t>{1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 10}));
}

TEST(FaultSchedule, CorruptTheFirstSendOnlyBreaksItsIcrcOnly) {
  Net net(with_schedule("corrupt:opcode=0x04:count=1"));
  net.send(wire::op::kRcWriteOnly, 1, 64);
  net.send(wire::op::kRcSendOnly, 2, 64);
  net.send(wire::op::kRcSendOnly, 3, 64);
  net.drain();
  ASSERT_EQ(net.seen_.size(), 3u);
  EXPECT_TRUE(net.seen_[0].icrc_ok);
  EXPECT_FALSE(net.seen_[1].icrc_ok);
  EXPECT_TRUE(net.seen_[2].icrc_ok);
  EXPECT_EQ(net.a_->fault_stats().tx.corrupted, 1u);
}

TEST(FaultSchedule, CorruptionIsAlwaysVisibleToTheIcrc) {
  // Many draws, including those that would land on the masked BTH byte 4.
  Net net(with_schedule("corrupt"));
  for (uint32_t i = 0; i < 300; ++i) net.send(wire::op::kRcAck, i, 0);
  net.drain();
  ASSERT_EQ(net.seen_.size(), 300u);
  for (const auto& s : net.seen_) EXPECT_FALSE(s.icrc_ok) << s.psn;
}

TEST(FaultSchedule, DelayWithAndWithoutJitter) {
  Net net(with_schedule("delay:psn=1:delay=10us;delay:psn=2:delay=10us:jitter=5us"));
  net.send(wire::op::kRcSendOnly, 1);
  net.send(wire::op::kRcSendOnly, 2);
  net.send(wire::op::kRcSendOnly, 3);
  net.drain();
  ASSERT_EQ(net.seen_.size(), 3u);
  EXPECT_EQ(net.seen_[0].psn, 3u);
  EXPECT_EQ(net.seen_[0].at, 1us);
  EXPECT_EQ(net.seen_[1].psn, 1u);
  EXPECT_EQ(net.seen_[1].at, 11us);
  EXPECT_EQ(net.seen_[2].psn, 2u);
  EXPECT_GE(net.seen_[2].at, 11us);
  EXPECT_LE(net.seen_[2].at, 16us);
  EXPECT_EQ(net.a_->fault_stats().tx.delayed, 2u);
}

TEST(FaultSchedule, ReorderLetsLaterPacketsOvertake) {
  Net one(with_schedule("reorder:psn=3"));
  Net two(with_schedule("reorder:psn=3:by=2"));
  for (Net* n : {&one, &two}) {
    for (uint32_t i = 1; i <= 6; ++i) n->send(wire::op::kRcSendOnly, i);
    n->drain();
  }
  EXPECT_EQ(one.psns(), (std::vector<uint32_t>{1, 2, 4, 3, 5, 6}));
  EXPECT_EQ(two.psns(), (std::vector<uint32_t>{1, 2, 4, 5, 3, 6}));
}

TEST(FaultSchedule, ReorderedLastPacketLeavesAfterMax) {
  Net net(with_schedule("reorder:psn=9:max=50us"));
  net.send(wire::op::kRcSendOnly, 9);
  net.drain();
  ASSERT_EQ(net.seen_.size(), 1u);
  EXPECT_EQ(net.seen_[0].at, 51us);
}

TEST(FaultSchedule, ReceiveDirectionAndClassFilters) {
  // B drops READ packets it receives and duplicates received ACKs; A's side is untouched.
  Net net({}, with_schedule("drop:dir=rx:class=read;dup:dir=rx:class=ack"));
  net.send(wire::op::kRcReadRequest, 1);
  net.send(wire::op::kRcAck, 2);
  net.send(wire::op::kRcReadRespOnly, 3, 32);
  net.send(wire::op::kRcSendOnly, 4);
  net.drain();
  EXPECT_EQ(net.psns(), (std::vector<uint32_t>{2, 2, 4}));
  EXPECT_EQ(net.b_->fault_stats().rx.dropped, 2u);
  EXPECT_EQ(net.b_->fault_stats().rx.duplicated, 1u);
  EXPECT_EQ(net.a_->fault_stats().tx.dropped, 0u);
}

TEST(FaultSchedule, ReceiveDelayAndReorder) {
  Net net({}, with_schedule("delay:dir=rx:psn=1:delay=20us;reorder:dir=rx:psn=2"));
  for (uint32_t i = 1; i <= 4; ++i) net.send(wire::op::kRcSendOnly, i);
  net.drain();
  EXPECT_EQ(net.psns(), (std::vector<uint32_t>{3, 2, 4, 1}));
  EXPECT_EQ(net.seen_.back().at, 21us);
}

TEST(FaultSchedule, ProbabilityZeroAndOne) {
  Net never(with_schedule("drop:p=0"));
  Net always(with_schedule("drop:p=1"));
  for (Net* n : {&never, &always}) {
    for (uint32_t i = 0; i < 50; ++i) n->send(wire::op::kRcSendOnly, i);
    n->drain();
  }
  EXPECT_EQ(never.seen_.size(), 50u);
  EXPECT_EQ(always.seen_.size(), 0u);
}

TEST(FaultSchedule, QpnFilterAndBothDirections) {
  auto r = parse_fault_schedule("drop:qpn=0x11:dir=both:nth=1");
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.rules.size(), 1u);
  EXPECT_EQ(r.rules[0].qpn, 0x11u);
  EXPECT_EQ(r.rules[0].dir, FaultDir::kBoth);
  Net net(with_schedule("drop:qpn=0x12"));  // make_frame uses QPN 0x11: nothing matches
  net.send(wire::op::kRcSendOnly, 1);
  net.drain();
  EXPECT_EQ(net.seen_.size(), 1u);
}

TEST(FaultInjector, ForwardsSourcePortReservationToTheInnerTransport) {
  auto ra = allocate_loopback_address();
  ASSERT_TRUE(ra);
  auto u = UdpTransport::open(std::move(*ra));
  ASSERT_TRUE(u);
  UdpTransport* raw = u->get();
  std::string err;
  auto f = FaultInjector::wrap(std::move(u).value(), {}, &err);
  ASSERT_TRUE(f) << err;
  // Another socket holds (address, 0xE123): only the UDP transport knows.
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(0xE123);
  std::memcpy(&sa.sin_addr, raw->local_address().b.data(), 4);
  int other = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  auto port = f->reserve_source_port(0xE123);
  ASSERT_TRUE(port);
  EXPECT_EQ(*port, 0xE124);
  ::close(other);
  EXPECT_EQ(f->local_address(), raw->local_address());
}

// ---- parsing ----

TEST(FaultSchedule, ParsesEveryKeyAndBothSeparators) {
  auto r = parse_fault_schedule(
      " drop:psn=17:nth=2 ; drop:class=ack:from=0ms:for=5ms, dup:every=3:count=4:p=0.25:dir=rx;"
      "delay:delay=200us:jitter=50us:opcode=4;reorder:by=2:max=3ms;corrupt:class=request;");
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.rules.size(), 6u);
  EXPECT_EQ(r.rules[0].psn, 17u);
  EXPECT_EQ(r.rules[0].nth, 2u);
  EXPECT_EQ(r.rules[1].cls, wire::OpClass::kAck);
  EXPECT_EQ(r.rules[1].duration, 5ms);
  EXPECT_EQ(r.rules[2].action, FaultAction::kDuplicate);
  EXPECT_EQ(r.rules[2].every, 3u);
  EXPECT_EQ(r.rules[2].count, 4u);
  EXPECT_EQ(r.rules[2].p, 0.25);
  EXPECT_EQ(r.rules[2].dir, FaultDir::kRx);
  EXPECT_EQ(r.rules[3].delay, 200us);
  EXPECT_EQ(r.rules[3].jitter, 50us);
  EXPECT_EQ(r.rules[3].opcode, 4);
  EXPECT_EQ(r.rules[4].by, 2u);
  EXPECT_EQ(r.rules[4].max_hold, 3ms);
  EXPECT_EQ(r.rules[5].cls, wire::OpClass::kRequest);
  EXPECT_TRUE(parse_fault_schedule("").ok());
}

TEST(FaultSchedule, BadSpecsAreRejectedWithMessages) {
  const std::pair<const char*, const char*> bad[] = {
      {"explode", "unknown action 'explode'"},
      {"drop:psn", "'psn' is not KEY=VALUE"},
      {"drop:psn=x", "psn=x: expected a 24-bit number"},
      {"drop:psn=16777216", "psn=16777216: expected a 24-bit number"},
      {"drop:p=1.5", "p=1.5: expected a probability in [0,1]"},
      {"drop:p=-0.1", "expected a probability"},
      {"drop:class=bogus", "class=bogus: expected any, send"},
      {"drop:dir=up", "dir=up: expected tx, rx or both"},
      {"drop:nth=0", "nth=0: expected a count >= 1"},
      {"drop:nth=2:every=3", "nth and every exclude each other"},
      {"drop:for=5", "for=5: expected a duration"},
      {"drop:from=5m", "from=5m: expected a duration"},
      {"drop:color=red", "unknown key 'color'"},
      {"drop:psn=1:psn=2", "key 'psn' given twice"},
      {"drop:delay=5us", "key 'delay' applies only to delay"},
      {"delay:jitter=5us", "delay needs delay=T"},
      {"drop:by=2", "key 'by' applies only to reorder"},
      {"drop:opcode=0x1f", "opcode=0x1f: expected an opcode of the IBTA table"},
      {"drop;drop:qpn=", "rule 2 'drop:qpn=': qpn=: expected a 24-bit number"},
  };
  for (const auto& [spec, msg] : bad) {
    auto r = parse_fault_schedule(spec);
    EXPECT_FALSE(r.ok()) << spec;
    EXPECT_TRUE(r.rules.empty());
    EXPECT_NE(r.error.find(msg), std::string::npos) << spec << " -> " << r.error;
  }
  FaultConfig c;
  c.loss = 1.5;
  std::string err;
  SimFabric fabric;
  EXPECT_EQ(FaultInjector::wrap(fabric.attach(kA), c, &err), nullptr);
  EXPECT_NE(err.find("loss probability"), std::string::npos) << err;
}

TEST(FaultConfigEnv, RoundTripsThroughTheEnvironment) {
  FaultConfig c;
  c.loss = 0.1;
  c.reorder = 0.3333333333333333;
  c.duplicate = 0.05;
  c.corrupt = 1e-4;
  c.delay_us = 250;
  c.jitter_us = 40;
  c.seed = 0xFFFFFFFFFFFFFFF0ull;
  c.schedule = "drop:psn=17:nth=2;drop:class=ack:for=5ms";
  for (const auto& [name, value] : to_env(c)) ::setenv(name.c_str(), value.c_str(), 1);
  std::string err = "unset";
  FaultConfig back = from_env(&err);
  EXPECT_EQ(err, "");
  EXPECT_EQ(back, c);
  ::setenv("ROCELAB_LOSS", "2", 1);
  ::setenv("ROCELAB_DROP_SCHEDULE", "drop:nth=0", 1);
  back = from_env(&err);
  EXPECT_NE(err.find("ROCELAB_LOSS='2'"), std::string::npos) << err;
  EXPECT_NE(err.find("ROCELAB_DROP_SCHEDULE"), std::string::npos) << err;
  EXPECT_EQ(back.loss, 0.0);
  for (const auto& [name, value] : to_env(c)) ::unsetenv(name.c_str());
  EXPECT_EQ(from_env(&err), FaultConfig{});
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace rocelab::emu
