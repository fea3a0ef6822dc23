// The RC send window (DeviceConfig::window_bytes): how many PSNs a requester
// may have sent and not yet seen acknowledged. On the simulated fabric a
// requester sends until its window is full before the first ACK can arrive,
// so the most PSNs outstanding at any send is the window exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/emu/pair.h"
#include "wire/packet.h"

namespace rocelab::emu::test {
namespace {

// The most PSNs a requester had outstanding when it sent a new one: its
// sends' PSNs against the PSN the last ACK it received acknowledged.
struct Outstanding : PacketTap {
  int64_t acked = -1;  // the last PSN acknowledged
  uint32_t next = 0;   // one past the highest PSN sent
  int64_t most = 0;
  size_t sends = 0;
  void on_packet(Direction dir, Nanos, const Datagram& d) override {
    auto p = wire::parse_roce(d.payload);
    if (!p) return;
    const uint32_t psn = p->hdr.bth.psn.value();
    if (dir == Direction::kRx) {
      if (p->hdr.bth.opcode == wire::op::kRcAck) acked = psn;
      return;
    }
    ++sends;
    next = std::max(next, psn + 1);
    most = std::max<int64_t>(most, static_cast<int64_t>(next) - 1 - acked);
  }
};

// A 1 MiB WRITE at path MTU mtu on devices with window_bytes: the most PSNs
// outstanding.
int64_t most_outstanding(uint32_t window_bytes, Mtu mtu) {
  Env env(Net::kSim, Mtu::k4096);
  env.set_window_bytes(window_bytes);
  constexpr uint32_t kLen = 1 << 20;
  Node a = env.make_node(1, QpType::kRC, kLen, access::kLocalWrite | access::kRemoteWrite);
  Node b = env.make_node(2, QpType::kRC, kLen, access::kLocalWrite | access::kRemoteWrite);
  EXPECT_TRUE(a.qp && b.qp);
  if (!a.qp || !b.qp) return -1;
  ConnectOptions o;
  o.path_mtu = mtu;
  EXPECT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, o));
  Outstanding seen;
  a.dev->set_tap(&seen);
  fill_pattern(a.buf, 0, kLen, 3);
  Sge s{a.addr(), kLen, a.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, 1);
  wr.rdma = {b.addr(), b.mr->rkey()};
  EXPECT_FALSE(post_send(a.qp, wr));
  auto wcs = env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()});
  a.dev->set_tap(nullptr);
  EXPECT_EQ(wcs.size(), 1u);
  if (wcs.size() != 1) return -1;
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.end(), b.buf.begin()));
  EXPECT_EQ(seen.sends, kLen / mtu_bytes(mtu)) << "a retransmission or a packet missing";
  return seen.most;
}

TEST(SendWindow, DefaultIs128PsnsAtAnyMtu) {
  EXPECT_EQ(most_outstanding(0, Mtu::k1024), 128);
  EXPECT_EQ(most_outstanding(0, Mtu::k4096), 128);
}

TEST(SendWindow, InBytesIsTheSameBytesAtEveryMtuBetween128And512Psns) {
  constexpr uint32_t k512K = 512 * 1024;
  EXPECT_EQ(most_outstanding(k512K, Mtu::k4096), 128);
  EXPECT_EQ(most_outstanding(k512K, Mtu::k2048), 256);
  EXPECT_EQ(most_outstanding(k512K, Mtu::k1024), 512);
  EXPECT_EQ(most_outstanding(k512K, Mtu::k256), 512) << "more than 512 PSNs";
  EXPECT_EQ(most_outstanding(64 * 1024, Mtu::k1024), 128) << "fewer than 128 PSNs";
}

}  // namespace
}  // namespace rocelab::emu::test
