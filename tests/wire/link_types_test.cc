// The same RoCEv2 packet behind every link type decode_frame understands,
// written with libpcap (pcap_open_dead + pcap_dump, through PcapWriter) and read
// back with PcapReader: Ethernet (plain, 802.1Q, QinQ, trailing padding), raw
// IP, Linux cooked SLL and SLL2 (`tcpdump -i any`), over IPv4 and IPv6.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "capture/pcap_reader.h"
#include "capture/pcap_writer.h"
#include "wire/byte_order.h"
#include "wire/frame.h"

namespace rocelab::wire {
namespace {

using capture::PcapReader;
using capture::PcapWriter;

using namespace std::chrono_literals;

// IP + UDP + RC RDMA WRITE Only, 11 bytes of payload.
std::vector<std::byte> ip_packet(bool v6) {
  RoceHeaders h;
  h.bth.opcode = op::kRcWriteOnly;
  h.bth.dest_qpn = Qpn(0xC0FFEE);
  h.bth.psn = Psn(0x800001);
  h.bth.ack_req = true;
  h.reth = {0x1000, 0x2222, 11};
  IpUdpInfo ip;
  ip.src = v6 ? *IpAddr::parse("2001:db8::1") : IpAddr::v4(127, 0, 0, 1);
  ip.dst = v6 ? *IpAddr::parse("2001:db8::2") : IpAddr::v4(127, 0, 0, 2);
  ip.flow_label = 0x12345;
  ip.tclass = 0x02;  // ECT(0): masked in the ICRC, so any value must still check
  std::vector<std::byte> payload(11, std::byte{0x3C});
  std::vector<std::byte> out(kMaxFrameLen);
  auto len = build_frame(out, ip, h, payload, /*with_ethernet=*/false);
  EXPECT_TRUE(len);
  out.resize(*len);
  return out;
}

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::byte> be16s(std::initializer_list<uint16_t> v) {
  std::vector<std::byte> out(v.size() * 2);
  size_t i = 0;
  for (uint16_t x : v) store_be16(out.data() + 2 * i++, x);
  return out;
}

struct Case {
  std::string name;
  int dlt;
  bool v6;
  std::vector<std::byte> link_header;
  size_t trailer = 0;  // Ethernet padding / FCS bytes after the IP packet
};

std::vector<Case> cases() {
  const auto macs = be16s({0x0200, 0x0000, 0x0002, 0x0200, 0x0000, 0x0001});
  std::vector<Case> c;
  for (bool v6 : {false, true}) {
    const uint16_t et = v6 ? kEtherTypeIpv6 : kEtherTypeIpv4;
    const std::string ipv = v6 ? "IPv6" : "IPv4";
    c.push_back({"Ethernet " + ipv, 1, v6, concat(macs, be16s({et}))});
    c.push_back({"Ethernet 802.1Q " + ipv, 1, v6, concat(macs, be16s({0x8100, 0x0064, et}))});
    c.push_back({"Ethernet QinQ " + ipv, 1, v6,
                 concat(macs, be16s({0x88A8, 0x0005, 0x8100, 0x0064, et}))});
    c.push_back({"Ethernet with trailer " + ipv, 1, v6, concat(macs, be16s({et})), 4});
    c.push_back({"raw IP " + ipv, 12, v6, {}});
    c.push_back({std::string("DLT_IPV") + (v6 ? "6" : "4"), v6 ? 229 : 228, v6, {}});
    // SLL: packet type, ARPHRD_LOOPBACK, address length, address (8), protocol.
    c.push_back({"Linux SLL " + ipv, 113, v6,
                 be16s({0x0000, 0x0304, 0x0006, 0x0000, 0x0000, 0x0000, 0x0000, et})});
    // SLL2: protocol, reserved, ifindex (4), ARPHRD_LOOPBACK, packet type | addr len, address (8).
    c.push_back({"Linux SLL2 " + ipv, 276, v6,
                 be16s({et, 0x0000, 0x0000, 0x0001, 0x0304, 0x0006, 0, 0, 0, 0})});
  }
  return c;
}

TEST(LinkTypes, EveryLinkTypeDecodesThroughAFile) {
  const std::string path =
      ::testing::TempDir() + "rocelab_link_" + std::to_string(::getpid()) + ".pcap";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto ip = ip_packet(c.v6);
    auto frame = concat(c.link_header, ip);
    frame.resize(frame.size() + c.trailer, std::byte{0xEE});
    {
      auto w = PcapWriter::open(path, {.link_type = c.dlt});
      ASSERT_TRUE(w);
      ASSERT_FALSE(w->write(1s, frame));
      ASSERT_FALSE(w->close());
    }
    auto r = PcapReader::open(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->link_type(), c.dlt);
    auto f = r->next();
    ASSERT_TRUE(f && f->has_value());
    auto d = decode_frame(r->link_type(), (*f)->data);
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_TRUE(d->icrc_ok());
    EXPECT_EQ(d->ip.info.src.v6, c.v6);
    EXPECT_EQ(d->roce.hdr.bth.opcode, op::kRcWriteOnly);
    EXPECT_EQ(d->roce.hdr.bth.dest_qpn, Qpn(0xC0FFEE));
    EXPECT_EQ(d->roce.hdr.bth.psn, Psn(0x800001));
    EXPECT_EQ(d->roce.hdr.reth.dma_len, 11u);
    EXPECT_EQ(d->roce.payload.size(), 11u);
    if (c.v6) {
      EXPECT_EQ(d->ip.info.flow_label, 0x12345u);
    }
  }
  ::unlink(path.c_str());
}

// Frames that are not RoCEv2 are told apart from broken RoCEv2 frames.
TEST(LinkTypes, NonRoceFramesAreNotRoce) {
  const auto macs = be16s({0x0200, 0x0000, 0x0002, 0x0200, 0x0000, 0x0001});
  auto arp = concat(macs, be16s({0x0806, 0x0001, 0x0800}));
  EXPECT_EQ(decode_frame(1, arp).error(), make_error_code(WireErrc::kNotRoce));
  auto ip = ip_packet(false);
  ip[9] = std::byte{6};  // TCP
  EXPECT_EQ(decode_frame(12, ip).error(), make_error_code(WireErrc::kNotRoce));
  // A TCP packet snapped by the capture is still just not RoCE.
  EXPECT_EQ(decode_frame(12, std::span(ip).first(30)).error(), make_error_code(WireErrc::kNotRoce));
  EXPECT_EQ(decode_frame(197, ip).error(), make_error_code(WireErrc::kUnsupportedLinkType));
  EXPECT_FALSE(link_type_supported(197));  // ERF
  EXPECT_TRUE(link_type_supported(276));
}

}  // namespace
}  // namespace rocelab::wire
