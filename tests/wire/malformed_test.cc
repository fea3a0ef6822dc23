// Bad input: every truncation, bad TVer, unknown opcodes, bad pad counts and
// seeded random buffers give a typed error (never a crash, never a silent
// success). Runs under ASan/UBSan in `make test`.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "wire/frame.h"
#include "wire/ib_native.h"

namespace rocelab::wire {
namespace {

constexpr int kEthernet = static_cast<int>(LinkType::kEthernet);
constexpr size_t kHdrs = kEthHeaderLen + kIpv4HeaderLen + kUdpHeaderLen;  // before the BTH

// A whole Ethernet frame for opcode `info`, with 5 payload bytes when it carries a payload.
std::vector<std::byte> frame_for(const OpInfo& info) {
  RoceHeaders h;
  h.bth.opcode = info.code;
  h.bth.dest_qpn = Qpn(0x12);
  h.bth.psn = Psn(1);
  std::vector<std::byte> payload(info.is(OpClass::kPayload) ? 5 : 0, std::byte{0x77});
  IpUdpInfo ip;
  ip.src = IpAddr::v4(127, 0, 0, 1);
  ip.dst = IpAddr::v4(127, 0, 0, 2);
  std::vector<std::byte> out(kMaxFrameLen);
  auto len = build_frame(out, ip, h, payload);
  EXPECT_TRUE(len);
  out.resize(*len);
  return out;
}

bool is_wire_error(const std::error_code& ec) { return ec && ec.category() == wire_category(); }

// Cutting a frame anywhere: before the UDP destination port it is not
// identifiably RoCE; after it the IP total length no longer fits: kTruncated.
TEST(Malformed, EveryTruncationOfEveryOpcode) {
  int opcodes = 0;
  for (const OpInfo& info : opcode_table()) {
    if (!info.valid) continue;
    ++opcodes;
    const auto f = frame_for(info);
    for (size_t n = 0; n < f.size(); ++n) {
      auto d = decode_frame(kEthernet, std::span(f).first(n));
      ASSERT_FALSE(d) << info.name << " cut to " << n << " bytes decoded";
      const WireErrc want = n < kEthHeaderLen + kIpv4HeaderLen + 4 ? WireErrc::kNotRoce
                                                                   : WireErrc::kTruncated;
      EXPECT_EQ(d.error(), make_error_code(want)) << info.name << " cut to " << n;
    }
    // The transport packet alone: shorter than BTH + its headers + ICRC is kTruncated.
    const auto udp_payload = std::span(f).subspan(kHdrs);
    for (size_t n = 0; n < info.header_bytes() + kIcrcLen; ++n) {
      auto p = parse_roce(udp_payload.first(n));
      ASSERT_FALSE(p) << info.name << " transport cut to " << n;
      EXPECT_EQ(p.error(), make_error_code(WireErrc::kTruncated));
    }
    EXPECT_TRUE(parse_roce(udp_payload)) << info.name;
  }
  EXPECT_EQ(opcodes, 61);
}

// IBTA C9-4 (as rxe checks it): a TVer other than 0 is dropped.
TEST(Malformed, NonZeroTVer) {
  auto f = frame_for(op_info(op::kRcSendOnly));
  for (uint8_t tver = 1; tver < 16; ++tver) {
    f[kHdrs + 1] = static_cast<std::byte>((static_cast<uint8_t>(f[kHdrs + 1]) & 0xF0) | tver);
    auto d = decode_frame(kEthernet, f);
    ASSERT_FALSE(d);
    EXPECT_EQ(d.error(), make_error_code(WireErrc::kBadTVer));
  }
}

// Opcodes outside the table (RD, reserved, manufacturer-specific) are not guessed at.
TEST(Malformed, UnknownOpcodes) {
  auto f = frame_for(op_info(op::kRcSendOnly));
  int unknown = 0;
  for (int code = 0; code < 256; ++code) {
    if (op_info(static_cast<uint8_t>(code)).valid) continue;
    ++unknown;
    f[kHdrs] = static_cast<std::byte>(code);
    auto d = decode_frame(kEthernet, f);
    ASSERT_FALSE(d) << code;
    EXPECT_EQ(d.error(), make_error_code(WireErrc::kUnknownOpcode)) << code;
  }
  EXPECT_EQ(unknown, 256 - 61);
  EXPECT_FALSE(op_info(0x15).valid);  // reserved in RC
  EXPECT_FALSE(op_info(0x40).valid);  // RD SEND First: RD is not implemented
}

// IBTA 9.2.1.2: the pad count says how many bytes before the ICRC are padding;
// it cannot exceed what is there.
TEST(Malformed, PadCountLargerThanBody) {
  auto f = frame_for(op_info(op::kRcAck));  // BTH + AETH + ICRC: no room for any pad
  for (uint8_t pad = 1; pad < 4; ++pad) {
    f[kHdrs + 1] = static_cast<std::byte>(pad << 4);
    auto d = decode_frame(kEthernet, f);
    ASSERT_FALSE(d);
    EXPECT_EQ(d.error(), make_error_code(WireErrc::kBadPadCount));
  }
  // A SEND Only whose body (payload + pad) is 2 bytes, claiming pad 3.
  std::vector<std::byte> t(kBthLen + 2 + kIcrcLen);
  t[0] = std::byte{op::kRcSendOnly};
  t[1] = std::byte{0x30};
  auto p = parse_roce(t);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), make_error_code(WireErrc::kBadPadCount));
}

