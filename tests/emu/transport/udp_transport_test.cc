// The UDP transport over real sockets on loopback: address allocation, batches
// delivered byte-exact with their addresses and source port, ICMP port
// unreachable reported for a peer that is gone.
#include "emu/transport/udp_transport.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <thread>

#include "udp_test_util.h"
#include "wire/byte_order.h"
#include "wire/frame.h"
#include "wire/icrc.h"

namespace rocelab::emu {
namespace {

using namespace std::chrono_literals;
using test::Frame;
using test::make_frame;

// Two transports on the first two free 127.0.0.x addresses.
struct Pair {
  std::unique_ptr<UdpTransport> a, b;
};
Pair open_pair(const UdpTransportConfig& cfg_a = {}, const UdpTransportConfig& cfg_b = {}) {
  Pair p;
  auto ra = allocate_loopback_address();
  EXPECT_TRUE(ra) << ra.error().message();
  auto rb = allocate_loopback_address();
  EXPECT_TRUE(rb) << rb.error().message();
  if (!ra || !rb) return p;
  EXPECT_NE(ra->address(), rb->address());
  auto a = UdpTransport::open(std::move(*ra), cfg_a);
  auto b = UdpTransport::open(std::move(*rb), cfg_b);
  EXPECT_TRUE(a && b);
  if (a && b) {
    p.a = std::move(a).value();
    p.b = std::move(b).value();
  }
  return p;
}

wire::IpUdpInfo path(const Transport& from, const Transport& to, uint16_t sport) {
  wire::IpUdpInfo ip;
  ip.src = from.local_address();
  ip.dst = to.local_address();
  ip.sport = sport;
  return ip;
}

TEST(UdpTransport, AllocatesDistinctLoopbackAddressesFirstFreeFirst) {
  auto r1 = allocate_loopback_address(10);
  ASSERT_TRUE(r1) << r1.error().message();
  EXPECT_FALSE(r1->address().v6);
  EXPECT_EQ(r1->address().b[0], 127);
  EXPECT_GE(r1->address().b[3], 10);
  // r1's address is taken now: the search from there skips it.
  auto r2 = allocate_loopback_address(r1->address().b[3]);
  ASSERT_TRUE(r2);
  EXPECT_GT(r2->address().b[3], r1->address().b[3]);
  // Binding the taken address explicitly fails with address_in_use.
  auto again = bind_rx_socket(r1->address());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), std::errc::address_in_use);
}

TEST(UdpTransport, ExchangesBatchesByteExactWithAddressesAndSourcePort) {
  auto p = open_pair(UdpTransportConfig::wire_exact());  // one datagram per packet
  ASSERT_TRUE(p.a && p.b);
  auto sport = p.a->reserve_source_port(0xC123);
  ASSERT_TRUE(sport) << sport.error().message();
  std::vector<Frame> frames;
  for (uint32_t i = 0; i < 50; ++i)
    frames.push_back(make_frame(path(*p.a, *p.b, *sport), wire::op::kRcSendOnly, 100 + i, i * 37 % 1500));
  auto batch = test::datagrams(frames);
  EXPECT_EQ(p.a->send(batch), 50u);
  auto got = test::receive(*p.b, 50);
  ASSERT_EQ(got.size(), 50u);
  for (size_t i = 0; i < got.size(); ++i) {
    auto want = frames[i].udp_payload();
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got[i].second.begin(), got[i].second.end()))
        << "datagram " << i;
    EXPECT_EQ(got[i].first.src, p.a->local_address());
    EXPECT_EQ(got[i].first.dst, p.b->local_address());  // from IP_PKTINFO
    EXPECT_EQ(got[i].first.sport, *sport);
    EXPECT_EQ(got[i].first.dport, 4791);
    EXPECT_EQ(got[i].first.ttl, 64);
  }
  EXPECT_EQ(p.a->stats().tx_datagrams, 50u);
  EXPECT_EQ(p.b->stats().rx_datagrams, 50u);
  EXPECT_EQ(p.a->udp_stats().gso_sends, 0u);  // wire-exact: no GSO
}

