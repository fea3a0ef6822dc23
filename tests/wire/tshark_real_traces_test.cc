// Wireshark (tshark) against the real captures of other people's NICs and
// Soft-RoCE in ../shared/traces/public (label `external`: skipped where that
// folder is absent, as in a user's clone).
#include <gtest/gtest.h>

#include "capture/pcap_reader.h"
#include "tests/external.h"
#include "tests/wire/run_util.h"
#include "tests/wire/tshark_fields.h"
#include "wire/frame.h"
#include "wire/ib_native.h"

namespace rocelab::wire {
namespace {

using capture::PcapReader;

using namespace testutil;

// The real captures: the BTH of every RoCEv2 packet, and no malformed packet.
TEST(Tshark, AgreesOnTheRealCaptures) {
  const std::string dir = std::string(ROCELAB_SHARED_DIR) + "/traces/public/";
  ROCELAB_REQUIRE_EXTERNAL(dir);
  int compared = 0;
  for (const char* name : {"montybeatnik_roce_capture_read-write-ecn.pcap", "montybeatnik_test.pcap",
                           "oferby_proxy_roce.pcap", "pcapplusplus_InfiniBandPacket.pcap",
                           "scapy_roce_uts_cnp_connectx4lx.pcap"}) {
    SCOPED_TRACE(name);
    const std::string path = dir + name;
    std::vector<std::string> storage;
    auto reader = PcapReader::open(path);
    ASSERT_TRUE(reader);
    const auto rows = tshark_rows(path);
    size_t frame = 0;
    for (;;) {
      auto f = reader->next();
      ASSERT_TRUE(f);
      if (!f->has_value()) break;
      const auto& c = rows.at(frame++);
      auto d = decode_frame(reader->link_type(), (*f)->data);
      if (!d) {
        EXPECT_EQ(c[kOpcode], "") << "frame " << frame << ": tshark decodes a BTH we skipped";
        continue;
      }
      EXPECT_EQ(num(c[kOpcode]), d->roce.hdr.bth.opcode) << "frame " << frame;
      EXPECT_EQ(num(c[kDestQp]), d->roce.hdr.bth.dest_qpn.value()) << "frame " << frame;
      EXPECT_EQ(num(c[kPsn]), d->roce.hdr.bth.psn.value()) << "frame " << frame;
      EXPECT_EQ(c[kMalformed], "") << "frame " << frame;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 12 + 12 + 105 + 1 + 1);
}

// Native InfiniBand in ERF: Wireshark and decode_ib read the same BTH and DETH.
TEST(Tshark, AgreesOnNativeInfiniband) {
  const std::string path = std::string(ROCELAB_SHARED_DIR) +
                           "/traces/public/srinivaskoritala_infiniband.pcap";
  ROCELAB_REQUIRE_EXTERNAL(path);
  auto reader = PcapReader::open(path);
  ASSERT_TRUE(reader);
  const auto rows = tshark_rows(path);
  size_t frame = 0;
  for (;;) {
    auto f = reader->next();
    ASSERT_TRUE(f);
    if (!f->has_value()) break;
    const auto& c = rows.at(frame++);
    auto rec = parse_erf((*f)->data);
    ASSERT_TRUE(rec);
    auto ib = decode_ib(rec->payload);
    ASSERT_TRUE(ib) << "frame " << frame;
    const RoceHeaders& h = ib->roce.hdr;
    EXPECT_EQ(num(c[kOpcode]), h.bth.opcode) << "frame " << frame;
    EXPECT_EQ(num(c[kDestQp]), h.bth.dest_qpn.value()) << "frame " << frame;
    EXPECT_EQ(num(c[kPsn]), h.bth.psn.value()) << "frame " << frame;
    EXPECT_EQ(num(c[kA]), h.bth.ack_req) << "frame " << frame;
    EXPECT_EQ(num(c[kCrc]), bswap(ib->roce.icrc)) << "frame " << frame;
    if (h.info().carries(Hdr::kDeth)) {
      EXPECT_EQ(num(c[kQkey]), h.deth.qkey) << "frame " << frame;
      EXPECT_EQ(num(c[kSrcQp]), h.deth.src_qpn.value()) << "frame " << frame;
    }
    if (h.info().carries(Hdr::kAeth)) {
      EXPECT_EQ(num(c[kSyndrome]), h.aeth.syndrome) << "frame " << frame;
      EXPECT_EQ(num(c[kMsn]), h.aeth.msn) << "frame " << frame;
    }
  }
  EXPECT_EQ(frame, 43u);
}

}  // namespace
}  // namespace rocelab::wire
