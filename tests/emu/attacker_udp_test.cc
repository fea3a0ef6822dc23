// An attacker on real UDP: a victim device on a
// UdpTransport (127.0.0.x, its helper thread running as under `rocelab run`),
// and an attacker socket on another loopback address — the address the
// victim's QP is connected to — sending RoCEv2 requests built with src/wire's
// encoder. Each refused request gets the NAK the IBTA prescribes (C9-88 ff:
// remote access error for R_Key, range and MR access faults; invalid request
// for a misaligned atomic), the QP goes to ERR, and the victim's memory is
// byte for byte what it was.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <memory>
#include <optional>
#include <vector>

#include "emu/connect.h"
#include "emu/device.h"
#include "emu/transport/udp_transport.h"
#include "wire/icrc.h"
#include "wire/packet.h"

namespace rocelab::emu {
namespace {

namespace asio = boost::asio;
constexpr uint32_t kPeerQpn = 0x456;
constexpr size_t kGuard = 64, kLen = 4096;
enum Region { kRw, kRo, kWo, kStale, kNumRegions };

class AttackerUdpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rx = allocate_loopback_address(150);
    ASSERT_TRUE(rx.ok());
    auto t = UdpTransport::open(std::move(*rx));
    ASSERT_TRUE(t.ok());
    victim_addr_ = (*t)->local_address();
    DeviceConfig cfg;
    cfg.helper_thread = true;
    auto dev = Device::create(std::move(*t), cfg);
    ASSERT_TRUE(dev.ok());
    dev_ = std::move(*dev);
    // The attacker: UDP port 4791 on another loopback address, through Asio.
    auto arx = allocate_loopback_address(150);
    ASSERT_TRUE(arx.ok());
    attacker_addr_ = arx->address();
    sock_.assign(asio::ip::udp::v4(), arx->release());

    pd_ = *dev_->alloc_pd();
    cq_ = *dev_->create_cq(64, nullptr, 0);
    mem_.resize(kGuard + kNumRegions * (kLen + kGuard));
    for (size_t i = 0; i < mem_.size(); ++i) mem_[i] = std::byte(static_cast<uint8_t>(i * 37 + 1));
    using namespace access;
    mrs_[kRw] = *dev_->reg_mr(pd_, region(kRw), kLen, 0x10000,
                              kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic);
    mrs_[kRo] = *dev_->reg_mr(pd_, region(kRo), kLen, 0x20000, kRemoteRead);
    mrs_[kWo] = *dev_->reg_mr(pd_, region(kWo), kLen, 0x30000, kLocalWrite | kRemoteWrite);
    mrs_[kStale] = *dev_->reg_mr(pd_, region(kStale), kLen, 0x40000, kLocalWrite | kRemoteWrite);
    for (int r = 0; r < kNumRegions; ++r) rkey_[r] = mrs_[r]->rkey();
    ASSERT_FALSE(dev_->dereg_mr(mrs_[kStale]));
    before_ = mem_;

    QpInitAttr ia;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = QpType::kRC;
    ia.cap = {8, 8, 1, 1, 0};
    qp_ = *dev_->create_qp(pd_, ia);
    ConnectOptions o;
    ASSERT_FALSE(qp_to_init(*qp_, o));
    ASSERT_FALSE(qp_to_rtr(*qp_, attacker_addr_.gid(), kPeerQpn, 0, o));
    ASSERT_FALSE(qp_to_rts(*qp_, 0, o));
  }

  std::byte* region(int r) { return mem_.data() + kGuard + static_cast<size_t>(r) * (kLen + kGuard); }

  // Sends one request (PSN 0, AckReq) from the attacker's address with a
  // correct ICRC; returns the victim's reply, if one comes within 2 s.
  std::optional<wire::RoceHeaders> exchange(wire::RoceHeaders h, size_t payload_len) {
    h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
    h.bth.psn = wire::Psn(0);
    h.bth.ack_req = true;
    send_raw(h, payload_len);
    return reply_on(sock_, 2000);
  }

