// Encodings against bytes written out by hand from the IBTA layouts (vol. 1
// 9.2-9.3; docs/wire.md has the diagrams). Nothing here is produced by our code:
// a wrong offset, width or bit in the encoder fails these tests.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "wire/frame.h"
#include "wire/packet.h"

namespace rocelab::wire {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

std::vector<std::byte> encode(const RoceHeaders& h, std::string_view payload) {
  std::vector<std::byte> out(kMaxRoceLen);
  auto len = encode_roce(out, h, std::as_bytes(std::span(payload.data(), payload.size())));
  EXPECT_TRUE(len) << len.error().message();
  out.resize(len ? *len : 0);
  return out;
}

// Encodes, compares with the expected bytes, and parses back to the same headers.
void expect_golden(const RoceHeaders& h, std::string_view payload,
                   const std::vector<std::byte>& want) {
  const auto got = encode(h, payload);
  EXPECT_EQ(got, want);
  auto p = parse_roce(got);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->hdr.bth.opcode, h.bth.opcode);
  EXPECT_EQ(p->payload.size(), payload.size());
}

TEST(Golden, RcSendOnly) {
  RoceHeaders h;
  h.bth.opcode = op::kRcSendOnly;
  h.bth.se = true;
  h.bth.dest_qpn = Qpn(0x000012);
  h.bth.ack_req = true;
  h.bth.psn = Psn(100);
  expect_golden(h, "ABCDE",
                bytes({0x04,                    // OpCode: RC SEND Only
                       0xB0,                    // SE=1 MigReq=0 PadCnt=3 (5 bytes -> 8) TVer=0
                       0xFF, 0xFF,              // P_Key: default partition
                       0x00,                    // FECN=0 BECN=0 reserved
                       0x00, 0x00, 0x12,        // DestQP
                       0x80,                    // AckReq=1, reserved
                       0x00, 0x00, 0x64,        // PSN 100
                       'A', 'B', 'C', 'D', 'E',  // payload
                       0x00, 0x00, 0x00,        // pad
                       0x00, 0x00, 0x00, 0x00}));  // ICRC slot (filled by build_frame)
}

TEST(Golden, RcRdmaWriteFirstWithReth) {
  RoceHeaders h;
  h.bth.opcode = op::kRcWriteFirst;
  h.bth.dest_qpn = Qpn(0x000012);
  h.bth.psn = Psn(0x000065);
  h.reth = {0x00007F5A12340000ull, 0x00A1B2C3, 4096};
  expect_golden(h, "01234567",
                bytes({0x06, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x12,  // BTH: WRITE First, pad 0
                       0x00, 0x00, 0x00, 0x65,                          // AckReq=0, PSN 0x65
                       0x00, 0x00, 0x7F, 0x5A, 0x12, 0x34, 0x00, 0x00,  // RETH VA (64 bits)
                       0x00, 0xA1, 0xB2, 0xC3,                          // RETH R_Key
                       0x00, 0x00, 0x10, 0x00,                          // RETH DMA Length 4096
                       '0', '1', '2', '3', '4', '5', '6', '7',          // payload
                       0x00, 0x00, 0x00, 0x00}));                       // ICRC slot
}

TEST(Golden, AcknowledgeAckNakRnr) {
  RoceHeaders h;
  h.bth.opcode = op::kRcAck;
  h.bth.dest_qpn = Qpn(0x000011);
  h.bth.psn = Psn(0x123456);
  const auto bth = bytes({0x11, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x00, 0x12, 0x34, 0x56});
  struct Case {
    Aeth aeth;
    std::vector<std::byte> aeth_bytes;
  } cases[] = {
      // Syndrome 0 00 11111: ACK, credit count 31; MSN 5.
      {Aeth::ack(5), bytes({0x1F, 0x00, 0x00, 0x05})},
      // Syndrome 0 11 00000: NAK, PSN sequence error; MSN 0x010203.
      {Aeth::nak(0x010203, NakCode::kPsnSeqError), bytes({0x60, 0x01, 0x02, 0x03})},
      // Syndrome 0 11 00010: NAK, remote access error.
      {Aeth::nak(7, NakCode::kRemoteAccessError), bytes({0x62, 0x00, 0x00, 0x07})},
      // Syndrome 0 01 01110: RNR NAK, timer code 14 (1.28 ms).
      {Aeth::rnr_nak(7, 14), bytes({0x2E, 0x00, 0x00, 0x07})},
  };
  for (const Case& c : cases) {
    h.aeth = c.aeth;
    auto want = bth;
    want.insert(want.end(), c.aeth_bytes.begin(), c.aeth_bytes.end());
    want.resize(want.size() + kIcrcLen);
    expect_golden(h, "", want);
  }
  EXPECT_EQ(Aeth::rnr_nak(7, 14).kind(), AckKind::kRnrNak);
  EXPECT_EQ(rnr_timer_us(14), 1280u);
}