// Opcodes without a payload end with their headers: extra bytes are an error,
// not something to ignore; the encoder refuses to make them.
TEST(Malformed, PayloadOnOpcodesThatCarryNone) {
  int checked = 0;
  for (const OpInfo& info : opcode_table()) {
    if (!info.valid || info.is(OpClass::kPayload)) continue;
    ++checked;
    RoceHeaders h;
    h.bth.opcode = info.code;
    std::vector<std::byte> buf(kMaxRoceLen);
    const std::byte extra[4] = {};
    EXPECT_EQ(encode_roce(buf, h, extra).error(), make_error_code(WireErrc::kUnexpectedPayload));
    auto hlen = encode_headers(buf, h);
    ASSERT_TRUE(hlen);
    auto len = Result<size_t>(*hlen + sizeof extra + kIcrcLen);  // 4 stray bytes, then the ICRC
    auto p = parse_roce(std::span(buf).first(*len));
    ASSERT_FALSE(p) << info.name;
    EXPECT_EQ(p.error(), make_error_code(WireErrc::kUnexpectedPayload)) << info.name;
    EXPECT_TRUE(parse_roce(std::span(buf).first(info.header_bytes() + kIcrcLen))) << info.name;
  }
  EXPECT_EQ(checked, 5 + 5 + 1);  // RC and XRC: READ Request, ACK, ATOMIC ACK, 2 atomics; CNP
}

// An IP header that lies about its lengths, on a packet to port 4791.
TEST(Malformed, InconsistentIpUdpLengths) {
  auto f = frame_for(op_info(op::kRcSendOnly));
  auto g = f;
  g[kEthHeaderLen] = std::byte{0x44};  // IHL 4 (< 5 words): where UDP starts is unknowable
  EXPECT_EQ(decode_frame(kEthernet, g).error(), make_error_code(WireErrc::kNotRoce));
  g = f;
  g[kEthHeaderLen + 3] = std::byte{0x10};  // IP total length 16: shorter than its own header
  EXPECT_EQ(decode_frame(kEthernet, g).error(), make_error_code(WireErrc::kBadIpHeader));
  g = f;
  g[kEthHeaderLen + kIpv4HeaderLen + 4] = std::byte{0x7F};  // UDP length beyond the IP packet
  EXPECT_EQ(decode_frame(kEthernet, g).error(), make_error_code(WireErrc::kBadUdpHeader));
  g = f;
  g[kEthHeaderLen + kIpv4HeaderLen + 3] = std::byte{0xB8};  // UDP port 0x12b8 != 4791
  EXPECT_EQ(decode_frame(kEthernet, g).error(), make_error_code(WireErrc::kNotRoce));
}

