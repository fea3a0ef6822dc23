// The receive path accepts every IPv4 Identification: a UD SEND
// whose ICRC was computed for ID 0x35c5, as the kernel's Soft-RoCE numbers its
// packets, sent from a plain UDP socket (a UDP receiver never sees the ID),
// is delivered; the ID is recovered from the ICRC, counted, and written in the
// GRH the receiver gets. The same packet damaged is dropped.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"
#include "wire/byte_order.h"
#include "wire/frame.h"

namespace rocelab::emu::test {
namespace {

TEST(IcrcId, AnyIpv4IdentificationIsAcceptedOverRealUdp) {
  Env env(Net::kUdp);
  std::vector<std::string> warnings;
  env.set_warn([&](const std::string& l) { warnings.push_back(l); });
  Node b = env.make_node(2, QpType::kUD, 4096, access::kLocalWrite);
  ASSERT_TRUE(b.qp);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qkey = 0x11111111;
  ASSERT_FALSE(b.qp->modify(a, qp_attr::kState | qp_attr::kPkeyIndex | qp_attr::kPort | qp_attr::kQkey));
  a.qp_state = QpState::kRtr;
  ASSERT_FALSE(b.qp->modify(a, qp_attr::kState));
  a.qp_state = QpState::kRts;
  ASSERT_FALSE(b.qp->modify(a, qp_attr::kState | qp_attr::kSqPsn));
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 1000, b.mr->lkey(), 7));

  // A sender outside the engine: a plain UDP socket on 127.0.0.1.
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
  socklen_t mlen = sizeof me;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&me), &mlen), 0);

  wire::IpUdpInfo ip;
  ip.src = wire::IpAddr::v4(127, 0, 0, 1);
  ip.dst = b.dev->address();
  ip.sport = ntohs(me.sin_port);
  ip.ip_id = 0x35c5;  // as in the Soft-RoCE captures
  ip.df = true;
  wire::RoceHeaders h;
  h.bth.opcode = 0x64;  // UD SEND Only
  h.bth.dest_qpn = wire::Qpn(b.qp->qp_num());
  h.bth.psn = wire::Psn(5);
  h.deth = {0x11111111, wire::Qpn(0x77)};
  std::vector<std::byte> payload(200);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(static_cast<uint8_t>(i * 3 + 1));
  std::vector<std::byte> frame(wire::kMaxFrameLen);
  auto len = wire::build_frame(frame, ip, h, payload, /*with_ethernet=*/false);
  ASSERT_TRUE(len);
  frame.resize(*len);
  const size_t hdr = wire::kIpv4HeaderLen + wire::kUdpHeaderLen;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  std::memcpy(&to.sin_addr, ip.dst.b.data(), 4);
  auto send = [&](const std::vector<std::byte>& f) {
    ASSERT_EQ(::sendto(s, f.data() + hdr, f.size() - hdr, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(f.size() - hdr));
  };
  send(frame);
  auto wcs = env.wait_wcs(b.rcq, 1, {b.dev.get()});
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 240u);
  EXPECT_EQ(wcs[0].src_qp, 0x77u);
  EXPECT_EQ(std::memcmp(b.buf.data() + 40, payload.data(), payload.size()), 0);
  EXPECT_EQ(wire::load_be16(b.buf.data() + 20 + 4), 0x35c5);  // the GRH's IPv4 header: the sender's ID
  EXPECT_EQ(b.dev->counters().icrc_ip_recovered, 1u);
  EXPECT_EQ(b.dev->counters().rcvd_icrc_err, 0u);

  // Damaged: one payload bit. Dropped and counted; the posted receive stays.
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 1000, b.mr->lkey(), 8));
  frame[hdr + 40] ^= std::byte{0x10};
  send(frame);
  for (int i = 0; i < 20000 && b.dev->counters().rcvd_icrc_err == 0; ++i) env.step({b.dev.get()});
  EXPECT_EQ(b.dev->counters().rcvd_icrc_err, 1u);
  EXPECT_EQ(b.dev->counters().icrc_ip_recovered, 1u);
  Wc wc;
  EXPECT_EQ(b.rcq->poll(std::span<Wc>(&wc, 1)), 0);
  // The drop was told, naming the peer and the likely cause.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("rocelab0: dropped a packet from 127.0.0.1 (UD SEND Only to QP 0x", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find("): bad ICRC — the packet was damaged"), std::string::npos) << warnings[0];
  // Rate-limited: three lines per reason, then one saying the rest are only counted.
  for (int i = 0; i < 4; ++i) send(frame);
  for (int i = 0; i < 20000 && b.dev->counters().rcvd_icrc_err < 5; ++i) env.step({b.dev.get()});
  EXPECT_EQ(b.dev->counters().rcvd_icrc_err, 5u);
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_NE(warnings[3].find("further drops (bad ICRC) are not shown"), std::string::npos) << warnings[3];
  ::close(s);
}

}  // namespace
}  // namespace rocelab::emu::test