TEST(Golden, RcCmpSwap) {
  RoceHeaders h;
  h.bth.opcode = op::kRcCmpSwap;
  h.bth.dest_qpn = Qpn(0xABCDEF);
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xFFFFFF);
  h.atomic_eth = {0x0000000000001000ull, 0x01020304, 0x1111222233334444ull, 0x5555666677778888ull};
  expect_golden(h, "",
                bytes({0x13, 0x00, 0xFF, 0xFF, 0x00, 0xAB, 0xCD, 0xEF,  // BTH: CmpSwap
                       0x80, 0xFF, 0xFF, 0xFF,                          // AckReq, PSN 2^24-1
                       0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,  // AtomicETH VA
                       0x01, 0x02, 0x03, 0x04,                          // R_Key
                       0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44,  // Swap Data
                       0x55, 0x55, 0x66, 0x66, 0x77, 0x77, 0x88, 0x88,  // Compare Data
                       0x00, 0x00, 0x00, 0x00}));                       // ICRC slot
}

TEST(Golden, UdSendOnlyWithImmediate) {
  RoceHeaders h;
  h.bth.opcode = op::kUdSendOnlyImm;
  h.bth.dest_qpn = Qpn(1);  // the GSI QP
  h.bth.psn = Psn(7);
  h.deth = {kGsiQkey, Qpn(0x000031)};
  h.immdt = {0xDEADBEEF};
  expect_golden(h, "xyz",
                bytes({0x65,                    // UD SEND Only with Immediate
                       0x10,                    // PadCnt=1 (3 bytes -> 4)
                       0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07,
                       0x80, 0x01, 0x00, 0x00,  // DETH Q_Key: the well-known GSI Q_Key
                       0x00,                    // reserved
                       0x00, 0x00, 0x31,        // SrcQP
                       0xDE, 0xAD, 0xBE, 0xEF,  // ImmDt
                       'x', 'y', 'z', 0x00,     // payload, pad
                       0x00, 0x00, 0x00, 0x00}));
}

// A whole frame: the IPv4 header checksum and the ICRC below were computed with
// Python's zlib.crc32 over the masked bytes as docs/wire.md describes, not by us.
TEST(Golden, WholeFrameRcSendOnlyIpv4) {
  RoceHeaders h;
  h.bth.opcode = op::kRcSendOnly;
  h.bth.se = true;
  h.bth.dest_qpn = Qpn(0x000012);
  h.bth.ack_req = true;
  h.bth.psn = Psn(100);
  IpUdpInfo ip;
  ip.src = IpAddr::v4(192, 0, 2, 1);
  ip.dst = IpAddr::v4(192, 0, 2, 2);
  ip.sport = 49152;
  std::vector<std::byte> out(kMaxFrameLen);
  const std::string_view payload = "ABCDE";
  auto len = build_frame(out, ip, h, std::as_bytes(std::span(payload.data(), payload.size())),
                         /*with_ethernet=*/false);
  ASSERT_TRUE(len);
  out.resize(*len);
  EXPECT_EQ(out, bytes({
      0x45, 0x00, 0x00, 0x34,  // IPv4, IHL 5; TOS 0; total length 52
      0x00, 0x00, 0x40, 0x00,  // ID 0; DF, fragment offset 0
      0x40, 0x11, 0xB6, 0xB5,  // TTL 64; UDP; header checksum
      0xC0, 0x00, 0x02, 0x01,  // 192.0.2.1
      0xC0, 0x00, 0x02, 0x02,  // 192.0.2.2
      0xC0, 0x00, 0x12, 0xB7,  // UDP 49152 -> 4791
      0x00, 0x20, 0x00, 0x00,  // UDP length 32; checksum 0
      0x04, 0xB0, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x12, 0x80, 0x00, 0x00, 0x64,  // BTH
      'A', 'B', 'C', 'D', 'E', 0x00, 0x00, 0x00,  // payload, pad
      0xA1, 0xC2, 0x07, 0xD4,  // ICRC 0xd407c2a1, stored little-endian
  }));
  auto d = decode_frame(static_cast<int>(LinkType::kRaw), out);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->roce.icrc, 0xD407C2A1u);
  EXPECT_TRUE(d->icrc_ok());
}

}  // namespace
}  // namespace rocelab::wire
