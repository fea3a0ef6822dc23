// The simulated fabric (emu/transport/sim_fabric.h): datagrams arrive after the
// link's latency and serialization delay in send order, byte for byte; a vanished
// address is reported unreachable; timers fire at their virtual time.
#include "emu/transport/sim_fabric.h"

#include <gtest/gtest.h>

#include <array>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace rocelab::emu {
namespace {

using std::chrono::microseconds;

const wire::IpAddr kA = wire::IpAddr::v4(10, 0, 0, 1);
const wire::IpAddr kB = wire::IpAddr::v4(10, 0, 0, 2);

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}
std::string text_of(std::span<const std::byte> p) {
  return std::string(reinterpret_cast<const char*>(p.data()), p.size());
}

Datagram to(const wire::IpAddr& src, const wire::IpAddr& dst, std::span<const std::byte> p,
            uint16_t sport = 0xC000) {
  Datagram d;
  d.ip.src = src;
  d.ip.dst = dst;
  d.ip.sport = sport;
  d.payload = p;
  return d;
}

struct Received {
  Nanos at;
  std::string payload;
  wire::IpUdpInfo ip;
};

TEST(SimFabric, DeliversAfterLatencyInSendOrderWithFields) {
  SimFabric fabric({.latency = microseconds(3)});
  auto a = fabric.attach(kA);
  auto b = fabric.attach(kB);
  ASSERT_TRUE(a && b);
  auto p1 = bytes_of("first"), p2 = bytes_of("second"), p3 = bytes_of("third");
  std::vector<Datagram> batch = {to(kA, kB, p1, 0xC001), to(kA, kB, p2, 0xC002),
                                 to(kA, kB, p3, 0xC003)};
  EXPECT_EQ(a->send(batch), 3u);
  p1.assign(p1.size(), std::byte{0});  // the fabric copied the payload at send()

  std::vector<Received> got;
  auto h = [&](const Datagram& d) { got.push_back({b->now(), text_of(d.payload), d.ip}); };
  EXPECT_EQ(b->poll(h), 0u);  // not before the latency has passed
  b->wait(Nanos::max());
  EXPECT_EQ(b->now(), microseconds(3));
  EXPECT_EQ(b->poll(h, 2), 2u);  // max is honoured
  EXPECT_EQ(b->poll(h), 1u);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload, "first");
  EXPECT_EQ(got[1].payload, "second");
  EXPECT_EQ(got[2].payload, "third");
  EXPECT_EQ(got[0].ip.src, kA);
  EXPECT_EQ(got[0].ip.dst, kB);
  EXPECT_EQ(got[2].ip.sport, 0xC003);
  EXPECT_EQ(got[2].ip.dport, 4791);
  EXPECT_EQ(fabric.in_flight(), 0u);
  EXPECT_EQ(a->stats().tx_datagrams, 3u);
  EXPECT_EQ(a->stats().tx_bytes, 16u);
  EXPECT_EQ(b->stats().rx_datagrams, 3u);
  EXPECT_EQ(b->stats().rx_batches, 2u);
}

// A datagram to an address nobody holds (a destroyed device) is dropped, and
// the sender learns the address is unreachable, as ICMP would tell it.
TEST(SimFabric, SendingToAVanishedAddressReportsItUnreachableOnce) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  auto b = fabric.attach(kB);
  ASSERT_TRUE(a && b);
  auto p = bytes_of("x");
  std::vector<Datagram> batch = {to(kA, kB, p)};
  std::array<wire::IpAddr, 2> out;
  EXPECT_EQ(a->send(batch), 1u);
  EXPECT_EQ(a->take_unreachable(out), 0u);
  b.reset();
  EXPECT_EQ(a->send(batch), 1u);
  EXPECT_EQ(a->send(batch), 1u);
  EXPECT_EQ(fabric.stats().dropped_no_port, 2u);
  ASSERT_EQ(a->take_unreachable(out), 1u);  // once, however many were sent
  EXPECT_EQ(out[0], kB);
  EXPECT_EQ(a->take_unreachable(out), 0u);
}

