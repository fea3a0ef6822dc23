// Device::reset and SimFabric::reset: after both, the same calls give the same
// QPNs, keys, packets (byte for byte, at the same virtual times) and counters
// as on new devices, whatever was left in flight or queued before.
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"
#include "wire/packet.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic;

struct Sent {
  Nanos time;
  std::vector<std::byte> bytes;
  bool operator==(const Sent&) const = default;
};

class SentTap final : public PacketTap {
 public:
  std::vector<Sent> sent;
  void on_packet(Direction dir, Nanos time, const Datagram& d) override {
    if (dir == Direction::kTx) sent.push_back({time, {d.payload.begin(), d.payload.end()}});
  }
};

std::vector<std::pair<std::string, uint64_t>> counter_list(const Counters& c) {
  std::vector<std::pair<std::string, uint64_t>> out;
  c.for_each([&](std::string_view name, uint64_t v) { out.emplace_back(std::string(name), v); });
  return out;
}

// What one run of the workload shows of the devices.
struct Outcome {
  uint32_t qpn_a = 0, qpn_b = 0, rkey_a = 0, rkey_b = 0, lkey_b = 0, pd_b = 0, srq_b = 0;
  std::vector<Sent> sent_by_a;
  std::vector<std::pair<std::string, uint64_t>> counters_a, counters_b;
  Nanos end{0};
};

