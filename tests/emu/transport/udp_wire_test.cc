// The live wire check: frames built with wire::build_frame (IPv4 ID 0, DF) are
// sent through the UDP transport while dumpcap captures loopback; the capture,
// read with libpcap and judged by wire::decode_frame and by tshark, must show
// every packet with a good ICRC and exactly the IP/UDP fields it was built for.
// Labelled `tools`: fails (does not skip) when dumpcap/tshark are missing.
#include <unistd.h>

#include <gtest/gtest.h>

#include <sstream>

#include "capture.h"
#include "emu/transport/udp_transport.h"
#include "udp_test_util.h"
#include "wire/icrc.h"

namespace rocelab::emu {
namespace {

using test::Frame;

TEST(UdpWire, PacketsLeaveWithTheHeadersTheirIcrcWasComputedFor) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a live capture on lo with dumpcap): skipped";
  auto ra = allocate_loopback_address(20);
  auto rb = allocate_loopback_address(20);
  ASSERT_TRUE(ra && rb);
  const std::string a_str = ra->address().to_string(), b_str = rb->address().to_string();
  test::Capture cap(ROCELAB_DUMPCAP, "lo",
                    "udp port 4791 and src host " + a_str + " and dst host " + b_str);
  ASSERT_TRUE(cap.ok()) << cap.error();

  // One datagram per packet: on lo a GSO send would be one super-datagram.
  auto a = UdpTransport::open(std::move(*ra), UdpTransportConfig::wire_exact());
  auto b = UdpTransport::open(std::move(*rb));
  ASSERT_TRUE(a && b);
  auto sport = (*a)->reserve_source_port(0xC0DE);
  ASSERT_TRUE(sport);
  auto sport2 = (*a)->reserve_source_port(0xF00D);
  ASSERT_TRUE(sport2);

  const uint8_t opcodes[] = {wire::op::kRcSendOnly, wire::op::kRcWriteFirst, wire::op::kRcAck,
                             wire::op::kRcReadRequest, wire::op::kRcSendOnlyImm};
  std::vector<Frame> frames;
  for (uint32_t i = 0; i < 40; ++i) {
    wire::IpUdpInfo ip;
    ip.src = (*a)->local_address();
    ip.dst = (*b)->local_address();
    ip.sport = i % 3 == 0 ? *sport2 : *sport;
    if (i % 5 == 1) ip.tclass = 0x02;  // ECT(0): masked in the ICRC, set per message
    if (i % 7 == 2) ip.ttl = 17;
    const uint8_t op = opcodes[i % 5];
    const size_t len = wire::op_info(op).is(wire::OpClass::kPayload) ? (i * 97) % 1025 : 0;
    frames.push_back(test::make_frame(ip, op, 0x100 + i, len));
  }
  auto batch = test::datagrams(frames);
  EXPECT_EQ((*a)->send(std::span(batch).first(25)), 25u);
  EXPECT_EQ((*a)->send(std::span(batch).subspan(25)), 15u);

  // The receiver sees the fields it needs to check the ICRC itself (ID 0 assumed).
  auto got = test::receive(**b, frames.size());
  ASSERT_EQ(got.size(), frames.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& [ip, payload] = got[i];
    EXPECT_EQ(ip.sport, frames[i].ip.sport);
    EXPECT_EQ(ip.ttl, frames[i].ip.ttl);
    EXPECT_EQ(ip.tclass, frames[i].ip.tclass);
    std::vector<std::byte> pkt(wire::ip_udp_header_len(false) + payload.size());
    wire::write_ip_udp(pkt.data(), ip, payload.size());
    std::copy(payload.begin(), payload.end(), pkt.begin() + wire::ip_udp_header_len(false));
    EXPECT_EQ(wire::compute_icrc(pkt, wire::kIpv4HeaderLen), wire::load_le32(&payload[payload.size() - 4]))
        << "received datagram " << i;
  }

  cap.stop();
  int link_type = 0;
  auto packets = cap.read(link_type);
  ASSERT_EQ(packets.size(), frames.size()) << cap.error() << cap.log();
  for (size_t i = 0; i < packets.size(); ++i) {
    auto d = wire::decode_frame(link_type, packets[i].data);
    ASSERT_TRUE(d) << "captured packet " << i << ": " << d.error().message();
    const wire::IpUdpInfo& want = frames[i].ip;
    const wire::IpUdpInfo& seen = d->ip.info;
    EXPECT_TRUE(d->icrc_ok()) << "captured packet " << i;
    EXPECT_EQ(seen.src, want.src);
    EXPECT_EQ(seen.dst, want.dst);
    EXPECT_EQ(seen.sport, want.sport);
    EXPECT_EQ(seen.dport, 4791);
    EXPECT_EQ(seen.ip_id, 0) << i;
    EXPECT_TRUE(seen.df) << i;
    EXPECT_EQ(seen.ttl, want.ttl) << i;
    EXPECT_EQ(seen.tclass, want.tclass) << i;
    auto sent = frames[i].udp_payload();
    EXPECT_TRUE(std::equal(sent.begin(), sent.end(), d->ip.udp_payload.begin(), d->ip.udp_payload.end()))
        << i;
  }

  // tshark, the wire judge, reads the same fields.
  const std::string tshark = ROCELAB_TSHARK;
  ASSERT_FALSE(tshark.empty()) << "tshark not found at configure time (`make deps` installs it)";
  std::string out = test::run_output(tshark + " -r " + cap.file() +
                                     " -T fields -E separator=, -e ip.id -e ip.flags.df -e ip.ttl"
                                     " -e udp.srcport -e infiniband.bth.psn 2>/dev/null");
  std::istringstream lines(out);
  std::string line;
  size_t n = 0;
  for (; std::getline(lines, line); ++n) {
    ASSERT_LT(n, frames.size()) << out;
    std::ostringstream want;
    want << "0x0000,1," << int(frames[n].ip.ttl) << "," << frames[n].ip.sport << "," << (0x100 + n);
    EXPECT_EQ(line, want.str());
  }
  EXPECT_EQ(n, frames.size()) << out;
}

}  // namespace
}  // namespace rocelab::emu
