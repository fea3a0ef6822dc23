// Real captures from other people's hardware and Soft-RoCE (see
// ${ROCELAB_SHARED_DIR}/traces/public/SOURCES.txt): every RoCEv2 packet decodes
// and its ICRC checks. Label `external`: skipped where ../shared is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "capture/pcap_reader.h"
#include "tests/external.h"
#include "wire/frame.h"
#include "wire/ib_native.h"
#include "wire/icrc.h"

namespace rocelab::wire {
namespace {

using capture::PcapReader;

namespace fs = std::filesystem;

struct Tally {
  int link_type = 0;
  int frames = 0, roce = 0, non_roce = 0;
};

Tally decode_all(const fs::path& file) {
  Tally t;
  auto r = PcapReader::open(file.string());
  EXPECT_TRUE(r) << file << ": " << r.error().message();
  if (!r) return t;
  t.link_type = r->link_type();
  for (;;) {
    auto f = r->next();
    EXPECT_TRUE(f) << file;
    if (!f || !f->has_value()) break;
    ++t.frames;
    auto d = decode_frame(t.link_type, (*f)->data);
    if (!d) {
      const bool skipped = d.error() == make_error_code(WireErrc::kNotRoce) ||
                           d.error() == make_error_code(WireErrc::kUnsupportedLinkType);
      EXPECT_TRUE(skipped) << file << " frame " << t.frames << ": " << d.error().message();
      ++t.non_roce;
      continue;
    }
    ++t.roce;
    EXPECT_TRUE(d->icrc_ok()) << file << " frame " << t.frames << ": ICRC carried "
                              << std::hex << d->roce.icrc << ", computed " << d->icrc_computed;
  }
  return t;
}

TEST(RealTraces, EveryRoceV2PacketDecodesWithAGoodIcrc) {
  const fs::path dir = fs::path(ROCELAB_SHARED_DIR) / "traces" / "public";
  ROCELAB_REQUIRE_EXTERNAL(dir);
  // RoCEv2 frames per capture, counted independently with tshark (udp.dstport == 4791).
  const std::map<std::string, int> expected_roce = {
      {"montybeatnik_roce_capture_read-write-ecn.pcap", 12},
      {"montybeatnik_test.pcap", 12},
      {"oferby_proxy_roce.pcap", 105},
      {"pcapplusplus_InfiniBandPacket.pcap", 1},
      {"scapy_roce_uts_cnp_connectx4lx.pcap", 1},
      {"srinivaskoritala_infiniband.pcap", 0},
  };
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".pcap") continue;
    ++files;
    const Tally t = decode_all(e.path());
    const std::string name = e.path().filename().string();
    auto it = expected_roce.find(name);
    ASSERT_NE(it, expected_roce.end()) << "new capture " << name << ": add its count here";
    EXPECT_EQ(t.roce, it->second) << name;
    EXPECT_EQ(t.roce + t.non_roce, t.frames) << name;
  }
  EXPECT_EQ(files, static_cast<int>(expected_roce.size()));
}

// Native InfiniBand in Endace ERF (DLT 197): readable, no RoCEv2, all counted as such.
TEST(RealTraces, ErfNativeInfinibandIsCountedAsNonRoce) {
  const fs::path f =
      fs::path(ROCELAB_SHARED_DIR) / "traces" / "public" / "srinivaskoritala_infiniband.pcap";
  ROCELAB_REQUIRE_EXTERNAL(f);
  const Tally t = decode_all(f);
  EXPECT_EQ(t.link_type, 197);
  EXPECT_EQ(t.frames, 43);
  EXPECT_EQ(t.non_roce, 43);
}

// The same capture decoded as what it is: native InfiniBand, 37 local packets
// (LRH + BTH) and 6 global ones (LRH + GRH + BTH), every native ICRC good.
TEST(RealTraces, ErfNativeInfinibandDecodesWithGoodIcrcs) {
  const fs::path path =
      fs::path(ROCELAB_SHARED_DIR) / "traces" / "public" / "srinivaskoritala_infiniband.pcap";
  ROCELAB_REQUIRE_EXTERNAL(path);
  auto r = PcapReader::open(path.string());
  ASSERT_TRUE(r);
  int local = 0, global = 0, frame = 0;
  for (;;) {
    auto f = r->next();
    ASSERT_TRUE(f);
    if (!f->has_value()) break;
    ++frame;
    auto rec = parse_erf((*f)->data);
    ASSERT_TRUE(rec) << frame;
    ASSERT_EQ(rec->type, kErfTypeInfiniband);
    auto ib = decode_ib(rec->payload);
    ASSERT_TRUE(ib) << "frame " << frame << ": " << ib.error().message();
    EXPECT_TRUE(ib->icrc_ok()) << "frame " << frame;
    EXPECT_EQ(size_t{ib->lrh.pkt_len} * 4 + kVcrcLen, rec->payload.size()) << frame;
    ++(ib->has_grh ? global : local);
  }
  EXPECT_EQ(local, 37);
  EXPECT_EQ(global, 6);
}

// Soft-RoCE and NICs number their IPv4 IDs; a UDP socket never sees them.
// For every IPv4 RoCEv2 packet of the real captures, the ID and DF solved from
// the ICRC (as the receive path does, assuming ID 0 and DF) are the ones on
// the wire.
TEST(RealTraces, TheIpv4IdOfEveryPacketIsRecoveredFromItsIcrc) {
  const fs::path dir = fs::path(ROCELAB_SHARED_DIR) / "traces" / "public";
  ROCELAB_REQUIRE_EXTERNAL(dir);
  int checked = 0, nonzero = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".pcap") continue;
    auto r = PcapReader::open(e.path().string());
    ASSERT_TRUE(r);
    for (int frame = 1;; ++frame) {
      auto f = r->next();
      ASSERT_TRUE(f);
      if (!f->has_value()) break;
      auto d = decode_frame(r->link_type(), (*f)->data);
      if (!d || d->ip.info.src.v6 || d->ip.info.ip_header_len != kIpv4HeaderLen || !d->icrc_ok()) continue;
      std::vector<std::byte> p(d->ip.ip_packet.begin(), d->ip.ip_packet.end());
      p[4] = p[5] = std::byte{0};
      p[6] = std::byte{0x40};
      const uint32_t assumed = compute_icrc(p, kIpv4HeaderLen);
      const size_t rest = p.size() - kIpv4HeaderLen - kUdpHeaderLen - kBthLen - kIcrcLen;
      auto u = solve_ipv4_unseen(assumed ^ d->roce.icrc, kIpv4HeaderLen, rest);
      ASSERT_TRUE(u) << e.path().filename() << " frame " << frame;
      EXPECT_EQ(u->id, d->ip.info.ip_id) << e.path().filename() << " frame " << frame;
      EXPECT_EQ(!u->df, d->ip.info.df) << e.path().filename() << " frame " << frame;
      ++checked;
      if (d->ip.info.ip_id != 0) ++nonzero;
    }
  }
  EXPECT_GE(checked, 100);
  EXPECT_EQ(nonzero, 26);  // the Soft-RoCE VMs' and the NICs' packets with an ID other than 0
}

}  // namespace
}  // namespace rocelab::wire