// Objects on both devices, a connection, a SEND, a WRITE and a READ to
// completion. The MRs sit at fixed I/O addresses, so that the packets do not
// depend on where the buffers happen to be.
Outcome workload(Env& env, Node& a, Node& b, SentTap& tap) {
  Outcome o;
  testbed::EndpointSpec spec{QpType::kRC, 4096, kAll, 64, {16, 16, 2, 2, 64}, true, 0x10000};
  EXPECT_EQ(a.open(spec), "");
  EXPECT_EQ(b.open(spec), "");
  Srq* srq = *b.dev->create_srq(b.pd, SrqAttr{8, 1, 0});
  EXPECT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
  fill_pattern(a.buf, 0, 4096, 3);
  fill_pattern(b.buf, 0, 4096, 9);
  EXPECT_FALSE(post_recv(b.qp, b.addr(), 512, b.mr->lkey(), 1));
  Sge s{a.addr(), 300, a.mr->lkey()};
  Sge w{a.addr() + 512, 2000, a.mr->lkey()};
  Sge r{a.addr() + 2560, 1500, a.mr->lkey()};
  SendWr write = make_wr(WrOpcode::kRdmaWrite, &w, 1, 2);
  write.rdma = {b.addr() + 1024, b.mr->rkey()};
  SendWr read = make_wr(WrOpcode::kRdmaRead, &r, 1, 3);
  read.rdma = {b.addr(), b.mr->rkey()};
  EXPECT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  EXPECT_FALSE(post_send(a.qp, write));
  EXPECT_FALSE(post_send(a.qp, read));
  const auto wcs = env.wait_wcs(a.scq, 3, {a.dev.get(), b.dev.get()});
  EXPECT_EQ(wcs.size(), 3u);
  for (const Wc& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << wc.wr_id;
  EXPECT_EQ(env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);
  o.qpn_a = a.qp->qp_num();
  o.qpn_b = b.qp->qp_num();
  o.rkey_a = a.mr->rkey();
  o.rkey_b = b.mr->rkey();
  o.lkey_b = b.mr->lkey();
  o.pd_b = b.pd->handle();
  o.srq_b = srq->srq_num();
  o.sent_by_a = std::move(tap.sent);
  tap.sent.clear();
  o.counters_a = counter_list(a.dev->counters());
  o.counters_b = counter_list(b.dev->counters());
  o.end = env.fabric()->now();
  return o;
}

size_t queued_async_events(Device& dev) {
  size_t n = 0;
  const int flags = ::fcntl(dev.async_fd(), F_GETFL);
  ::fcntl(dev.async_fd(), F_SETFL, flags | O_NONBLOCK);
  AsyncEvent ev;
  while (!dev.get_async_event(&ev)) {
    EXPECT_EQ(ev.event_type, EventType::kPortActive);
    ++n;
  }
  ::fcntl(dev.async_fd(), F_SETFL, flags);
  return n;
}

TEST(Reset, TheSameCallsGiveTheSameQpnsKeysPacketsAndTimes) {
  Env env(Net::kSim);
  SentTap tap;
  Node a, b;
  a.dev = env.make_device(1);
  b.dev = env.make_device(2);
  ASSERT_TRUE(a.dev && b.dev);
  a.dev->set_tap(&tap);
  const Outcome first = workload(env, a, b, tap);
  ASSERT_FALSE(first.sent_by_a.empty());

  // Leave work behind: a WRITE in flight with its retransmission timer
  // armed, a completion channel open, the PORT_ACTIVE event not taken.
  Sge w{a.addr(), 1000, a.mr->lkey()};
  SendWr write = make_wr(WrOpcode::kRdmaWrite, &w, 1, 9);
  write.rdma = {b.addr(), b.mr->rkey()};
  ASSERT_FALSE(post_send(a.qp, write));
  a.dev->progress();
  ASSERT_GT(env.fabric()->in_flight(), 0u);
  const int channel_fd = a.ch->fd();
  EXPECT_EQ(env.fabric()->reset(), std::errc::device_or_resource_busy);  // the QP's timer

  a.dev->reset();
  b.dev->reset();
  ASSERT_FALSE(env.fabric()->reset());
  EXPECT_EQ(env.fabric()->in_flight(), 0u);
  EXPECT_EQ(env.fabric()->now(), Nanos(0));
  EXPECT_EQ(::fcntl(channel_fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(counter_list(a.dev->counters()), counter_list(Counters{}));
  EXPECT_EQ(queued_async_events(*a.dev), 1u);
  EXPECT_EQ(queued_async_events(*b.dev), 1u);
  tap.sent.clear();

  Node a2, b2;
  a2.dev = std::move(a.dev);
  b2.dev = std::move(b.dev);
  const Outcome again = workload(env, a2, b2, tap);
  EXPECT_EQ(again.qpn_a, first.qpn_a);
  EXPECT_EQ(again.qpn_b, first.qpn_b);
  EXPECT_EQ(again.rkey_a, first.rkey_a);
  EXPECT_EQ(again.rkey_b, first.rkey_b);
  EXPECT_EQ(again.lkey_b, first.lkey_b);
  EXPECT_EQ(again.pd_b, first.pd_b);
  EXPECT_EQ(again.srq_b, first.srq_b);
  EXPECT_EQ(again.counters_a, first.counters_a);
  EXPECT_EQ(again.counters_b, first.counters_b);
  EXPECT_EQ(again.end, first.end);
  ASSERT_EQ(again.sent_by_a.size(), first.sent_by_a.size());
  for (size_t i = 0; i < first.sent_by_a.size(); ++i)
    EXPECT_EQ(again.sent_by_a[i], first.sent_by_a[i]) << "packet " << i;
  // The READ brought b's first 1,500 bytes into a's buffer.
  EXPECT_TRUE(std::equal(a2.buf.begin() + 2560, a2.buf.begin() + 4060, b2.buf.begin()));
  a2.dev->set_tap(nullptr);
}

TEST(Reset, MulticastGroupsAreLeft) {
  Env env(Net::kSim);
  auto dev = env.make_device(1);
  auto other = env.make_device(2);
  ASSERT_TRUE(dev && other);
  Node n;
  n.dev = std::move(dev);
  ASSERT_EQ(n.open({QpType::kUD, 4096, access::kLocalWrite}), "");
  ASSERT_FALSE(qp_to_init(*n.qp, ConnectOptions{}));
  Gid group{};
  group[10] = group[11] = 0xFF;
  group[12] = 239;
  group[15] = 1;  // ::ffff:239.0.0.1
  ASSERT_FALSE(n.dev->attach_mcast(n.qp, group));
  n.dev->reset();
  // A datagram to the group reaches nobody now: the fabric has no member left.
  const std::byte payload[40]{};
  Datagram d;
  d.ip.src = other->address();
  d.ip.dst = wire::IpAddr::from_gid(group);
  d.ip.sport = 0xC000;
  d.ip.dport = wire::kRoceV2Port;
  d.payload = payload;
  other->transport().send(std::span<const Datagram>(&d, 1));
  EXPECT_EQ(env.fabric()->in_flight(), 0u);
}

}  // namespace
}  // namespace rocelab::emu::test
