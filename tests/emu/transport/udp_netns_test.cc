// The UDP transport between two network namespaces joined by a veth pair, with
// the sender's veth limited to gso_max_segs 1 so that the kernel segments GSO
// packets in software, as on a path to a NIC without UDP segmentation offload.
// dumpcap on the receiving veth judges what is on the wire. Software
// segmentation numbers the IPv4 IDs 0, 1, 2, ...: the transport must have
// rewritten each segment's ICRC for its ID; IPv6 has no ID. Needs root (ip
// netns, setns) and dumpcap: label `tools`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <thread>

#include "capture.h"
#include "emu/transport/udp_transport.h"
#include "udp_test_util.h"
#include "wire/frame.h"

namespace rocelab::emu {
namespace {

using test::Frame;

// Two namespaces and a veth pair between them; removed again at the end.
class VethPair : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, setns): skipped";
    const std::string id = std::to_string(::getpid() % 100000);
    ns_a_ = "rocelab_" + id + "_a";
    ns_b_ = "rocelab_" + id + "_b";
    dev_a_ = "rl" + id + "a";
    dev_b_ = "rl" + id + "b";
    const std::string cmds[] = {
        "ip netns add " + ns_a_,
        "ip netns add " + ns_b_,
        "ip link add " + dev_a_ + " type veth peer name " + dev_b_,
        "ip link set " + dev_a_ + " netns " + ns_a_,
        "ip link set " + dev_b_ + " netns " + ns_b_,
        "ip -n " + ns_a_ + " addr add 10.211.0.1/24 dev " + dev_a_,
        "ip -n " + ns_b_ + " addr add 10.211.0.2/24 dev " + dev_b_,
        "ip -n " + ns_a_ + " addr add fd00:211::1/64 dev " + dev_a_ + " nodad",
        "ip -n " + ns_b_ + " addr add fd00:211::2/64 dev " + dev_b_ + " nodad",
        "ip -n " + ns_a_ + " link set " + dev_a_ + " up gso_max_segs 1",
        "ip -n " + ns_b_ + " link set " + dev_b_ + " up",
    };
    for (const auto& c : cmds) {
      ASSERT_EQ(std::system((c + " 2>&1").c_str()), 0) << c << " (needs root)";
    }
    created_ = true;
  }
  void TearDown() override {
    if (!ns_a_.empty()) std::system(("ip netns del " + ns_a_ + " 2>/dev/null").c_str());
    if (!ns_b_.empty()) std::system(("ip netns del " + ns_b_ + " 2>/dev/null").c_str());
  }

  // Opens a transport on addr inside namespace ns (its sockets stay there) and
  // reserves a source port there (send sockets are made in the caller's namespace).
  std::unique_ptr<UdpTransport> open_in(const std::string& ns, const char* addr,
                                        const UdpTransportConfig& cfg, uint16_t* sport = nullptr) {
    int self = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(self, 0);
    EXPECT_GE(target, 0);
    EXPECT_EQ(::setns(target, CLONE_NEWNET), 0);
    auto local = wire::IpAddr::parse(addr);
    auto t = UdpTransport::open(*local, cfg);
    if (t && sport != nullptr) {
      auto p = (*t)->reserve_source_port();
      EXPECT_TRUE(p) << p.error().message();
      *sport = p ? *p : 0;
    }
    EXPECT_EQ(::setns(self, CLONE_NEWNET), 0);
    ::close(self);
    ::close(target);
    EXPECT_TRUE(t) << t.error().message();
    return t ? std::move(t).value() : nullptr;
  }

  // n RDMA WRITE Middle packets of 1024 bytes from a (source port sport) to b.
  static std::vector<Frame> write_frames(const Transport& a, const Transport& b, uint16_t sport, uint32_t n) {
    wire::IpUdpInfo ip;
    ip.src = a.local_address();
    ip.dst = b.local_address();
    ip.sport = sport;
    std::vector<Frame> frames;
    for (uint32_t i = 0; i < n; ++i) frames.push_back(test::make_frame(ip, wire::op::kRcWriteMiddle, i, 1024));
    return frames;
  }

  struct Wire {
    uint16_t ip_id;
    bool icrc_ok;
  };
  // Sends 8 equal-size frames from a to b in one batch; returns what dumpcap
  // saw on b's veth, and checks that b received them byte-exact up to the
  // ICRC (an IPv4 GSO segment k carries the ICRC for ID k: judged on the wire),
  // and that the sender's frames are given back unchanged.
  std::vector<Wire> send_run(bool v6, const UdpTransportConfig& cfg) {
    std::vector<Wire> out;
    uint16_t sport = 0;
    auto a = open_in(ns_a_, v6 ? "fd00:211::1" : "10.211.0.1", cfg, &sport);
    auto b = open_in(ns_b_, v6 ? "fd00:211::2" : "10.211.0.2", {});
    if (!a || !b) return out;
    test::Capture cap(ROCELAB_DUMPCAP, dev_b_, "udp port 4791", ns_b_);
    EXPECT_TRUE(cap.ok()) << cap.error();
    if (!cap.ok()) return out;
    const std::vector<Frame> frames = write_frames(*a, *b, sport, 8);
    const std::vector<Frame> before = frames;
    auto batch = test::datagrams(frames);
    EXPECT_EQ(a->send(batch), 8u);
    for (size_t i = 0; i < frames.size(); ++i) {
      auto x = frames[i].udp_payload(), y = before[i].udp_payload();
      EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << "frame " << i << " changed";
    }
    auto got = test::receive(*b, 8);
    EXPECT_EQ(got.size(), 8u);
    for (size_t i = 0; i < got.size() && i < frames.size(); ++i) {
      auto want = frames[i].udp_payload();
      EXPECT_TRUE(want.size() == got[i].second.size() &&
                  std::equal(want.begin(), want.end() - 4, got[i].second.begin()));
    }
    cap.stop();
    int link_type = 0;
    for (const auto& p : cap.read(link_type)) {
      auto d = wire::decode_frame(link_type, p.data);
      EXPECT_TRUE(d) << d.error().message();
      if (d) out.push_back({d->ip.info.ip_id, d->icrc_ok()});
    }
    gso_sends_ = a->udp_stats().gso_sends;
    return out;
  }

  std::string ns_a_, ns_b_, dev_a_, dev_b_;
  bool created_ = false;
  uint64_t gso_sends_ = 0;
};