TEST(SimFabric, SerializationDelayQueuesBehindTheLink) {
  // 1 Gb/s: a 100-byte payload over IPv4 is 100+28+18 = 146 bytes = 1168 ns.
  SimFabric fabric({.latency = microseconds(1), .link_bits_per_sec = 1'000'000'000});
  auto a = fabric.attach(kA);
  auto b = fabric.attach(kB);
  std::vector<std::byte> p(100, std::byte{7});
  std::vector<Datagram> batch = {to(kA, kB, p), to(kA, kB, p)};
  a->send(batch);
  std::vector<Nanos> at;
  auto h = [&](const Datagram&) { at.push_back(b->now()); };
  while (at.size() < 2) {
    b->wait(Nanos::max());
    b->poll(h);
  }
  EXPECT_EQ(at[0], Nanos(1168 + 1000));
  EXPECT_EQ(at[1], Nanos(2 * 1168 + 1000));
}

TEST(SimFabric, TimersFireAtTheirVirtualTimeInDeadlineThenArmOrder) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  std::vector<std::pair<std::string, Nanos>> fired;
  auto t1 = a->make_timer([&] { fired.push_back({"t1", a->now()}); });
  auto t2 = a->make_timer([&] { fired.push_back({"t2", a->now()}); });
  auto t3 = a->make_timer([&] { fired.push_back({"t3", a->now()}); });
  std::unique_ptr<Timer> t4;
  int t4_runs = 0;
  t4 = a->make_timer([&] {
    fired.push_back({"t4", a->now()});
    if (++t4_runs < 3) t4->arm_at(a->now() + microseconds(10));  // periodic, re-armed by itself
  });
  t1->arm_at(microseconds(5));
  t2->arm_at(microseconds(3));
  t3->arm_at(microseconds(3));
  t3->cancel();
  t3->arm_at(microseconds(3));  // re-armed after t2: fires after t2 on the tie
  t1->arm_at(microseconds(7));  // replaces 5 us
  t4->arm_at(microseconds(1));
  EXPECT_TRUE(t1->armed());
  auto noop = [](const Datagram&) {};
  ASSERT_TRUE(fabric.run_until([&] { return t4_runs == 3; }, microseconds(100),
                               [&] { a->poll(noop); }));
  std::vector<std::pair<std::string, Nanos>> want = {
      {"t4", microseconds(1)}, {"t2", microseconds(3)}, {"t3", microseconds(3)},
      {"t1", microseconds(7)}, {"t4", microseconds(11)}, {"t4", microseconds(21)}};
  EXPECT_EQ(fired, want);
  EXPECT_FALSE(t1->armed());
  EXPECT_EQ(fabric.next_event(), Nanos::max());
}

TEST(SimFabric, TimerRearmedForNowInItsCallbackFiresOnTheNextPoll) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  std::unique_ptr<Timer> t;
  int runs = 0;
  t = a->make_timer([&] {
    ++runs;
    t->arm_at(a->now());
  });
  t->arm_at(Nanos(0));
  auto noop = [](const Datagram&) {};
  a->poll(noop);
  EXPECT_EQ(runs, 1);
  a->poll(noop);
  EXPECT_EQ(runs, 2);
}

TEST(SimFabric, TimerDestroyedInsideItsCallbackIsSafe) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  std::unique_ptr<Timer> t;
  t = a->make_timer([&] { t.reset(); });
  t->arm_at(Nanos(0));
  a->poll([](const Datagram&) {});
  EXPECT_EQ(t, nullptr);
  auto u = a->make_timer([] {});  // the freed slot is reused
  u->arm_at(Nanos(10));
  EXPECT_EQ(fabric.next_event(), Nanos(10));
}