  // Sends one packet (correct ICRC) from `from` (default: the attacker's
  // socket, the address the QP is connected to) and does not wait.
  void send_raw(wire::RoceHeaders h, size_t payload_len, asio::ip::udp::socket* from = nullptr,
                const wire::IpAddr* from_addr = nullptr) {
    std::vector<std::byte> payload(payload_len, std::byte{0xEE});
    std::vector<std::byte> buf(wire::kMaxRoceLen);
    auto n = wire::encode_roce(buf, h, payload);
    ASSERT_TRUE(n.ok());
    buf.resize(*n);
    wire::IpUdpInfo ip;
    ip.src = from_addr ? *from_addr : attacker_addr_;
    ip.dst = victim_addr_;
    ip.sport = wire::kRoceV2Port;
    std::array<std::byte, wire::kIpv4HeaderLen + wire::kUdpHeaderLen> hdr{};
    wire::write_ip_udp(hdr.data(), ip, buf.size());
    wire::IcrcAccumulator acc(hdr.data(), wire::kIpv4HeaderLen, buf.data());
    acc.add(std::span<const std::byte>(buf).subspan(wire::kBthLen, buf.size() - wire::kBthLen - wire::kIcrcLen));
    for (int i = 0; i < 4; ++i) buf[buf.size() - 4 + i] = std::byte(static_cast<uint8_t>(acc.value() >> (8 * i)));
    const asio::ip::udp::endpoint to(asio::ip::make_address_v4(victim_addr_.v4_u32()), wire::kRoceV2Port);
    (from ? *from : sock_).send_to(asio::buffer(buf.data(), buf.size()), to);
  }

