// The ICRC on the simulated fabric is computed only where it is read
// (Transport::icrc_optional, Datagram::icrc_omitted): a device leaves it out
// of what it sends unless it captures; a capture on either side records the
// ICRC a NIC would have sent; a corruption fault fills it in before it flips
// a bit, so the damaged packet is one bit away from an intact one, as on a
// real wire. A raw port of the fabric plays the peer, so that what travels
// between the two is seen as it is.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emu/connect.h"
#include "emu/device.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/sim_fabric.h"
#include "wire/byte_order.h"
#include "wire/icrc.h"
#include "wire/packet.h"

namespace rocelab::emu {
namespace {

const wire::IpAddr kDev = wire::IpAddr::v4(10, 0, 0, 1), kPeer = wire::IpAddr::v4(10, 0, 0, 2);
constexpr uint32_t kPeerQpn = 0x123;

uint32_t carried_icrc(std::span<const std::byte> p) { return wire::load_le32(p.data() + p.size() - wire::kIcrcLen); }

bool icrc_matches(const wire::IpUdpInfo& ip, std::span<const std::byte> p) {
  return carried_icrc(p) == wire::roce_icrc(ip, p);
}

// How many single-bit flips of p make its ICRC match: 1 for a packet damaged
// in one bit after its ICRC was computed, 0 for one whose ICRC was never
// computed (nor for anything but a one-bit error).
int one_bit_repairs(const wire::IpUdpInfo& ip, std::span<const std::byte> p) {
  std::vector<std::byte> b(p.begin(), p.end());
  int n = 0;
  for (size_t bit = 0; bit < b.size() * 8; ++bit) {
    if (bit / 8 == 4) continue;  // BTH byte 4 is masked out of the ICRC
    b[bit / 8] ^= std::byte(1u << (bit % 8));
    if (icrc_matches(ip, b)) ++n;
    b[bit / 8] ^= std::byte(1u << (bit % 8));
  }
  return n;
}

struct Captured {
  Direction dir;
  wire::IpUdpInfo ip;
  std::vector<std::byte> bytes;
  bool omitted;
};

struct Capture : PacketTap {
  std::vector<Captured> seen;
  void on_packet(Direction dir, Nanos, const Datagram& d) override {
    seen.push_back({dir, d.ip, {d.payload.begin(), d.payload.end()}, d.icrc_omitted});
  }
};

class IcrcOnDemand : public ::testing::Test {
 protected:
  // The device at kDev, its transport wrapped in a fault injector running
  // `faults` when given, with an RC QP connected to kPeerQpn at the raw peer.
  void make_device(const std::string& faults = "") {
    peer_ = fabric_.attach(kPeer);
    std::unique_ptr<Transport> t = fabric_.attach(kDev);
    if (!faults.empty()) {
      FaultConfig fc;
      fc.schedule = faults;
      std::string err;
      t = FaultInjector::wrap(std::move(t), fc, &err);
      ASSERT_TRUE(t) << err;
    }
    ASSERT_TRUE(t->icrc_optional());
    DeviceConfig cfg;
    cfg.helper_thread = false;
    auto dev = Device::create(std::move(t), cfg);
    ASSERT_TRUE(dev.ok());
    dev_ = std::move(*dev);
    pd_ = *dev_->alloc_pd();
    cq_ = *dev_->create_cq(64, nullptr, 0);
    QpInitAttr ia;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = QpType::kRC;
    ia.cap = {8, 8, 1, 1, 64};
    qp_ = *dev_->create_qp(pd_, ia);
    ConnectOptions o;
    ASSERT_FALSE(qp_to_init(*qp_, o));
    ASSERT_FALSE(qp_to_rtr(*qp_, kPeer.gid(), kPeerQpn, 0, o));
    ASSERT_FALSE(qp_to_rts(*qp_, 0, o));
    mem_.assign(4096, std::byte{0});
    mr_ = *dev_->reg_mr(pd_, mem_.data(), mem_.size(), 0x10000, access::kLocalWrite | access::kRemoteWrite);
  }

  // The device posts an inline SEND of `text`; returns what the peer received.
  std::vector<Captured> device_sends(const std::string& text) {
    Sge s{reinterpret_cast<uint64_t>(text.data()), static_cast<uint32_t>(text.size()), 0};
    SendWr wr;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = send_flags::kInline;
    wr.sg_list = std::span<const Sge>(&s, 1);
    size_t posted = 0;
    EXPECT_FALSE(qp_->post_send(std::span<const SendWr>(&wr, 1), &posted));
    std::vector<Captured> got;
    for (int i = 0; i < 4; ++i) {
      dev_->progress();
      fabric_.advance(fabric_.now() + fabric_.config().latency);
      peer_->poll([&](const Datagram& r) {
        got.push_back({Direction::kRx, r.ip, {r.payload.begin(), r.payload.end()}, r.icrc_omitted});
      });
    }
    return got;
  }

  // How the peer's packet carries its ICRC.
  enum class Icrc { kComputed, kOmitted, kZeroNotFlagged };

