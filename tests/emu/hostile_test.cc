// Hostile peers on the simulated fabric: packets built with src/wire's
// encoder, sent from an attacker's port, against a device driven through the
// public API. Each test is one hostile request sequence that the responder
// must refuse without harm (the fuzzers, tests/fuzz and docs/security.md,
// search for more).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "emu/connect.h"
#include "emu/device.h"
#include "emu/transport/sim_fabric.h"
#include "wire/icrc.h"
#include "wire/packet.h"

namespace rocelab::emu {
namespace {

const wire::IpAddr kVictim = wire::IpAddr::v4(10, 0, 0, 1), kPeer = wire::IpAddr::v4(10, 0, 0, 2);
constexpr uint32_t kPeerQpn = 0x123;

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    peer_ = fabric_.attach(kPeer);
    DeviceConfig cfg;
    cfg.helper_thread = false;
    auto dev = Device::create(fabric_.attach(kVictim), cfg);
    ASSERT_TRUE(dev.ok());
    dev_ = std::move(*dev);
    pd_ = *dev_->alloc_pd();
    cq_ = *dev_->create_cq(64, nullptr, 0);
    QpInitAttr ia;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = QpType::kRC;
    ia.cap = {8, 8, 1, 1, 0};
    qp_ = *dev_->create_qp(pd_, ia);
    ConnectOptions o;
    ASSERT_FALSE(qp_to_init(*qp_, o));
    ASSERT_FALSE(qp_to_rtr(*qp_, kPeer.gid(), kPeerQpn, 0, o));
    ASSERT_FALSE(qp_to_rts(*qp_, 0, o));
  }

  // Sends one request from the peer's address with a correct ICRC, lets the
  // victim process it, and returns what the victim sent back.
  std::vector<wire::RoceHeaders> send(wire::RoceHeaders h, size_t payload_len, std::byte fill) {
    h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
    std::vector<std::byte> payload(payload_len, fill);
    std::vector<std::byte> buf(wire::kMaxRoceLen);
    auto n = wire::encode_roce(buf, h, payload);
    EXPECT_TRUE(n.ok());
    buf.resize(*n);
    Datagram d;
    d.ip.src = kPeer;
    d.ip.dst = kVictim;
    const uint32_t icrc = wire::roce_icrc(d.ip, buf);
    for (int i = 0; i < 4; ++i) buf[buf.size() - 4 + i] = std::byte(static_cast<uint8_t>(icrc >> (8 * i)));
    d.payload = buf;
    peer_->send(std::span<const Datagram>(&d, 1));
    std::vector<wire::RoceHeaders> replies;
    for (int i = 0; i < 8; ++i) {
      fabric_.advance(fabric_.now() + fabric_.config().latency);
      dev_->progress();
      peer_->poll([&](const Datagram& r) {
        if (auto p = wire::parse_roce(r.payload)) replies.push_back(p->hdr);
      });
    }
    return replies;
  }

  SimFabric fabric_;
  std::unique_ptr<Transport> peer_;
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
};

// A WRITE whose MR is deregistered between its FIRST and LAST packets: the
// rest must not land in the memory that is no longer registered (nor touch
// the freed MR object), and the requester gets a remote access error NAK.
TEST_F(HostileTest, WriteContinuedAfterDeregIsRemoteAccessError) {
  std::vector<std::byte> mem(4096, std::byte{0x11});
  Mr* mr = *dev_->reg_mr(pd_, mem.data(), mem.size(), 0x10000, access::kLocalWrite | access::kRemoteWrite);
  wire::RoceHeaders first;
  first.bth.opcode = 0x06;  // RC RDMA WRITE First
  first.bth.psn = wire::Psn(0);
  first.reth = {0x10000, mr->rkey(), 2048};
  EXPECT_TRUE(send(first, 1024, std::byte{0xAA}).empty());
  EXPECT_EQ(mem[0], std::byte{0xAA});
  EXPECT_EQ(mem[1023], std::byte{0xAA});

  ASSERT_FALSE(dev_->dereg_mr(mr));
  wire::RoceHeaders last;
  last.bth.opcode = 0x08;  // RC RDMA WRITE Last
  last.bth.psn = wire::Psn(1);
  last.bth.ack_req = true;
  const auto replies = send(last, 1024, std::byte{0xBB});
  for (size_t i = 1024; i < mem.size(); ++i) ASSERT_EQ(mem[i], std::byte{0x11}) << "byte " << i;
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].bth.opcode, 0x11);  // Acknowledge
  EXPECT_EQ(replies[0].aeth.syndrome, 0x62);  // NAK: remote access error
  EXPECT_EQ(replies[0].bth.psn.value(), 1u);
  EXPECT_EQ(qp_->state(), QpState::kErr);
}

}  // namespace
}  // namespace rocelab::emu