// A peer whose process has exited: its port 4791 is closed, the kernel answers
// with ICMP port unreachable, and the next send from the same socket reports
// it. take_unreachable() names the destination once; a live peer never shows up.
// Sent one at a time, the datagram after the ICMP error fails with
// ECONNREFUSED; sent in batches, sendmmsg returns a partial count instead and
// only the socket's error queue still holds the error. Both must name b.
class UdpUnreachable : public ::testing::TestWithParam<size_t> {};

TEST_P(UdpUnreachable, IcmpPortUnreachableNamesTheVanishedDestination) {
  const size_t batch = GetParam();
  auto p = open_pair();
  ASSERT_TRUE(p.a && p.b);
  auto sport = p.a->reserve_source_port(0xC321);
  ASSERT_TRUE(sport);
  const wire::IpUdpInfo to_b = path(*p.a, *p.b, *sport);
  const wire::IpAddr b_addr = p.b->local_address();
  std::array<wire::IpAddr, 4> out;
  std::vector<Frame> frames;
  for (uint32_t i = 0; i < batch; ++i) frames.push_back(make_frame(to_b, wire::op::kRcSendOnly, i, 64));
  auto dgrams = test::datagrams(frames);
  ASSERT_EQ(p.a->send(dgrams), batch);
  ASSERT_EQ(test::receive(*p.b, batch).size(), batch);
  EXPECT_EQ(p.a->take_unreachable(out), 0u);  // b is alive

  p.b.reset();  // b's socket closes: nothing listens on b:4791 any more
  size_t n = 0;
  for (int i = 0; i < 200 && n == 0; ++i) {  // the ICMP error comes back asynchronously
    p.a->send(dgrams);
    n = p.a->take_unreachable(out);
    if (n == 0) std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(out[0], b_addr);
  EXPECT_EQ(p.a->take_unreachable(out), 0u);  // reported once
}

INSTANTIATE_TEST_SUITE_P(Batch, UdpUnreachable, ::testing::Values(1, 8));

// Segment k of an IPv4 GSO run carries the ICRC for IPv4 Identification k (the
// ID the kernel gives it where it segments); everything else byte-exact.
TEST(UdpTransport, GsoRunsArriveAsGroSuperDatagramsAndSplitByteExact) {
  auto p = open_pair();  // the default: GSO, on loopback too
  ASSERT_TRUE(p.a && p.b);
  auto sport = p.a->reserve_source_port();
  ASSERT_TRUE(sport);
  std::vector<Frame> frames;
  // 30 full segments and a shorter last one, then a second run of a different size.
  for (uint32_t i = 0; i < 30; ++i)
    frames.push_back(make_frame(path(*p.a, *p.b, *sport), wire::op::kRcWriteMiddle, i, 1024));
  frames.push_back(make_frame(path(*p.a, *p.b, *sport), wire::op::kRcWriteLast, 30, 100));
  for (uint32_t i = 31; i < 41; ++i)
    frames.push_back(make_frame(path(*p.a, *p.b, *sport), wire::op::kRcSendMiddle, i, 256));
  auto batch = test::datagrams(frames);
  EXPECT_EQ(p.a->send(batch), frames.size());
  EXPECT_GE(p.a->udp_stats().gso_sends, 2u);
  // Deliver in small polls so that a super-datagram straddles poll() calls.
  std::vector<std::vector<std::byte>> got;
  const Nanos give_up = p.b->now() + 10s;
  while (got.size() < frames.size() && p.b->now() < give_up) {
    p.b->poll([&](const Datagram& d) { got.emplace_back(d.payload.begin(), d.payload.end()); }, 7);
    if (got.size() < frames.size()) p.b->wait(p.b->now() + 100ms);
  }
  ASSERT_EQ(got.size(), frames.size());
  for (size_t i = 0; i < got.size(); ++i) {
    auto want = frames[i].udp_payload();
    ASSERT_EQ(want.size(), got[i].size()) << i;
    EXPECT_TRUE(std::equal(want.begin(), want.end() - 4, got[i].begin())) << i;
    const uint16_t k = static_cast<uint16_t>(i <= 30 ? i : i - 31);  // the position in its run
    const size_t rest = want.size() - wire::kBthLen - wire::kIcrcLen;
    EXPECT_EQ(wire::load_le32(got[i].data() + got[i].size() - 4),
              wire::load_le32(want.data() + want.size() - 4) ^ wire::ipv4_id_icrc_delta(k, wire::kIpv4HeaderLen, rest))
        << i;
  }
  EXPECT_GE(p.b->udp_stats().gro_receives, 1u);
}

TEST(UdpTransport, Ipv6LoopbackGsoWhenAskedFor) {
  auto local = wire::IpAddr::parse("::1");
  ASSERT_TRUE(local);
  // Another test (of any helper) may hold [::1]:4791 for a moment.
  Result<std::unique_ptr<UdpTransport>> t = std::make_error_code(std::errc::address_in_use);
  for (int i = 0; i < 100 && !t; ++i) {
    UdpTransportConfig cfg;
    cfg.gso_loopback = true;
    t = UdpTransport::open(*local, cfg);
    if (!t) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(t) << t.error().message();
  UdpTransport& u = **t;
  auto sport = u.reserve_source_port(0xD000);
  ASSERT_TRUE(sport);
  std::vector<Frame> frames;
  for (uint32_t i = 0; i < 8; ++i)
    frames.push_back(make_frame(path(u, u, *sport), wire::op::kRcSendMiddle, i, 512));
  auto batch = test::datagrams(frames);
  EXPECT_EQ(u.send(batch), 8u);
  EXPECT_EQ(u.udp_stats().gso_sends, 1u);
  auto got = test::receive(u, 8);
  ASSERT_EQ(got.size(), 8u);
  for (size_t i = 0; i < got.size(); ++i) {
    auto want = frames[i].udp_payload();
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got[i].second.begin(), got[i].second.end()));
    EXPECT_TRUE(got[i].first.src.v6);
    EXPECT_EQ(got[i].first.dst, *local);
    EXPECT_EQ(got[i].first.sport, *sport);
  }
  EXPECT_EQ(u.udp_stats().gro_receives, 1u);
}