  // The peer sends a one-packet RC WRITE of 64 bytes of `fill` to the MR,
  // and the device takes it.
  void peer_writes(std::byte fill, Icrc icrc, uint32_t psn) {
    wire::RoceHeaders h;
    h.bth.opcode = 0x0A;  // RC RDMA WRITE Only
    h.bth.psn = wire::Psn(psn);
    h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
    h.reth = {0x10000, mr_->rkey(), 64};
    std::vector<std::byte> payload(64, fill);
    std::vector<std::byte> buf(wire::kMaxRoceLen);
    auto n = wire::encode_roce(buf, h, payload);
    ASSERT_TRUE(n.ok());
    buf.resize(*n);
    Datagram d;
    d.ip.src = kPeer;
    d.ip.dst = kDev;
    std::memset(buf.data() + buf.size() - wire::kIcrcLen, 0, wire::kIcrcLen);
    if (icrc == Icrc::kComputed) wire::store_le32(buf.data() + buf.size() - wire::kIcrcLen, wire::roce_icrc(d.ip, buf));
    d.payload = buf;
    d.icrc_omitted = icrc == Icrc::kOmitted;
    peer_->send(std::span<const Datagram>(&d, 1));
    for (int i = 0; i < 4; ++i) {
      fabric_.advance(fabric_.now() + fabric_.config().latency);
      dev_->progress();
      peer_->poll([](const Datagram&) {});
    }
  }

  SimFabric fabric_;
  std::unique_ptr<Transport> peer_;
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  Mr* mr_ = nullptr;
  std::vector<std::byte> mem_;
};

// Without a capture the packet leaves with its ICRC's 4 bytes zero and says
// so; with one, the capture and the wire both carry the right ICRC.
TEST_F(IcrcOnDemand, LeftOutUnlessTheSenderCaptures) {
  make_device();
  auto got = device_sends("no capture here");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].omitted);
  EXPECT_EQ(carried_icrc(got[0].bytes), 0u);
  auto p = wire::parse_roce(got[0].bytes);
  ASSERT_TRUE(p);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(p->payload.data()), p->payload.size()), "no capture here");

  Capture cap;
  dev_->set_tap(&cap);
  got = device_sends("captured");
  dev_->set_tap(nullptr);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].omitted);
  EXPECT_TRUE(icrc_matches(got[0].ip, got[0].bytes));
  ASSERT_EQ(cap.seen.size(), 1u);
  EXPECT_EQ(cap.seen[0].dir, Direction::kTx);
  EXPECT_EQ(cap.seen[0].bytes, got[0].bytes);
}

// A packet that says its ICRC was left out is taken as intact, and a capture
// of it records the ICRC filled in; the same zero ICRC on a packet that does
// not say so is a bad ICRC.
TEST_F(IcrcOnDemand, ReceivedOmittedIsIntactAndCapturedFilledIn) {
  make_device();
  Capture cap;
  dev_->set_tap(&cap);
  peer_writes(std::byte{0xAB}, Icrc::kOmitted, 0);
  EXPECT_EQ(mem_[0], std::byte{0xAB});
  EXPECT_EQ(mem_[63], std::byte{0xAB});
  ASSERT_FALSE(cap.seen.empty());
  EXPECT_EQ(cap.seen[0].dir, Direction::kRx);
  EXPECT_FALSE(cap.seen[0].omitted);
  EXPECT_NE(carried_icrc(cap.seen[0].bytes), 0u);
  EXPECT_TRUE(icrc_matches(cap.seen[0].ip, cap.seen[0].bytes));

  peer_writes(std::byte{0xCD}, Icrc::kComputed, 1);
  EXPECT_EQ(mem_[0], std::byte{0xCD});
  EXPECT_EQ(dev_->counters().rcvd_icrc_err, 0u);

  // A zero ICRC without the flag: damaged.
  peer_writes(std::byte{0xEF}, Icrc::kZeroNotFlagged, 2);
  EXPECT_EQ(mem_[0], std::byte{0xCD});
  EXPECT_EQ(dev_->counters().rcvd_icrc_err, 1u);
  dev_->set_tap(nullptr);
}

// A fault that corrupts what the device sends fills the left-out ICRC in
// first: the peer gets a packet that one bit flip makes intact again.
TEST_F(IcrcOnDemand, CorruptedOnSendIsOneBitFromIntact) {
  make_device("corrupt:nth=1");
  const auto got = device_sends("damaged on the way");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].omitted);
  EXPECT_FALSE(icrc_matches(got[0].ip, got[0].bytes));
  EXPECT_EQ(one_bit_repairs(got[0].ip, got[0].bytes), 1);
}

// The same on receive: the device drops the damaged packet as a bad ICRC,
// and its capture shows it one bit from intact.
TEST_F(IcrcOnDemand, CorruptedOnReceiveIsDroppedAndOneBitFromIntact) {
  make_device("corrupt:dir=rx:nth=1");
  Capture cap;
  dev_->set_tap(&cap);
  peer_writes(std::byte{0x5A}, Icrc::kOmitted, 0);
  dev_->set_tap(nullptr);
  EXPECT_EQ(dev_->counters().rcvd_icrc_err, 1u);
  EXPECT_EQ(mem_[0], std::byte{0});
  ASSERT_FALSE(cap.seen.empty());
  EXPECT_EQ(cap.seen[0].dir, Direction::kRx);
  EXPECT_EQ(one_bit_repairs(cap.seen[0].ip, cap.seen[0].bytes), 1);
}

}  // namespace
}  // namespace rocelab::emu