// Seeded random buffers and random corruptions of valid frames: every outcome is
// either a decoded packet or an error of our category.
TEST(Malformed, SeededRandomBuffers) {
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::vector<std::byte>> valid;
  for (const OpInfo& info : opcode_table())
    if (info.valid) valid.push_back(frame_for(info));
  const int link_types[] = {1, 12, 113, 276};
  int decoded = 0, errors = 0;
  for (int i = 0; i < 4000; ++i) {
    std::vector<std::byte> buf;
    if (i % 2 == 0) {
      buf.resize(rng() % 160);
      for (auto& b : buf) b = static_cast<std::byte>(byte(rng));
      if (buf.size() > 44 && i % 4 == 0) {
        // Make it look like IPv4/UDP to 4791 behind Ethernet, so parse_roce sees it.
        buf[12] = std::byte{0x08};
        buf[13] = std::byte{0x00};
        buf[14] = std::byte{0x45};
        buf[23] = std::byte{17};
        buf[36] = std::byte{0x12};
        buf[37] = std::byte{0xB7};
      }
    } else {
      buf = valid[rng() % valid.size()];
      for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
        buf[rng() % buf.size()] = static_cast<std::byte>(byte(rng));
      if (rng() % 3 == 0) buf.resize(rng() % buf.size());
    }
    for (int lt : link_types) {
      auto d = decode_frame(lt, buf);
      if (d) {
        ++decoded;
        // A decoded packet never points outside the buffer it came from.
        ASSERT_GE(d->roce.payload.data(), buf.data());
        ASSERT_LE(d->roce.payload.data() + d->roce.payload.size(), buf.data() + buf.size());
      } else {
        ++errors;
        ASSERT_TRUE(is_wire_error(d.error())) << d.error().message();
      }
    }
    if (auto p = parse_roce(buf); !p) {
      ASSERT_TRUE(is_wire_error(p.error()));
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(decoded, 0);  // corrupted payload bytes still decode (the ICRC tells)
}

// Native InfiniBand (ERF records): every truncation of a local and a global
// packet, and random records, give typed errors.
TEST(Malformed, NativeInfinibandTruncationsAndNoise) {
  // LRH (VL 0, LNH 2, DLID 1, PktLen 7 words = 28 bytes, SLID 4) + RC Acknowledge + ICRC + VCRC.
  std::vector<std::byte> local = {std::byte{0x00}, std::byte{0x02}, std::byte{0x00}, std::byte{0x01},
                                  std::byte{0x00}, std::byte{0x07}, std::byte{0x00}, std::byte{0x04}};
  RoceHeaders h;
  h.bth.opcode = op::kRcAck;
  std::vector<std::byte> t(kMaxRoceLen);
  auto len = encode_roce(t, h, {});
  ASSERT_TRUE(len);
  local.insert(local.end(), t.begin(), t.begin() + static_cast<std::ptrdiff_t>(*len));
  local.resize(local.size() + kVcrcLen);
  ASSERT_TRUE(decode_ib(local));
  for (size_t n = 0; n < local.size(); ++n) {
    auto d = decode_ib(std::span(local).first(n));
    ASSERT_FALSE(d) << n;
    EXPECT_EQ(d.error(), make_error_code(WireErrc::kTruncated)) << n;
  }
  local[1] = std::byte{0x00};  // LNH 0: raw, no BTH
  EXPECT_EQ(decode_ib(local).error(), make_error_code(WireErrc::kNotRoce));

  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> buf(rng() % 120);
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    if (buf.size() > 9) buf[8] = std::byte{kErfTypeInfiniband};
    auto rec = parse_erf(buf);
    if (!rec) {
      ASSERT_TRUE(is_wire_error(rec.error()));
      continue;
    }
    ASSERT_LE(rec->payload.data() + rec->payload.size(), buf.data() + buf.size());
    if (auto d = decode_ib(rec->payload); !d) {
      ASSERT_TRUE(is_wire_error(d.error()));
    }
  }
}

}  // namespace
}  // namespace rocelab::wire