// Soft-RoCE sends RoCEv2 over IPv6 with a UDP checksum of 0 (the ICRC guards
// the packet). Linux drops such datagrams unless the socket allows them
// (UDP_NO_CHECK6_RX); before that, not one packet of the kernel's reached the
// engine over IPv6 (make interop, rc6). A raw socket sends exactly what rxe
// sends: the frame's UDP header with checksum 0, which the kernel leaves alone.
TEST(UdpTransport, Ipv6AcceptsAZeroUdpChecksumAsSoftRoceSends) {
  int raw = ::socket(AF_INET6, SOCK_RAW, IPPROTO_UDP);
  if (raw < 0) GTEST_SKIP() << "raw sockets need root: " << std::strerror(errno);
  auto local = wire::IpAddr::parse("::1");
  ASSERT_TRUE(local);
  Result<std::unique_ptr<UdpTransport>> t = std::make_error_code(std::errc::address_in_use);
  for (int i = 0; i < 100 && !t; ++i) {  // another test may hold [::1]:4791 for a moment
    t = UdpTransport::open(*local, {});
    if (!t) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(t) << t.error().message();
  UdpTransport& u = **t;
  wire::IpUdpInfo ip;
  ip.src = *local;
  ip.dst = *local;
  ip.sport = 0xC123;
  Frame f = make_frame(ip, wire::op::kRcSendOnly, 7, 100);
  auto udp = std::span(f.ip_packet).subspan(wire::kIpv6HeaderLen);
  ASSERT_EQ(std::to_integer<int>(udp[6]) | std::to_integer<int>(udp[7]), 0) << "the builder writes 0";
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::sendto(raw, udp.data(), udp.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(udp.size()))
      << std::strerror(errno);
  ::close(raw);
  auto got = test::receive(u, 1);
  ASSERT_EQ(got.size(), 1u) << "the datagram with UDP checksum 0 was dropped";
  auto want = f.udp_payload();
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got[0].second.begin(), got[0].second.end()));
  EXPECT_EQ(got[0].first.sport, 0xC123);
}

