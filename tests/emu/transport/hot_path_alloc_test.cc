// No per-packet heap allocation in steady state (docs/style.md §8): after
// a warm-up, sending, polling, arming timers and injecting faults allocate nothing.
#include <gtest/gtest.h>

#include "alloc_counter.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/sim_fabric.h"
#include "emu/transport/udp_transport.h"
#include "udp_test_util.h"

namespace rocelab::emu {
namespace {

using namespace std::chrono_literals;
using test::Frame;

// One round: a batch from a to b, b polls it, a timer is re-armed.
template <typename Wait>
size_t round_trip(Transport& a, Transport& b, std::span<const Datagram> batch, Timer& t, Wait wait) {
  a.send(batch);
  t.arm_at(a.now() + 1ms);
  size_t got = 0;
  for (int i = 0; i < 1000 && got < batch.size(); ++i) {
    got += b.poll([](const Datagram&) {});
    a.poll([](const Datagram&) {});
    if (got < batch.size()) wait();
  }
  return got;
}

std::vector<Frame> frames_between(const wire::IpAddr& src, const wire::IpAddr& dst, uint16_t sport) {
  std::vector<Frame> frames;
  wire::IpUdpInfo ip;
  ip.src = src;
  ip.dst = dst;
  ip.sport = sport;
  for (uint32_t i = 0; i < 16; ++i) frames.push_back(test::make_frame(ip, wire::op::kRcSendOnly, i, 1024));
  return frames;
}

TEST(HotPath, SimFabricWithFaultInjectorAllocatesNothingInSteadyState) {
  SimFabric fabric;
  const auto ka = wire::IpAddr::v4(10, 0, 0, 1), kb = wire::IpAddr::v4(10, 0, 0, 2);
  FaultConfig cfg;
  cfg.loss = 0.1;
  cfg.duplicate = 0.1;
  cfg.corrupt = 0.1;
  cfg.reorder = 0.1;
  std::string err;
  auto a = FaultInjector::wrap(fabric.attach(ka), cfg, &err);
  auto b = fabric.attach(kb);
  auto frames = frames_between(ka, kb, 0xC000);
  auto batch = test::datagrams(frames);
  auto t = a->make_timer([] {});
  auto wait = [&] { b->wait(fabric.now() + 10ms); };
  for (int i = 0; i < 2000; ++i) round_trip(*a, *b, batch, *t, wait);  // warm-up
  const long before = rocelab::test::g_allocations.load();
  size_t got = 0;
  for (int i = 0; i < 1000; ++i) got += round_trip(*a, *b, batch, *t, wait);
  EXPECT_EQ(rocelab::test::g_allocations.load() - before, 0);
  EXPECT_GT(got, 1000u * 12);
}

TEST(HotPath, UdpTransportAllocatesNothingInSteadyState) {
  auto ra = allocate_loopback_address();
  auto rb = allocate_loopback_address();
  ASSERT_TRUE(ra && rb);
  UdpTransportConfig cfg;
  cfg.gso_loopback = true;  // the GSO and GRO paths too
  auto a = UdpTransport::open(std::move(*ra), cfg);
  auto b = UdpTransport::open(std::move(*rb), cfg);
  ASSERT_TRUE(a && b);
  auto sport = (*a)->reserve_source_port();
  ASSERT_TRUE(sport);
  auto frames = frames_between((*a)->local_address(), (*b)->local_address(), *sport);
  auto batch = test::datagrams(frames);
  auto t = (*a)->make_timer([] {});
  auto wait = [&] { (*b)->wait((*b)->now() + 100ms); };
  for (int i = 0; i < 50; ++i) round_trip(**a, **b, batch, *t, wait);  // warm-up
  const long before = rocelab::test::g_allocations.load();
  size_t got = 0;
  for (int i = 0; i < 200; ++i) got += round_trip(**a, **b, batch, *t, wait);
  EXPECT_EQ(rocelab::test::g_allocations.load() - before, 0);
  EXPECT_EQ(got, 200u * 16);
  EXPECT_GT((*b)->udp_stats().gro_receives, 0u);
}

}  // namespace
}  // namespace rocelab::emu