TEST_F(VethPair, Ipv4WireExactSendsEachDatagramWithId0AndAGoodIcrc) {
  auto seen = send_run(false, UdpTransportConfig::wire_exact());
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(gso_sends_, 0u);
  for (const auto& w : seen) {
    EXPECT_EQ(w.ip_id, 0);
    EXPECT_TRUE(w.icrc_ok);
  }
}

TEST_F(VethPair, Ipv4GsoSegmentedInSoftwareNumbersTheIdsAndEachIcrcIsMadeForItsId) {
  auto seen = send_run(false, {});  // the default: IPv4 GSO
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(gso_sends_, 1u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].ip_id, i);        // the kernel's numbering
    EXPECT_TRUE(seen[i].icrc_ok) << i;  // the transport rewrote segment i's ICRC for ID i
  }
}

TEST_F(VethPair, Ipv6GsoSegmentedInSoftwareKeepsEveryIcrcGood) {
  auto seen = send_run(true, {});
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(gso_sends_, 1u);
  for (const auto& w : seen) EXPECT_TRUE(w.icrc_ok);
}

// A peer that vanished across a link (its process exited, the host stays):
// the host answers with ICMP port unreachable, rate-limited to a few, and each
// arrives while a batch is being sent, so sendmmsg reports it as a partial
// count only. The transport must still find it in the error queue.
TEST_F(VethPair, VanishedPeerIsReportedUnreachableAcrossTheLink) {
  for (const bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
    uint16_t sport = 0;
    auto a = open_in(ns_a_, v6 ? "fd00:211::1" : "10.211.0.1", {}, &sport);
    auto b = open_in(ns_b_, v6 ? "fd00:211::2" : "10.211.0.2", {});
    ASSERT_TRUE(a && b);
    const std::vector<Frame> frames = write_frames(*a, *b, sport, 64);
    auto batch = test::datagrams(frames);
    std::array<wire::IpAddr, 4> out;
    ASSERT_EQ(a->send(batch), 64u);
    EXPECT_EQ(test::receive(*b, 64).size(), 64u);
    EXPECT_EQ(a->take_unreachable(out), 0u);

    const wire::IpAddr gone = b->local_address();
    b.reset();
    size_t n = 0;
    for (int i = 0; i < 100 && n == 0; ++i) {
      a->send(batch);
      n = a->take_unreachable(out);
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(out[0], gone);
  }
}

}  // namespace
}  // namespace rocelab::emu
