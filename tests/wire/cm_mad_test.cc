// CM MADs (src/wire/mad.h, cm_mad.h, cma_hdr.h, gsi.h): round trips of every
// attribute, golden bytes written by hand from IBTA Vol 1 ch. 12 (Table 99 ff.)
// and 13.4.2, range checks on encode, and malformed input on decode: every
// truncation and random garbage give an error or a value, never a crash.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "wire/cm_mad.h"
#include "wire/cma_hdr.h"
#include "wire/gsi.h"
#include "wire/mad.h"

namespace rocelab::wire {
namespace {

template <size_t N>
std::array<uint8_t, N> pattern(uint8_t seed) {
  std::array<uint8_t, N> a;
  for (size_t i = 0; i < N; ++i) a[i] = static_cast<uint8_t>(seed + i * 7);
  return a;
}

Gid gid_v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return IpAddr::v4(a, b, c, d).gid(); }

// Every field set to a value that is not its default, widths at their maximum
// where a wrong mask or shift would show.
CmReq sample_req() {
  CmReq m;
  m.local_comm_id = 0x11223344;
  m.service_id = rdma_cm_service_id(rdma_ps::kTcp, 7174);
  m.local_ca_guid = 0x0202C9FFFE0A0B0Cull;
  m.local_qkey = 0xA5A5A5A5;
  m.local_qpn = Qpn(0xABCDEF);
  m.responder_resources = 16;
  m.local_eecn = 0x123456;
  m.initiator_depth = 15;
  m.remote_eecn = 0xFEDCBA;
  m.remote_cm_response_timeout = 20;
  m.transport = CmTransport::kUc;
  m.end_to_end_flow_control = true;
  m.starting_psn = Psn(0x89BB0E);
  m.local_cm_response_timeout = 31;
  m.retry_count = 7;
  m.pkey = 0x8001;
  m.path_mtu = 3;
  m.rdc_exists = true;
  m.rnr_retry_count = 6;
  m.max_cm_retries = 15;
  m.srq = true;
  m.extended_transport = 1;
  m.primary.local_gid = gid_v4(192, 0, 2, 1);
  m.primary.remote_gid = gid_v4(192, 0, 2, 2);
  m.primary.flow_label = 0xFFFFF;
  m.primary.packet_rate = 0x3F;
  m.primary.traffic_class = 0x68;
  m.primary.hop_limit = 64;
  m.primary.sl = 0xF;
  m.primary.subnet_local = true;
  m.primary.local_ack_timeout = 18;
  m.alternate.local_lid = 0x1234;
  m.alternate.remote_lid = 0x5678;
  m.alternate.local_gid = pattern<16>(1);
  m.alternate.remote_gid = pattern<16>(2);
  m.alternate.flow_label = 0x54321;
  m.alternate.packet_rate = 9;
  m.alternate.sl = 3;
  m.alternate.local_ack_timeout = 1;
  m.private_data = pattern<92>(3);
  return m;
}

std::vector<CmMessage> samples() {
  CmMra mra{0x01020304, 0x05060708, CmMsgRef::kRep, 31, pattern<222>(4)};
  CmRej rej{0x0A0B0C0D, 0x0E0F1011, CmMsgRef::kOther, 127, rej_reason::kConsumerReject,
            pattern<72>(5), pattern<148>(6)};
  CmRep rep;
  rep.local_comm_id = 0x21222324;
  rep.remote_comm_id = 0x11223344;
  rep.local_qkey = 0x01010101;
  rep.local_qpn = Qpn(0x000011);
  rep.local_eecn = 0xFFFFFF;
  rep.starting_psn = Psn(0xC23298);
  rep.responder_resources = 1;
  rep.initiator_depth = 255;
  rep.target_ack_delay = 31;
  rep.failover_accepted = 3;
  rep.end_to_end_flow_control = true;
  rep.rnr_retry_count = 7;
  rep.srq = true;
  rep.local_ca_guid = 0x0002C90300FFEE01ull;
  rep.private_data = pattern<196>(7);
  CmRtu rtu{0x31323334, 0x41424344, pattern<224>(8)};
  CmDreq dreq{0x51525354, 0x61626364, Qpn(0xFEDCBA), pattern<220>(9)};
  CmDrep drep{0x71727374, 0x81828384, pattern<224>(10)};
  CmSidrReq sreq{0x91929394, 0xFFFF, rdma_cm_service_id(rdma_ps::kUdp, 7174), pattern<216>(11)};
  CmSidrRep srep{0x91929394, sidr_status::kNoQp, 72, Qpn(0x00ABCD),
                 rdma_cm_service_id(rdma_ps::kUdp, 7174), 0x01234567, pattern<72>(12),
                 pattern<136>(13)};
  return {sample_req(), mra, rej, rep, rtu, dreq, drep, sreq, srep};
}

std::vector<std::byte> encode(const CmMad& m) {
  std::vector<std::byte> out(kMadLen);
  auto len = encode_cm_mad(out, m);
  EXPECT_TRUE(len) << len.error().message();
  return out;
}

uint8_t at(const std::vector<std::byte>& v, size_t off) { return static_cast<uint8_t>(v[off]); }

TEST(CmMad, EveryAttributeRoundTrips) {
  uint64_t tid = 0x00000002B90866ACull;
  for (const CmMessage& msg : samples()) {
    const CmMad m = make_cm_mad(tid++, msg);
    SCOPED_TRACE(std::string(short_name(attr_of(msg))));
    const auto bytes = encode(m);
    auto back = parse_cm_mad(bytes);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(back->hdr, m.hdr);
    EXPECT_EQ(back->msg, m.msg);
    EXPECT_EQ(back->hdr.attr_id, static_cast<uint16_t>(attr_of(msg)));
    // And the bytes once more: decode -> encode is the identity.
    EXPECT_EQ(encode(*back), bytes);
  }
}

// The common MAD header, byte by byte (IBTA 13.4.2).
TEST(CmMad, GoldenCommonHeader) {
  CmMad m = make_cm_mad(0x0102030405060708ull, CmRtu{});
  m.hdr.status = 0xA1B2;
  m.hdr.class_specific = 0xC3D4;
  m.hdr.attr_mod = 0xE5F60718;
  const auto b = encode(m);
  const uint8_t want[24] = {0x01,  // BaseVersion
                            0x07,  // MgmtClass: CM
                            0x02,  // ClassVersion
                            0x03,  // R=0, Method Send
                            0xA1, 0xB2, 0xC3, 0xD4,                          // Status, ClassSpecific
                            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // TID
                            0x00, 0x14,                                      // AttributeID: RTU
                            0x00, 0x00,                                      // reserved
                            0xE5, 0xF6, 0x07, 0x18};                          // AttributeModifier
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(at(b, i), want[i]) << "byte " << i;
}

// REQ's packed bytes, by hand from IBTA Table 99 (offsets in the MAD: +24).
TEST(CmMad, GoldenReqBitFields) {
  const auto b = encode(make_cm_mad(1, sample_req()));
  constexpr size_t o = kMadHeaderLen;
  // Local QPN 0xABCDEF | Responder Resources 16.
  EXPECT_EQ(at(b, o + 32), 0xAB); EXPECT_EQ(at(b, o + 33), 0xCD); EXPECT_EQ(at(b, o + 34), 0xEF);
  EXPECT_EQ(at(b, o + 35), 16);
  // Remote EECN 0xFEDCBA | Remote CM Response Timeout 20 (10100) | TST UC (01) | EEFC 1.
  EXPECT_EQ(at(b, o + 43), 0b10100'01'1);
  // Starting PSN 0x89BB0E | Local CM Response Timeout 31 (11111) | Retry Count 7 (111).
  EXPECT_EQ(at(b, o + 44), 0x89); EXPECT_EQ(at(b, o + 46), 0x0E);
  EXPECT_EQ(at(b, o + 47), 0xFF);
  // P_Key 0x8001; Path MTU 3 (0011) | RDC 1 | RNR Retry 6 (110); Max CM Retries 15 | SRQ | ExtT 1.
  EXPECT_EQ(at(b, o + 48), 0x80); EXPECT_EQ(at(b, o + 49), 0x01);
  EXPECT_EQ(at(b, o + 50), 0b0011'1'110);
  EXPECT_EQ(at(b, o + 51), 0b1111'1'001);
  // Primary LIDs 0xFFFF; local GID ::ffff:192.0.2.1 at 56.
  EXPECT_EQ(at(b, o + 52), 0xFF); EXPECT_EQ(at(b, o + 55), 0xFF);
  EXPECT_EQ(at(b, o + 66), 0xFF); EXPECT_EQ(at(b, o + 67), 0xFF); EXPECT_EQ(at(b, o + 68), 192);
  EXPECT_EQ(at(b, o + 71), 1); EXPECT_EQ(at(b, o + 87), 2);
  // Flow label 0xFFFFF (20 bits) | reserved 6 | packet rate 0x3F: FF FF F0 3F.
  EXPECT_EQ(at(b, o + 88), 0xFF); EXPECT_EQ(at(b, o + 90), 0xF0); EXPECT_EQ(at(b, o + 91), 0x3F);
  EXPECT_EQ(at(b, o + 92), 0x68); EXPECT_EQ(at(b, o + 93), 64);
  // SL 15 | Subnet Local 1 | reserved; Local ACK Timeout 18 (10010) | reserved.
  EXPECT_EQ(at(b, o + 94), 0b1111'1'000);
  EXPECT_EQ(at(b, o + 95), 0b10010'000);
  // Alternate flow label 0x54321 | rate 9: 54 32 10 09.
  EXPECT_EQ(at(b, o + 132), 0x54); EXPECT_EQ(at(b, o + 134), 0x10); EXPECT_EQ(at(b, o + 135), 9);
  // Private data at 140, to the end of the MAD.
  EXPECT_EQ(at(b, o + 140), 3); EXPECT_EQ(at(b, kMadLen - 1), static_cast<uint8_t>(3 + 91 * 7));
}

TEST(CmMad, GoldenRepRejMraBitFields) {
  const auto all = samples();
  constexpr size_t o = kMadHeaderLen;
  const auto mra = encode(make_cm_mad(1, all[1]));
  EXPECT_EQ(at(mra, o + 8), 0b01'000000);  // Message MRAed: REP
  EXPECT_EQ(at(mra, o + 9), 0b11111'000);  // Service Timeout 31
  const auto rej = encode(make_cm_mad(1, all[2]));
  EXPECT_EQ(at(rej, o + 8), 0b11'000000);    // Message REJected: other
  EXPECT_EQ(at(rej, o + 9), 0b1111111'0);    // Reject Info Length 127
  EXPECT_EQ(at(rej, o + 10), 0); EXPECT_EQ(at(rej, o + 11), 28);  // Reason: consumer reject
  const auto rep = encode(make_cm_mad(1, all[3]));
  EXPECT_EQ(at(rep, o + 12), 0x00); EXPECT_EQ(at(rep, o + 14), 0x11);  // Local QPN 0x11
  EXPECT_EQ(at(rep, o + 15), 0);                                       // reserved
  EXPECT_EQ(at(rep, o + 20), 0xC2); EXPECT_EQ(at(rep, o + 22), 0x98);  // Starting PSN
  EXPECT_EQ(at(rep, o + 26), 0b11111'11'1);  // Target ACK Delay 31 | Failover 3 | EEFC
  EXPECT_EQ(at(rep, o + 27), 0b111'1'0000);  // RNR Retry 7 | SRQ | reserved
  const auto dreq = encode(make_cm_mad(1, all[5]));
  EXPECT_EQ(at(dreq, o + 8), 0xFE); EXPECT_EQ(at(dreq, o + 10), 0xBA); EXPECT_EQ(at(dreq, o + 11), 0);
  const auto srep = encode(make_cm_mad(1, all[8]));
  EXPECT_EQ(at(srep, o + 4), sidr_status::kNoQp);
  EXPECT_EQ(at(srep, o + 5), 72);
  EXPECT_EQ(at(srep, o + 10), 0xCD); EXPECT_EQ(at(srep, o + 11), 0);
  EXPECT_EQ(at(srep, o + 19), 0x06); EXPECT_EQ(at(srep, o + 18), 0x1C);  // Service ID ..1C06
}

TEST(CmMad, EncodeRefusesValuesWiderThanTheirFields) {
  struct Case {
    const char* what;
    CmMessage msg;
  };
  CmReq timeout = sample_req();
  timeout.local_cm_response_timeout = 32;  // 5 bits
  CmReq eecn = sample_req();
  eecn.local_eecn = 0x1000000;  // 24 bits
  CmReq flow = sample_req();
  flow.primary.flow_label = 0x100000;  // 20 bits
  CmReq mtu = sample_req();
  mtu.path_mtu = 16;  // 4 bits
  CmReq retry = sample_req();
  retry.retry_count = 8;  // 3 bits
  CmRej info;
  info.reject_info_length = 128;  // 7 bits
  CmMra svc;
  svc.service_timeout = 32;  // 5 bits
  CmRep ack;
  ack.failover_accepted = 4;  // 2 bits
  Case cases[] = {{"REQ timeout", timeout}, {"REQ EECN", eecn}, {"REQ flow label", flow},
                  {"REQ MTU", mtu},         {"REQ retry", retry}, {"REJ info length", info},
                  {"MRA timeout", svc},     {"REP failover", ack}};
  for (const Case& c : cases) {
    std::vector<std::byte> out(kMadLen, std::byte{0x55});
    auto r = encode_cm_mad(out, make_cm_mad(1, c.msg));
    EXPECT_EQ(r.error(), make_error_code(WireErrc::kFieldOutOfRange)) << c.what;
    EXPECT_EQ(out, std::vector<std::byte>(kMadLen)) << c.what << ": buffer not cleared";
  }
  std::vector<std::byte> small(kMadLen - 1);
  EXPECT_EQ(encode_cm_mad(small, make_cm_mad(1, CmRtu{})).error(),
            make_error_code(WireErrc::kBufferTooSmall));
}

TEST(CmMad, MalformedHeadersAreNamedErrors) {
  const auto good = encode(make_cm_mad(7, CmDrep{}));
  auto with = [&](size_t off, uint8_t v) {
    auto b = good;
    b[off] = std::byte{v};
    return parse_cm_mad(b).error();
  };
  EXPECT_EQ(with(0, 2), make_error_code(WireErrc::kBadMad));          // base version 2
  EXPECT_EQ(with(1, 0x03), make_error_code(WireErrc::kNotCmMad));     // SA class
  EXPECT_EQ(with(2, 1), make_error_code(WireErrc::kBadMad));          // CM class version 1
  EXPECT_EQ(with(17, 0x19), make_error_code(WireErrc::kUnknownCmAttribute));  // LAP
  EXPECT_EQ(with(17, 0x01), make_error_code(WireErrc::kUnknownCmAttribute));  // ClassPortInfo
  EXPECT_EQ(with(17, 0xFF), make_error_code(WireErrc::kUnknownCmAttribute));  // unassigned
  EXPECT_TRUE(parse_cm_mad(good));
}

// Every prefix of every attribute is an error (kTruncated); never a read past the end
// (the buffer is exactly the prefix, so ASan sees any overrun).
TEST(CmMad, EveryTruncationIsAnError) {
  for (const CmMessage& msg : samples()) {
    const auto b = encode(make_cm_mad(9, msg));
    for (size_t n = 0; n < kMadLen; ++n) {
      std::vector<std::byte> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
      auto r = parse_cm_mad(cut);
      ASSERT_FALSE(r) << short_name(attr_of(msg)) << " cut to " << n;
      EXPECT_EQ(r.error(), make_error_code(WireErrc::kTruncated)) << n;
    }
  }
}

// Random bytes: a result or an error, never a crash (ASan/UBSan builds watch the
// reads); what decodes re-encodes without a range error and decodes back to the
// same message.
TEST(CmMad, RandomGarbageNeverCrashes) {
  std::mt19937 rng(20261203);
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> b(rng() % (kMadLen + 8));
    for (auto& x : b) x = static_cast<std::byte>(rng());
    if (i % 2 == 0 && b.size() >= 24) {  // half with a plausible CM header, to reach the bodies
      b[0] = std::byte{1};
      b[1] = std::byte{7};
      b[2] = std::byte{2};
      b[16] = std::byte{0};
      b[17] = static_cast<std::byte>(0x10 + rng() % 9);
    }
    auto r = parse_cm_mad(b);
    if (!r) continue;
    ++decoded;
    auto again = encode(*r);
    EXPECT_EQ(parse_cm_mad(again)->msg, r->msg);
  }
  EXPECT_GT(decoded, 100);  // the test reached the attribute decoders
}

TEST(CmaHdr, Ipv4AndIpv6GoldenAndRoundTrip) {
  CmaHdr h;
  h.port = 0xD2F0;
  h.src = IpAddr::v4(10, 0, 0, 1);
  h.dst = IpAddr::v4(10, 0, 0, 2);
  std::array<std::byte, kCmaHdrLen> b{};
  ASSERT_TRUE(encode_cma_hdr(b, h));
  const uint8_t want[kCmaHdrLen] = {0x00, 0x40, 0xD2, 0xF0,  // version 0, IPv4, port
                                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1,
                                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2};
  for (size_t i = 0; i < kCmaHdrLen; ++i) EXPECT_EQ(static_cast<uint8_t>(b[i]), want[i]) << i;
  auto back = parse_cma_hdr(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, h);

  CmaHdr h6;
  h6.port = 7174;
  h6.src = *IpAddr::parse("fd00::1");
  h6.dst = *IpAddr::parse("fd00::2");
  ASSERT_TRUE(encode_cma_hdr(b, h6));
  EXPECT_EQ(static_cast<uint8_t>(b[1]), 0x60);
  EXPECT_EQ(static_cast<uint8_t>(b[4]), 0xFD);
  EXPECT_EQ(static_cast<uint8_t>(b[35]), 2);
  back = parse_cma_hdr(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, h6);
}

TEST(CmaHdr, Errors) {
  CmaHdr mixed;
  mixed.src = IpAddr::v4(1, 2, 3, 4);
  mixed.dst = *IpAddr::parse("fd00::2");
  std::array<std::byte, kCmaHdrLen> b{};
  EXPECT_EQ(encode_cma_hdr(b, mixed).error(), make_error_code(WireErrc::kBadCmaHdr));
  EXPECT_EQ(encode_cma_hdr(std::span(b).first(35), CmaHdr{}).error(),
            make_error_code(WireErrc::kBufferTooSmall));
  CmaHdr ok;
  ok.src = IpAddr::v4(1, 2, 3, 4);
  ok.dst = IpAddr::v4(5, 6, 7, 8);
  ASSERT_TRUE(encode_cma_hdr(b, ok));
  for (size_t n = 0; n < kCmaHdrLen; ++n) {
    std::vector<std::byte> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_EQ(parse_cma_hdr(cut).error(), make_error_code(WireErrc::kTruncated)) << n;
  }
  auto bad = b;
  bad[0] = std::byte{1};  // cma_version 1
  EXPECT_EQ(parse_cma_hdr(bad).error(), make_error_code(WireErrc::kBadCmaHdr));
  bad = b;
  bad[1] = std::byte{0x50};  // IP version 5
  EXPECT_EQ(parse_cma_hdr(bad).error(), make_error_code(WireErrc::kBadCmaHdr));
}

TEST(CmaHdr, ServiceIdsOfThePortSpaces) {
  EXPECT_EQ(rdma_cm_service_id(rdma_ps::kTcp, 7174), 0x0000000001061C06ull);
  EXPECT_EQ(rdma_cm_service_id(rdma_ps::kUdp, 1), 0x0000000001110001ull);
  EXPECT_EQ(rdma_cm_service_id(rdma_ps::kIb, 0xFFFF), 0x00000000013FFFFFull);
  auto s = parse_rdma_cm_service_id(0x0000000001061D2Full);  // montybeatnik_test.pcap's REQ
  ASSERT_TRUE(s);
  EXPECT_EQ(s->port_space, rdma_ps::kTcp);
  EXPECT_EQ(s->port, 7471);
  EXPECT_FALSE(parse_rdma_cm_service_id(0x1000000000000404ull));  // an IB CM user's service
  EXPECT_FALSE(parse_rdma_cm_service_id(0x0000000001071C06ull));  // no such port space
}

// The UD SEND Only to QP 1 that carries a MAD: BTH, DETH and the MAD at 12+8.
TEST(Gsi, CmFrameCarriesTheMadInAUdSendToQp1) {
  IpUdpInfo ip;
  ip.src = IpAddr::v4(192, 0, 2, 1);
  ip.dst = IpAddr::v4(192, 0, 2, 2);
  ip.sport = 0xC001;
  const CmMad mad = make_cm_mad(0x42, sample_req());
  std::vector<std::byte> out(kMaxFrameLen);
  auto len = build_cm_frame(out, ip, Psn(5), mad, /*with_ethernet=*/false);
  ASSERT_TRUE(len) << len.error().message();
  EXPECT_EQ(*len, 20u + 8 + 12 + 8 + 256 + 4);
  out.resize(*len);
  auto d = decode_frame(static_cast<int>(LinkType::kRaw), out);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_TRUE(d->icrc_ok());
  const auto& h = d->roce.hdr;
  EXPECT_EQ(h.bth.opcode, op::kUdSendOnly);
  EXPECT_EQ(h.bth.pkey, 0xFFFF);
  EXPECT_EQ(h.bth.dest_qpn, kGsiQpn);
  EXPECT_EQ(h.bth.psn, Psn(5));
  EXPECT_TRUE(h.bth.ack_req);
  EXPECT_EQ(h.bth.pad_count, 0);
  EXPECT_EQ(h.deth.qkey, 0x80010000u);
  EXPECT_EQ(h.deth.src_qpn, kGsiQpn);
  EXPECT_TRUE(is_gsi_mad(d->roce));
  auto back = parse_cm_mad(d->roce.payload);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->msg, mad.msg);
  // Bytes by hand: DETH Q_Key 80 01 00 00, reserved, SrcQP 00 00 01; MAD base version 1.
  const size_t deth = 20 + 8 + 12;
  const uint8_t want[] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x07, 0x02, 0x03};
  for (size_t i = 0; i < sizeof want; ++i) EXPECT_EQ(at(out, deth + i), want[i]) << i;
}

}  // namespace
}  // namespace rocelab::wire
