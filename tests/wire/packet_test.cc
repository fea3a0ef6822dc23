// The packet codec over the whole opcode table: every opcode builds and decodes
// back to the same fields with a good ICRC.
#include <gtest/gtest.h>

#include <vector>

#include "wire/frame.h"

namespace rocelab::wire {
namespace {

// Every opcode in the table survives build -> decode with the same fields and a good ICRC.
TEST(Packet, EveryOpcodeRoundTrips) {
  int n = 0;
  for (const OpInfo& info : opcode_table()) {
    if (!info.valid) continue;
    RoceHeaders h;
    h.bth.opcode = info.code;
    h.bth.dest_qpn = Qpn(0x123456);
    h.bth.psn = Psn(0xABCDEF);
    h.bth.ack_req = true;
    h.reth = {0x1122334455667788ull, 0xAABBCCDD, 77};
    h.aeth = Aeth::nak(0x10203, NakCode::kRemoteAccessError);
    h.deth = {0x11111111, Qpn(0x42)};
    h.immdt = {0xDEADBEEF};
    std::vector<std::byte> payload(info.is(OpClass::kPayload) ? 5 : 0, std::byte{0x5A});
    IpUdpInfo ip;
    ip.src = IpAddr::v4(127, 0, 0, 1);
    ip.dst = IpAddr::v4(127, 0, 0, 2);
    std::vector<std::byte> buf(kMaxFrameLen);
    auto len = build_frame(buf, ip, h, payload);
    ASSERT_TRUE(len) << info.name;
    auto d = decode_frame(1, std::span(buf).first(*len));
    ASSERT_TRUE(d) << info.name << ": " << d.error().message();
    EXPECT_TRUE(d->icrc_ok()) << info.name;
    EXPECT_EQ(d->roce.hdr.bth.opcode, info.code);
    EXPECT_EQ(d->roce.hdr.bth.psn, h.bth.psn);
    EXPECT_EQ(d->roce.payload.size(), payload.size());
    if (info.carries(Hdr::kReth)) { EXPECT_EQ(d->roce.hdr.reth, h.reth); }
    if (info.carries(Hdr::kAeth)) { EXPECT_EQ(d->roce.hdr.aeth, h.aeth); }
    ++n;
  }
  EXPECT_EQ(n, 23 + 12 + 2 + 23 + 1);  // RC, UC, UD, XRC, CNP
}

}  // namespace
}  // namespace rocelab::wire
