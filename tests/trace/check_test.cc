// rocelab check on hand-made traces: each written with src/wire's encoder into
// a real pcap, read back by the rocelab binary (`rocelab check --json`). A
// clean exchange gives no finding and exit 0; each violation gives its rule id
// and exit 1.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "capture/pcap_writer.h"
#include "tests/wire/run_util.h"
#include "trace/rules.h"
#include "wire/byte_order.h"
#include "wire/frame.h"
#include "wire/icrc.h"

namespace rocelab::trace::test {
namespace {

using namespace wire;
using namespace capture;
using wire::testutil::run;
using wire::testutil::quote;

constexpr uint32_t kQpA = 0x11, kQpB = 0x12;  // A's QP and B's QP

class TraceFile {
 public:
  explicit TraceFile(const std::string& name) : path_(wire::testutil::temp_path(name + ".pcap")) {
    auto w = PcapWriter::open(path_);
    EXPECT_TRUE(w);
    w_.emplace(std::move(*w));
  }
  // A packet from A (requests) or B (responses); payload_len bytes of 0x5A.
  // pad_override patches the BTH pad count after encoding (ICRC recomputed).
  void add(bool from_a, RoceHeaders h, size_t payload_len, int pad_override = -1) {
    IpUdpInfo ip;
    ip.src = from_a ? IpAddr::v4(10, 0, 0, 1) : IpAddr::v4(10, 0, 0, 2);
    ip.dst = from_a ? IpAddr::v4(10, 0, 0, 2) : IpAddr::v4(10, 0, 0, 1);
    ip.sport = 0xC000;
    h.bth.dest_qpn = Qpn(from_a ? kQpB : kQpA);
    std::vector<std::byte> payload(payload_len, std::byte{0x5A});
    std::vector<std::byte> frame(kMaxFrameLen);
    auto n = build_frame(frame, ip, h, payload, true);
    ASSERT_TRUE(n);
    frame.resize(*n);
    if (pad_override >= 0) {
      std::byte* bth = frame.data() + kEthHeaderLen + kIpv4HeaderLen + kUdpHeaderLen;
      bth[1] = std::byte((static_cast<uint8_t>(bth[1]) & 0xCF) | (pad_override << 4));
      const std::span<const std::byte> ip_packet(frame.data() + kEthHeaderLen, frame.size() - kEthHeaderLen);
      store_le32(frame.data() + frame.size() - kIcrcLen, compute_icrc(ip_packet, kIpv4HeaderLen));
    }
    t_ += std::chrono::microseconds(1);
    ASSERT_FALSE(w_->write(t_, frame));
  }
  void request(uint8_t op, uint32_t psn, size_t len, bool ack_req = false, uint32_t reth_len = 0, int pad = -1) {
    RoceHeaders h;
    h.bth.opcode = op;
    h.bth.psn = Psn(psn);
    h.bth.ack_req = ack_req;
    h.reth = {0x1000, 0x77, reth_len};
    add(true, h, len, pad);
  }
  void ack(uint32_t psn, Aeth a, uint8_t op = op::kRcAck, size_t len = 0) {
    RoceHeaders h;
    h.bth.opcode = op;
    h.bth.psn = Psn(psn);
    h.aeth = a;
    add(false, h, len);
  }
  // rocelab check --json: the exit status and the rule ids found.
  std::pair<int, std::vector<std::string>> check() {
    EXPECT_FALSE(w_->close());
    auto r = run(wire::testutil::kRocelab + " check --json " + quote(path_));
    std::vector<std::string> rules;
    for (const std::string& line : wire::testutil::split(r.out, '\n')) {
      const auto at = line.find("\"rule\":\"");
      if (line.find("\"type\":\"finding\"") != std::string::npos && at != std::string::npos)
        rules.push_back(line.substr(at + 8, line.find('"', at + 8) - at - 8));
    }
    return {r.status, rules};
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::optional<PcapWriter> w_;
  std::chrono::nanoseconds t_{1'700'000'000'000'000'000};
};

bool has(const std::vector<std::string>& v, std::string_view rule) {
  for (const auto& r : v)
    if (r == rule) return true;
  return false;
}

TEST(Check, CleanExchangeHasNoFinding) {
  TraceFile t("clean");
  t.request(op::kRcWriteFirst, 0, 1024, false, 3000);
  t.request(op::kRcWriteMiddle, 1, 1024);
  t.request(op::kRcWriteLast, 2, 952, true);
  t.ack(2, Aeth::ack(1));
  t.request(op::kRcReadRequest, 3, 0, true, 2500);
  t.ack(3, Aeth::ack(2), op::kRcReadRespFirst, 1024);
  t.ack(4, Aeth{}, op::kRcReadRespMiddle, 1024);
  t.ack(5, Aeth::ack(2), op::kRcReadRespLast, 452);
  t.request(op::kRcSendOnly, 6, 10, true);
  t.ack(6, Aeth::ack(3));
  auto [status, rules] = t.check();
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(rules.empty()) << rules.front();
}

TEST(Check, NakNamingAnotherPsnThanTheFirstMissing) {
  TraceFile t("nak");
  t.request(op::kRcSendFirst, 0, 1024);
  t.request(op::kRcSendMiddle, 1, 1024);
  t.request(op::kRcSendMiddle, 2, 1024);
  t.request(op::kRcSendLast, 4, 1024, true);  // PSN 3 never arrives
  t.ack(4, Aeth::nak(0, NakCode::kPsnSeqError));  // must name PSN 3
  auto [status, rules] = t.check();
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(has(rules, rule::kNakPsn));
  EXPECT_TRUE(has(rules, rule::kPsnGap));
}

TEST(Check, AckForAPsnNeverSent) {
  TraceFile t("ack");
  t.request(op::kRcSendOnly, 0, 8, true);
  t.request(op::kRcSendOnly, 1, 8, true);
  t.ack(7, Aeth::ack(2));
  auto [status, rules] = t.check();
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(has(rules, rule::kAckUnsent));
}

TEST(Check, MiddleAfterAnOnly) {
  TraceFile t("middle");
  t.request(op::kRcSendOnly, 0, 8, true);
  t.request(op::kRcSendMiddle, 1, 1024);
  auto [status, rules] = t.check();
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(has(rules, rule::kSeqNoFirst));
}

TEST(Check, ReadAnsweredWithTheWrongNumberOfResponses) {
  TraceFile t("read");
  t.request(op::kRcWriteFirst, 0, 1024, false, 2048);  // the path MTU: 1024
  t.request(op::kRcWriteLast, 1, 1024, true);
  t.ack(1, Aeth::ack(1));
  t.request(op::kRcReadRequest, 2, 0, true, 2500);  // 3 responses at MTU 1024
  t.ack(2, Aeth::ack(2), op::kRcReadRespFirst, 1024);
  t.ack(3, Aeth::ack(2), op::kRcReadRespLast, 1476);
  auto [status, rules] = t.check();
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(has(rules, rule::kReadCount));
}

TEST(Check, BadPad) {
  TraceFile t("pad");
  // A WRITE Only of 10 bytes whose pad says 1: the receiver reads 11 bytes.
  t.request(op::kRcWriteOnly, 0, 10, true, 10, 1);
  t.ack(0, Aeth::ack(1));
  // A First with a pad: its payload must be exactly one MTU.
  t.request(op::kRcWriteFirst, 1, 1024, false, 2048, 2);
  auto [status, rules] = t.check();
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(has(rules, rule::kLenReth));
  EXPECT_TRUE(has(rules, rule::kPadFirstMiddle));
}

TEST(Check, UnreadableFilesExit2) {
  auto r = run(wire::testutil::kRocelab + " check /nonexistent/x.pcap");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;
  const std::string garbage = wire::testutil::temp_path("garbage.pcap");
  {
    std::FILE* f = std::fopen(garbage.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 4096; ++i) std::fputc((i * 7919) & 0xFF, f);
    std::fclose(f);
  }
  r = run(wire::testutil::kRocelab + " check " + quote(garbage));
  EXPECT_EQ(r.status, 2);
  // A capture cut inside its last record: what came before is checked, exit 2.
  TraceFile t("cut");
  t.request(op::kRcSendOnly, 0, 8, true);
  t.ack(0, Aeth::ack(1));
  (void)t.check();
  const std::string whole = wire::testutil::slurp(t.path());
  const std::string cut = wire::testutil::temp_path("cut2.pcap");
  {
    std::FILE* f = std::fopen(cut.c_str(), "wb");
    std::fwrite(whole.data(), 1, whole.size() - 5, f);
    std::fclose(f);
  }
  r = run(wire::testutil::kRocelab + " check " + quote(cut));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("damaged"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("1 RoCEv2 packets"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rocelab::trace::test