TEST(UdpTransport, ReserveSourcePortSkipsATakenPortAndRejectsForeignSources) {
  auto p = open_pair();
  ASSERT_TRUE(p.a && p.b);
  // Someone else holds (a, 0xE000).
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(0xE000);
  std::memcpy(&sa.sin_addr, p.a->local_address().b.data(), 4);
  int other = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  Transport& as_transport = *p.a;  // the engine asks through the interface
  auto port = as_transport.reserve_source_port(0xE000);
  ASSERT_TRUE(port);
  EXPECT_EQ(*port, 0xE001);
  EXPECT_EQ(*p.a->reserve_source_port(0xE001), 0xE001);  // already ours: usable
  // Sending from the taken port is an error the engine sees in tx_errors.
  Frame f = make_frame(path(*p.a, *p.b, 0xE000), wire::op::kRcSendOnly, 1, 8);
  Frame g = make_frame(path(*p.a, *p.b, 0x1234), wire::op::kRcSendOnly, 2, 8);  // below 0xC000
  Frame h = make_frame(path(*p.b, *p.b, 0xE001), wire::op::kRcSendOnly, 3, 8);  // not a's address
  std::vector<Frame> frames = {f, g, h};
  auto batch = test::datagrams(frames);
  EXPECT_EQ(p.a->send(batch), 0u);
  EXPECT_EQ(p.a->stats().tx_errors, 3u);
  ::close(other);
}

TEST(UdpTransport, TimersFireNotBeforeTheirDeadlineInDeadlineOrder) {
  auto p = open_pair();
  ASSERT_TRUE(p.a);
  std::vector<int> order;
  std::vector<Nanos> fired_at;
  auto t1 = p.a->make_timer([&] { order.push_back(1); fired_at.push_back(p.a->now()); });
  auto t2 = p.a->make_timer([&] { order.push_back(2); fired_at.push_back(p.a->now()); });
  const Nanos start = p.a->now();
  t1->arm_at(start + 20ms);
  t2->arm_at(start + 5ms);
  const Nanos give_up = start + 10s;
  while (order.size() < 2 && p.a->now() < give_up) {
    p.a->wait(give_up);  // returns for each timer: no datagram is coming
    p.a->poll([](const Datagram&) {});
  }
  ASSERT_EQ(order, (std::vector<int>{2, 1}));
  EXPECT_GE(fired_at[0], start + 5ms);
  EXPECT_GE(fired_at[1], start + 20ms);
}

TEST(UdpTransport, WaitReturnsOnWakeFromAnotherThread) {
  auto p = open_pair();
  ASSERT_TRUE(p.a);
  const Nanos start = p.a->now();
  std::thread waker([&] {
    std::this_thread::sleep_for(20ms);
    p.a->wake();
  });
  p.a->wait(start + 60s);
  waker.join();
  EXPECT_LT(p.a->now(), start + 60s);  // woken, not timed out
}

TEST(UdpTransport, WaitReturnsWhenADatagramArrives) {
  auto p = open_pair();
  ASSERT_TRUE(p.a && p.b);
  auto sport = p.a->reserve_source_port();
  ASSERT_TRUE(sport);
  std::vector<Frame> frames = {make_frame(path(*p.a, *p.b, *sport), wire::op::kRcSendOnly, 7, 64)};
  auto batch = test::datagrams(frames);
  const Nanos start = p.b->now();
  std::thread sender([&] {
    std::this_thread::sleep_for(20ms);
    p.a->send(batch);
  });
  p.b->wait(start + 60s);
  sender.join();
  EXPECT_LT(p.b->now(), start + 60s);
  size_t n = 0;
  for (int i = 0; i < 100 && n == 0; ++i) n += p.b->poll([](const Datagram&) {});
  EXPECT_EQ(n, 1u);
}

TEST(UdpTransport, TimerArmedWhileAnotherThreadWaitsWakesIt) {
  auto p = open_pair();
  ASSERT_TRUE(p.a);
  bool fired = false;
  auto t = p.a->make_timer([&] { fired = true; });
  const Nanos start = p.a->now();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    p.a->wait(start + 60s);
    returned = true;
  });
  std::this_thread::sleep_for(20ms);
  t->arm_at(p.a->now() + 1ms);  // earlier than the waiter's deadline
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_LT(p.a->now(), start + 60s);
  while (!fired && p.a->now() < start + 10s) {
    p.a->wait(start + 10s);
    p.a->poll([](const Datagram&) {});
  }
  EXPECT_TRUE(fired);
}

}  // namespace
}  // namespace rocelab::emu