TEST(SimFabric, WaitStopsAtDeadlineAndAtEarliestEventOfAnyPort) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  auto b = fabric.attach(kB);
  auto t = b->make_timer([] {});
  t->arm_at(microseconds(50));
  a->wait(microseconds(20));  // nothing sooner: the deadline
  EXPECT_EQ(a->now(), microseconds(20));
  a->wait(Nanos::max());  // b's timer is the whole fabric's next event
  EXPECT_EQ(a->now(), microseconds(50));
  a->wait(Nanos::max());  // b's timer is due and not yet polled: the clock holds
  EXPECT_EQ(a->now(), microseconds(50));
  b->poll([](const Datagram&) {});
  a->wait(microseconds(70));
  EXPECT_EQ(a->now(), microseconds(70));
  a->wake();
  a->wait(microseconds(90));  // woken: returns at once
  EXPECT_EQ(a->now(), microseconds(70));
  a->wait(microseconds(90));
  EXPECT_EQ(a->now(), microseconds(90));
}

TEST(SimFabric, UnknownDestinationAndDuplicateAttach) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  EXPECT_EQ(fabric.attach(kA), nullptr);
  auto p = bytes_of("x");
  std::vector<Datagram> batch = {to(kA, kB, p)};
  a->send(batch);
  EXPECT_EQ(fabric.stats().dropped_no_port, 1u);
  auto b = fabric.attach(kB);
  a->send(batch);
  b.reset();  // detached with a datagram in flight
  EXPECT_EQ(fabric.stats().dropped_detached, 1u);
  EXPECT_EQ(fabric.in_flight(), 0u);
  EXPECT_NE(fabric.attach(kB), nullptr);  // the address is free again
}

TEST(SimFabric, EverySourcePortInTheRoceRangeIsUsable) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  EXPECT_EQ(*a->reserve_source_port(0xD123), 0xD123);
  EXPECT_EQ(*a->reserve_source_port(0), 0xC000);
  EXPECT_EQ(*a->reserve_source_port(4791), 0xC000);
}