  // The victim's reply on `sock` within ms, if any.
  std::optional<wire::RoceHeaders> reply_on(asio::ip::udp::socket& sock, int ms) {
    pollfd p{sock.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return std::nullopt;
    std::array<std::byte, 2048> in{};
    asio::ip::udp::endpoint from;
    const size_t got = sock.receive_from(asio::buffer(in.data(), in.size()), from);
    auto pkt = wire::parse_roce(std::span<const std::byte>(in.data(), got));
    if (!pkt) return std::nullopt;
    return pkt->hdr;
  }

  // Polls until the device counter `c` has grown past `was` (at most 2 s).
  bool counted(uint64_t Counters::*c, uint64_t was) {
    for (int i = 0; i < 400; ++i) {
      if (dev_->counters().*c > was) return true;
      ::usleep(5000);
    }
    return false;
  }

  // The transfer goes on: a valid WRITE at `psn` lands and is ACKed, the QP in RTS.
  void expect_transfer_unaffected(uint32_t psn) {
    wire::RoceHeaders h = rdma(kWriteOnly, rkey_[kRw], 0x10000 + 8, 16);
    h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
    h.bth.psn = wire::Psn(psn);
    h.bth.ack_req = true;
    send_raw(h, 16);
    auto reply = reply_on(sock_, 2000);
    ASSERT_TRUE(reply.has_value()) << "the valid WRITE after the attack got no reply";
    EXPECT_EQ(reply->aeth.syndrome & 0x60, 0) << "not an ACK: syndrome " << int(reply->aeth.syndrome);
    EXPECT_EQ(reply->bth.psn.value(), psn);
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(region(kRw)[8 + i], std::byte{0xEE});
    EXPECT_EQ(qp_->state(), QpState::kRts);
  }

  // The whole memory, guards and all, as it was.
  void expect_memory_untouched() {
    for (size_t i = 0; i < mem_.size(); ++i) ASSERT_EQ(mem_[i], before_[i]) << "byte " << i << " changed";
  }

  // A refused request: NAK `syndrome` for PSN 0, QP in ERR, memory untouched.
  void expect_refused(const wire::RoceHeaders& h, size_t payload_len, uint8_t syndrome) {
    const uint64_t rcvd = dev_->counters().rcvd_pkts;
    auto reply = exchange(h, payload_len);
    ASSERT_TRUE(reply.has_value()) << "no reply from the victim";
    EXPECT_EQ(reply->bth.opcode, 0x11);  // Acknowledge, carrying the NAK
    EXPECT_EQ(reply->aeth.syndrome, syndrome);
    EXPECT_EQ(reply->bth.psn.value(), 0u);
    EXPECT_EQ(dev_->counters().rcvd_pkts, rcvd + 1);
    EXPECT_EQ(qp_->state(), QpState::kErr);
    for (size_t i = 0; i < mem_.size(); ++i) ASSERT_EQ(mem_[i], before_[i]) << "byte " << i << " changed";
  }

  static wire::RoceHeaders rdma(uint8_t opcode, uint32_t rkey, uint64_t va, uint32_t len) {
    wire::RoceHeaders h;
    h.bth.opcode = opcode;
    h.reth = {va, rkey, len};
    h.atomic_eth = {va, rkey, 1, 0};
    return h;
  }

  static constexpr uint8_t kWriteOnly = 0x0A, kReadRequest = 0x0C, kFetchAdd = 0x14;
  static constexpr uint8_t kNakInvalidRequest = 0x61, kNakRemoteAccess = 0x62;

  asio::io_context io_;
  asio::ip::udp::socket sock_{io_};
  wire::IpAddr victim_addr_, attacker_addr_;
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  std::vector<std::byte> mem_, before_;
  std::array<Mr*, kNumRegions> mrs_{};
  std::array<uint32_t, kNumRegions> rkey_{};
};

TEST_F(AttackerUdpTest, ValidWriteLands) {  // the control: the attack path works
  auto reply = exchange(rdma(kWriteOnly, rkey_[kRw], 0x10000 + 8, 16), 16);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->aeth.syndrome & 0x60, 0);  // an ACK
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(region(kRw)[8 + i], std::byte{0xEE});
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(AttackerUdpTest, GuessedRkey) {
  expect_refused(rdma(kWriteOnly, rkey_[kRw] ^ 0x100, 0x10000, 16), 16, kNakRemoteAccess);
}

TEST_F(AttackerUdpTest, StaleRkey) {
  expect_refused(rdma(kWriteOnly, rkey_[kStale], 0x40000, 16), 16, kNakRemoteAccess);
}

TEST_F(AttackerUdpTest, RangeWrappingPast2To64) {
  expect_refused(rdma(kWriteOnly, rkey_[kRw], ~uint64_t{0} - 7, 16), 16, kNakRemoteAccess);
}

TEST_F(AttackerUdpTest, LengthBeyondTheMr) {
  expect_refused(rdma(kWriteOnly, rkey_[kRw], 0x10000 + kLen - 8, 16), 16, kNakRemoteAccess);
}

TEST_F(AttackerUdpTest, WriteWithoutRemoteWrite) {
  expect_refused(rdma(kWriteOnly, rkey_[kRo], 0x20000, 16), 16, kNakRemoteAccess);
}

TEST_F(AttackerUdpTest, ReadWithoutRemoteRead) {
  expect_refused(rdma(kReadRequest, rkey_[kWo], 0x30000, 64), 0, kNakRemoteAccess);
}

TEST_F(AttackerUdpTest, MisalignedAtomic) {
  expect_refused(rdma(kFetchAdd, rkey_[kRw], 0x10000 + 4, 8), 0, kNakInvalidRequest);
}

TEST_F(AttackerUdpTest, AtomicOutOfRange) {
  expect_refused(rdma(kFetchAdd, rkey_[kRw], 0x10000 + kLen, 8), 0, kNakRemoteAccess);
}

// Packets the victim must drop (or answer without acting on them), count, and
// forget: the connected QP's transfer goes on afterwards.

TEST_F(AttackerUdpTest, AnotherSourceAddressIsDroppedAndCounted) {
  // A third host (another 127.0.0.x) sends a valid-looking WRITE to the QP.
  auto rx = allocate_loopback_address(150);
  ASSERT_TRUE(rx.ok());
  const wire::IpAddr intruder = rx->address();
  asio::ip::udp::socket other(io_);
  other.assign(asio::ip::udp::v4(), rx->release());
  wire::RoceHeaders h = rdma(kWriteOnly, rkey_[kRw], 0x10000 + 8, 16);
  h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
  h.bth.ack_req = true;
  const uint64_t was = dev_->counters().rcvd_hdr_err;
  send_raw(h, 16, &other, &intruder);
  EXPECT_TRUE(counted(&Counters::rcvd_hdr_err, was)) << "the drop is not counted";
  EXPECT_EQ(dev_->counters().dropped("source address"), 1u) << "counted under another cause";
  EXPECT_FALSE(reply_on(other, 200).has_value()) << "the intruder got an answer";
  expect_memory_untouched();
  expect_transfer_unaffected(0);
}

TEST_F(AttackerUdpTest, AnotherPkeyIsDroppedAndCounted) {
  wire::RoceHeaders h = rdma(kWriteOnly, rkey_[kRw], 0x10000 + 8, 16);
  h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
  h.bth.ack_req = true;
  h.bth.pkey = 0x7FFF;  // the limited-member default partition: not ours
  const uint64_t was = dev_->counters().rcvd_hdr_err;
  send_raw(h, 16);
  EXPECT_TRUE(counted(&Counters::rcvd_hdr_err, was));
  EXPECT_EQ(dev_->counters().dropped("P_Key"), 1u) << "counted under another cause";
  EXPECT_FALSE(reply_on(sock_, 200).has_value());
  expect_memory_untouched();
  expect_transfer_unaffected(0);
}

TEST_F(AttackerUdpTest, PsnsFarOutsideTheWindowChangeNothing) {
  // Far ahead: an out-of-sequence request, answered at most by a PSN-sequence
  // NAK naming PSN 0 (the one expected). Far behind: a duplicate (PSNs are
  // compared modulo 2^24, half the space behind), answered at most by an ACK
  // of PSN 0xFFFFFF, the last one done — nothing new is acknowledged.
  const uint64_t was = dev_->counters().out_of_seq_request + dev_->counters().duplicate_request;
  for (uint32_t psn : {0x400000u, 0x900000u, 0xFFFF00u}) {
    wire::RoceHeaders h = rdma(kWriteOnly, rkey_[kRw], 0x10000 + 8, 16);
    h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
    h.bth.psn = wire::Psn(psn);
    h.bth.ack_req = true;
    send_raw(h, 16);
    if (auto reply = reply_on(sock_, 300)) {
      const bool ahead = wire::Psn(psn).after(wire::Psn(0));
      if (ahead) {
        EXPECT_EQ(reply->aeth.syndrome, 0x60) << "PSN " << psn << ": only a PSN-sequence NAK may answer";
        EXPECT_EQ(reply->bth.psn.value(), 0u);
      } else {
        EXPECT_EQ(reply->aeth.syndrome & 0x60, 0) << "PSN " << psn << ": a duplicate gets an ACK";
        EXPECT_EQ(reply->bth.psn.value(), 0xFFFFFFu) << "PSN " << psn << ": the ACK names the last PSN done";
      }
    }
  }
  const Counters c = dev_->counters();
  EXPECT_GT(c.out_of_seq_request + c.duplicate_request, was) << "nothing counted";
  expect_memory_untouched();
  expect_transfer_unaffected(0);
}

TEST_F(AttackerUdpTest, UdWithAnotherQkeyIsDroppedAndCounted) {
  QpInitAttr ia;
  ia.send_cq = cq_;
  ia.recv_cq = cq_;
  ia.qp_type = QpType::kUD;
  ia.cap = {8, 8, 1, 1, 0};
  Qp* ud = *dev_->create_qp(pd_, ia);
  ConnectOptions o;  // Q_Key 0x11111111
  ASSERT_FALSE(qp_to_init(*ud, o));
  ASSERT_FALSE(qp_to_rtr(*ud, {}, 0, 0, o));
  ASSERT_FALSE(qp_to_rts(*ud, 0, o));
  Sge sge{0x10000 + 1024, 1024, mrs_[kRw]->lkey()};
  RecvWr r;
  r.wr_id = 77;
  r.sg_list = std::span<const Sge>(&sge, 1);
  size_t n = 0;
  ASSERT_FALSE(ud->post_recv(std::span<const RecvWr>(&r, 1), &n));
  auto datagram = [&](uint32_t qkey) {
    wire::RoceHeaders h;
    h.bth.opcode = 0x64;  // UD SEND Only
    h.bth.dest_qpn = wire::Qpn(ud->qp_num());
    h.deth = {qkey, wire::Qpn(0x222)};
    send_raw(h, 32);
  };
  const uint64_t was = dev_->counters().qkey_viol;
  datagram(0x22222222);
  EXPECT_TRUE(counted(&Counters::qkey_viol, was)) << "the wrong Q_Key is not counted";
  EXPECT_EQ(dev_->counters().dropped("Q_Key"), 1u) << "counted under another cause";
  Wc wc;
  ::usleep(50000);
  EXPECT_EQ(cq_->poll(std::span<Wc>(&wc, 1)), 0) << "the receive was consumed by a wrong Q_Key";
  expect_memory_untouched();
  datagram(0x11111111);  // the right one is delivered to the receive still posted
  int got = 0;
  for (int i = 0; i < 400 && got == 0; ++i) {
    got = cq_->poll(std::span<Wc>(&wc, 1));
    if (got == 0) ::usleep(5000);
  }
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.byte_len, 32u + 40u);  // the payload behind the 40-byte GRH
}

TEST_F(AttackerUdpTest, AnAckForAPsnNeverSentCompletesNothing) {
  // The victim sends a SEND (PSN 0) to its peer's address, where the attacker
  // sits; the attacker answers with an ACK "for" PSN 0x100, which was never
  // sent. Such a ghost must not complete the SEND (an ACK beyond the last WQE
  // acknowledges it implicitly, so without a check a forged ACK completes
  // every outstanding SEND and WRITE); the true ACK for PSN 0 does.
  Sge sge{0x10000, 32, mrs_[kRw]->lkey()};
  SendWr wr;
  wr.wr_id = 5;
  wr.opcode = WrOpcode::kSend;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  wr.send_flags = send_flags::kSignaled;
  size_t n = 0;
  ASSERT_FALSE(qp_->post_send(std::span<const SendWr>(&wr, 1), &n));
  auto sent = reply_on(sock_, 2000);  // the SEND itself, as the attacker receives it
  ASSERT_TRUE(sent.has_value());
  ASSERT_EQ(sent->bth.psn.value(), 0u);
  auto ack = [&](uint32_t psn) {
    wire::RoceHeaders h;
    h.bth.opcode = 0x11;  // RC Acknowledge
    h.bth.dest_qpn = wire::Qpn(qp_->qp_num());
    h.bth.psn = wire::Psn(psn);
    h.aeth = wire::Aeth::ack(1);
    send_raw(h, 0);
  };
  const uint64_t was = dev_->counters().rcvd_hdr_err;
  ack(0x100);
  EXPECT_TRUE(counted(&Counters::rcvd_hdr_err, was)) << "the ghost ACK is not counted as dropped";
  EXPECT_EQ(dev_->counters().dropped("response for a PSN never sent"), 1u) << "counted under another cause";
  Wc wc;
  ::usleep(50000);
  EXPECT_EQ(cq_->poll(std::span<Wc>(&wc, 1)), 0) << "an ACK for a PSN never sent completed the SEND";
  ack(0);
  int got = 0;
  for (int i = 0; i < 400 && got == 0; ++i) {
    got = cq_->poll(std::span<Wc>(&wc, 1));
    if (got == 0) ::usleep(5000);
  }
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

}  // namespace
}  // namespace rocelab::emu

// Every reason the receive path drops a packet for has its drop_* counter
// (kDropCauses): a reason written in a drop() call but missing from the
// table would be counted nowhere but rxe's coarse counters.
TEST(DropCauses, EveryDropReasonInTheEngineHasACounter) {
  std::set<std::string> reasons;
  for (const auto& f : std::filesystem::directory_iterator(std::string(ROCELAB_SOURCE_DIR) + "/src/emu")) {
    if (f.path().extension() != ".cc") continue;
    std::ifstream in(f.path());
    ASSERT_TRUE(in) << f.path();
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::regex call(R"re(drop\([^;]*?"([^"]+)")re");
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) reasons.insert((*it)[1]);
  }
  EXPECT_GE(reasons.size(), 10u) << "the drop() calls were not found";
  for (const std::string& r : reasons) {
    bool known = false;
    for (const rocelab::emu::DropCause& c : rocelab::emu::kDropCauses) known = known || c.reason == r;
    EXPECT_TRUE(known) << "drop reason \"" << r << "\" has no drop_* counter";
  }
}