// A ping-pong with timers between two ports, recorded as text.
std::vector<std::string> ping_pong_log() {
  SimFabric fabric({.latency = microseconds(2), .link_bits_per_sec = 10'000'000'000});
  auto a = fabric.attach(kA);
  auto b = fabric.attach(kB);
  std::vector<std::string> log;
  std::vector<std::byte> buf(64);
  int sent = 0;
  auto send_from = [&](Transport& t, const wire::IpAddr& dst, int n) {
    std::vector<std::byte> p(static_cast<size_t>(10 + n % 7), std::byte(n));
    std::vector<Datagram> batch = {to(t.local_address(), dst, p),
                                   to(t.local_address(), dst, p)};
    t.send(batch);
    ++sent;
  };
  auto ta = a->make_timer([&] {
    log.push_back("timer a " + std::to_string(a->now().count()));
    send_from(*a, kB, sent);
  });
  auto ha = [&](const Datagram& d) {
    log.push_back("a got " + std::to_string(d.payload.size()) + " @" +
                  std::to_string(a->now().count()));
    if (!ta->armed()) ta->arm_at(a->now() + microseconds(3));
  };
  auto hb = [&](const Datagram& d) {
    log.push_back("b got " + std::to_string(d.payload.size()) + " @" +
                  std::to_string(b->now().count()));
    if (sent < 40) send_from(*b, kA, sent);
  };
  send_from(*a, kB, 0);
  fabric.run_until([&] { return sent >= 40 && fabric.in_flight() == 0; }, Nanos(1'000'000'000),
                   [&] {
                     a->poll(ha);
                     b->poll(hb);
                   });
  return log;
}

TEST(SimFabric, SameInputsGiveIdenticalEventSequences) {
  auto first = ping_pong_log();
  auto second = ping_pong_log();
  EXPECT_GT(first.size(), 80u);
  EXPECT_EQ(first, second);
}

// Many ports, timers armed, re-armed, cancelled and datagrams sent at random:
// the fabric's next event is always the earliest armed deadline or arrival of
// any port (the index it keeps, against a scan of the ports' own timers and
// of what was sent), and ports_with_work lists exactly the ports a poll finds
// something for.
TEST(SimFabric, NextEventAndPortsWithWorkMatchAScanOfEveryPort) {
  constexpr int kPorts = 12;
  std::mt19937 rng(7);
  SimFabric fabric({.latency = Nanos(40)});
  std::vector<std::unique_ptr<Transport>> ports;
  std::vector<std::unique_ptr<Timer>> timers;  // two per port
  std::vector<Nanos> deadline(2 * kPorts, Nanos::max());
  std::vector<std::vector<Nanos>> arrivals(kPorts);  // what each port will receive, and when
  for (int i = 0; i < kPorts; ++i) {
    ports.push_back(fabric.attach(wire::IpAddr::v4(10, 0, 1, uint8_t(i + 1))));
    for (int k = 0; k < 2; ++k) {
      const size_t t = timers.size();
      timers.push_back(ports.back()->make_timer([&deadline, t] { deadline[t] = Nanos::max(); }));
    }
  }
  auto earliest = [&](int i) {
    Nanos t = std::min(deadline[2 * i], deadline[2 * i + 1]);
    for (Nanos a : arrivals[i]) t = std::min(t, a);
    return t;
  };
  const std::vector<std::byte> payload(16, std::byte{1});
  for (int round = 0; round < 400; ++round) {
    for (int op = 0; op < 4; ++op) {
      const int i = int(rng() % kPorts);
      const size_t t = 2 * size_t(i) + rng() % 2;
      switch (rng() % 3) {
        case 0:
          deadline[t] = fabric.now() + Nanos(rng() % 200);
          timers[t]->arm_at(deadline[t]);
          break;
        case 1:
          deadline[t] = Nanos::max();
          timers[t]->cancel();
          break;
        case 2: {
          const int j = int(rng() % kPorts);
          std::vector<Datagram> batch = {to(ports[i]->local_address(), ports[j]->local_address(), payload)};
          ports[i]->send(batch);
          arrivals[j].push_back(fabric.now() + Nanos(40));
          break;
        }
      }
    }
    Nanos want = Nanos::max();
    std::vector<Transport*> want_work;
    for (int i = 0; i < kPorts; ++i) {
      want = std::min(want, earliest(i));
      if (earliest(i) <= fabric.now()) want_work.push_back(ports[i].get());
    }
    ASSERT_EQ(fabric.next_event(), want) << "round " << round;
    std::vector<Transport*> work;
    fabric.ports_with_work(&work);
    ASSERT_EQ(work, want_work) << "round " << round;
    // Poll some of the ports with work, then move on.
    for (Transport* p : work) {
      if (rng() % 3 == 0) continue;
      const int i = int(std::find_if(ports.begin(), ports.end(), [p](const auto& q) { return q.get() == p; }) -
                        ports.begin());
      p->poll([](const Datagram&) {});
      std::erase_if(arrivals[i], [&](Nanos a) { return a <= fabric.now(); });
    }
    fabric.advance(fabric.now() + Nanos(rng() % 60));
  }
}

TEST(SimFabric, APortWithAnUnreachableAddressToReportHasWork) {
  SimFabric fabric;
  auto a = fabric.attach(kA);
  std::vector<Transport*> work;
  fabric.ports_with_work(&work);
  EXPECT_TRUE(work.empty());
  const auto p = bytes_of("x");
  std::vector<Datagram> batch = {to(kA, kB, p)};  // nobody at kB
  a->send(batch);
  fabric.ports_with_work(&work);
  EXPECT_EQ(work, std::vector<Transport*>{a.get()});
  EXPECT_EQ(fabric.next_event(), Nanos::max());  // it holds no clock
  std::array<wire::IpAddr, 4> gone;
  EXPECT_EQ(a->take_unreachable(gone), 1u);
  work.clear();
  fabric.ports_with_work(&work);
  EXPECT_TRUE(work.empty());
}

}  // namespace
}  // namespace rocelab::emu
