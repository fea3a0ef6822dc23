// rocelab replay on hand-made captures: each written with src/wire's encoder
// into a real pcap and replayed by the rocelab binary (`rocelab replay
// --json`) against its live emulated responder. A consistent exchange gives no
// behavioural difference and exit 0; a capture whose responder acted
// otherwise than a correct one would (it accepted a WRITE longer than its
// RETH, it refused a request inside a region it accepted before, its READ
// returned other bytes than its WRITEs had put there) gives the expected
// difference and exit 1; files that are no capture exit 2 with a message.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "capture/pcap_reader.h"
#include "capture/pcap_writer.h"
#include "tests/wire/run_util.h"
#include "wire/frame.h"

namespace rocelab::replay::test {
namespace {

using namespace wire;
using namespace capture;
using wire::testutil::quote;
using wire::testutil::run;

constexpr uint32_t kQpA = 0x11, kQpB = 0x12;  // A's QP (requester) and B's (responder)
constexpr uint64_t kVa = 0x7f0000001000;
constexpr uint32_t kRkey = 0x1234;

std::vector<std::byte> bytes(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
  return v;
}

struct Json {
  std::map<std::string, std::string> f;
  std::string operator[](const std::string& k) const {
    auto it = f.find(k);
    return it == f.end() ? "" : it->second;
  }
};

// Flat JSON objects as `rocelab replay --json` prints them (strings without escapes in the keys used here).
Json parse(const std::string& line) {
  Json j;
  size_t i = 0;
  while ((i = line.find('"', i)) != std::string::npos) {
    const size_t ke = line.find('"', i + 1);
    const std::string key = line.substr(i + 1, ke - i - 1);
    size_t v = ke + 2;
    std::string val;
    if (line[v] == '"') {
      size_t e = v + 1;
      while (e < line.size() && !(line[e] == '"' && line[e - 1] != '\\')) ++e;
      val = line.substr(v + 1, e - v - 1);
      i = e + 1;
    } else {
      size_t e = line.find_first_of(",}", v);
      val = line.substr(v, e - v);
      i = e;
    }
    j.f[key] = val;
  }
  return j;
}

struct Replayed {
  int status = -1;
  std::string err;
  std::vector<Json> diffs;
  Json result;
  std::vector<std::string> kinds(const std::string& cls) const {
    std::vector<std::string> k;
    for (const Json& d : diffs)
      if (d["class"] == cls) k.push_back(d["kind"]);
    return k;
  }
};

class TraceFile {
 public:
  explicit TraceFile(const std::string& name) : path_(wire::testutil::temp_path("replay_" + name + ".pcap")) {
    auto w = PcapWriter::open(path_);
    EXPECT_TRUE(w);
    w_.emplace(std::move(*w));
  }
  void add(bool from_a, RoceHeaders h, std::span<const std::byte> payload) {
    IpUdpInfo ip;
    ip.src = from_a ? IpAddr::v4(10, 0, 0, 1) : IpAddr::v4(10, 0, 0, 2);
    ip.dst = from_a ? IpAddr::v4(10, 0, 0, 2) : IpAddr::v4(10, 0, 0, 1);
    ip.sport = 0xC000;
    h.bth.dest_qpn = Qpn(from_a ? kQpB : kQpA);
    std::vector<std::byte> frame(kMaxFrameLen);
    auto n = build_frame(frame, ip, h, payload, true);
    ASSERT_TRUE(n);
    frame.resize(*n);
    t_ += std::chrono::microseconds(5);
    ASSERT_FALSE(w_->write(t_, frame));
  }
  void write(uint32_t psn, uint64_t va, uint32_t reth_len, std::span<const std::byte> payload, uint32_t rkey = kRkey) {
    RoceHeaders h;
    h.bth.opcode = op::kRcWriteOnly;
    h.bth.psn = Psn(psn);
    h.bth.ack_req = true;
    h.reth = {va, rkey, reth_len};
    add(true, h, payload);
  }
  void read(uint32_t psn, uint64_t va, uint32_t len) {
    RoceHeaders h;
    h.bth.opcode = op::kRcReadRequest;
    h.bth.psn = Psn(psn);
    h.bth.ack_req = true;
    h.reth = {va, kRkey, len};
    add(true, h, {});
  }
  void send(uint32_t psn, size_t len, bool ack_req = true) {
    RoceHeaders h;
    h.bth.opcode = op::kRcSendOnly;
    h.bth.psn = Psn(psn);
    h.bth.ack_req = ack_req;
    add(true, h, bytes(len, 1));
  }
  void fetch_add(uint32_t psn, uint64_t va, uint64_t add_value) {
    RoceHeaders h;
    h.bth.opcode = op::kRcFetchAdd;
    h.bth.psn = Psn(psn);
    h.bth.ack_req = true;
    h.atomic_eth = {va, kRkey, add_value, 0};
    add(true, h, {});
  }
  void ack(uint32_t psn, Aeth a) {
    RoceHeaders h;
    h.bth.opcode = op::kRcAck;
    h.bth.psn = Psn(psn);
    h.aeth = a;
    add(false, h, {});
  }
  void read_only(uint32_t psn, uint32_t msn, std::span<const std::byte> payload) {
    RoceHeaders h;
    h.bth.opcode = op::kRcReadRespOnly;
    h.bth.psn = Psn(psn);
    h.aeth = Aeth::ack(msn);
    add(false, h, payload);
  }
  void atomic_ack(uint32_t psn, uint32_t msn, uint64_t orig) {
    RoceHeaders h;
    h.bth.opcode = op::kRcAtomicAck;
    h.bth.psn = Psn(psn);
    h.aeth = Aeth::ack(msn);
    h.atomic_ack_eth.orig = orig;
    add(false, h, {});
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    EXPECT_FALSE(w_->close());
  }
  Replayed replay(const std::string& args = "") {
    close();
    auto r = run(wire::testutil::kRocelab + " replay --json " + args + " " + quote(path_));
    Replayed out;
    out.status = r.status;
    out.err = r.err;
    for (const std::string& line : wire::testutil::split(r.out, '\n')) {
      if (line.empty()) continue;
      Json j = parse(line);
      if (j["type"] == "difference") out.diffs.push_back(j);
      if (j["type"] == "result") out.result = j;
    }
    return out;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::optional<PcapWriter> w_;
  bool closed_ = false;
  std::chrono::nanoseconds t_{1'700'000'000'000'000'000};
};

bool has(const std::vector<std::string>& v, std::string_view k) {
  for (const auto& x : v)
    if (x == k) return true;
  return false;
}

// WRITE, READ of what it wrote, a SEND, an atomic on written bytes: the live
// responder answers every PSN as the capture's did, READ data and original
// value included.
TEST(Replay, ConsistentExchangeHasNoDifference) {
  TraceFile t("clean");
  const auto data = bytes(64, 9);
  t.write(100, kVa, 64, data);
  t.ack(100, Aeth::ack(1));
  t.read(101, kVa, 64);
  t.read_only(101, 2, data);
  t.send(102, 16);
  t.ack(102, Aeth::ack(3));
  uint64_t v;
  std::memcpy(&v, data.data() + 8, 8);
  t.fetch_add(103, kVa + 8, 5);
  t.atomic_ack(103, 4, v);
  t.fetch_add(104, kVa + 8, 1);
  t.atomic_ack(104, 5, v + 5);
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.diffs.empty()) << r.diffs.front()["kind"] << ": " << r.diffs.front()["text"];
  EXPECT_EQ(r.result["requests"], "5");
  EXPECT_EQ(r.result["captured_responses"], "5");
  EXPECT_EQ(r.result["live_responses"], "5");
  EXPECT_EQ(r.result["reads_compared"], "1");
  EXPECT_EQ(r.result["read_bytes_compared"], "64");
  EXPECT_EQ(r.result["atomics_compared"], "2");
  EXPECT_EQ(r.result["behaviour"], "0");
}

// READ data is judged where the capture determines it: the capture's READ
// returns what the capture's own WRITEs left there.
TEST(Replay, ReadDataIsJudgedWhereTheCaptureDeterminesIt) {
  TraceFile t("readdata");
  const auto data = bytes(64, 9);
  t.write(0, kVa, 64, data);
  t.ack(0, Aeth::ack(1));
  t.read(1, kVa, 64);
  t.read_only(1, 2, data);
  t.read(2, kVa, 64);
  auto other = data;
  other[5] = std::byte{0};
  t.read_only(2, 3, other);  // the application changed it where the capture cannot see: not judged
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.result["reads_compared"], "1");
  EXPECT_EQ(r.result["reads_undetermined"], "1");
  EXPECT_TRUE(r.kinds("behaviour").empty());
}

// A READ of more than the capture's WRITEs wrote: the bytes they wrote are
// compared, the rest (the application's) are not.
TEST(Replay, ReadDataIsComparedWhereItIsDeterminedOnly) {
  TraceFile t("readpart");
  const auto data = bytes(8, 3);
  t.write(0, kVa + 16, 8, data);
  t.ack(0, Aeth::ack(1));
  t.read(1, kVa, 64);
  auto seen = bytes(64, 200);  // the application's bytes around what the WRITE put there
  std::copy(data.begin(), data.end(), seen.begin() + 16);
  t.read_only(1, 2, seen);
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.result["reads_compared"], "1");
  EXPECT_EQ(r.result["read_bytes_compared"], "8");
  EXPECT_TRUE(r.kinds("behaviour").empty());
}

// The capture's responder executed a retransmitted WRITE again (its new bytes
// are what the READ returns); a correct responder acknowledges a duplicate
// without executing it, so its READ returns the first WRITE's bytes.
TEST(Replay, DifferentReadDataIsABehaviourDifference) {
  TraceFile t("readdata2");
  const auto first = bytes(64, 9), second = bytes(64, 77);
  t.write(0, kVa, 64, first);
  t.ack(0, Aeth::ack(1));
  t.write(0, kVa, 64, second);  // the same PSN again, other bytes
  t.ack(0, Aeth::ack(1));
  t.read(1, kVa, 64);
  t.read_only(1, 2, second);
  auto r = t.replay();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.kinds("behaviour"), std::vector<std::string>{"read_data"});
  EXPECT_EQ(r.result["reads_compared"], "1");
}

// A request with an R_Key the capture's responder refused everywhere is
// refused live too: no difference.
TEST(Replay, RefusedByBothIsNoDifference) {
  TraceFile t("refusedboth");
  t.write(0, kVa, 64, bytes(64, 1));
  t.ack(0, Aeth::ack(1));
  t.write(1, kVa + 64, 64, bytes(64, 2), 0x999);  // an R_Key of no MR
  t.ack(1, Aeth::nak(1, NakCode::kRemoteAccessError));
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.kinds("behaviour").empty()) << r.diffs.front()["text"];
}

// A WRITE whose payload is longer than its RETH (the MR is sized from the
// RETH): the capture's responder accepted it, a correct one refuses it.
TEST(Replay, WriteLongerThanItsRethIsRefusedLive) {
  TraceFile t("longwrite");
  t.write(0, kVa, 64, bytes(64, 1));
  t.ack(0, Aeth::ack(1));
  t.write(1, kVa, 64, bytes(128, 2));
  t.ack(1, Aeth::ack(2));
  auto r = t.replay();
  EXPECT_EQ(r.status, 1) << r.err;
  ASSERT_TRUE(has(r.kinds("behaviour"), "nak")) << r.diffs.size();
  for (const Json& d : r.diffs)
    if (d["kind"] == "nak") {
      EXPECT_EQ(d["psn"], "1");
      EXPECT_NE(d["live"].find("NAK invalid request"), std::string::npos) << d["live"];
      EXPECT_NE(d["capture"].find("ACK"), std::string::npos) << d["capture"];
    }
}

// After the live responder refused a request its QP is in the error state:
// what the capture's responder acknowledged later is missing live, and says why.
TEST(Replay, AfterALiveRefusalNothingIsAnswered) {
  TraceFile t("afterrefusal");
  t.write(0, kVa, 64, bytes(64, 1));
  t.ack(0, Aeth::ack(1));
  t.write(1, kVa, 64, bytes(128, 2));  // longer than its RETH: refused live
  t.ack(1, Aeth::ack(2));
  t.send(2, 8);
  t.ack(2, Aeth::ack(3));
  auto r = t.replay();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.kinds("behaviour"), (std::vector<std::string>{"nak", "missing_response"}));
  for (const Json& d : r.diffs)
    if (d["kind"] == "missing_response") {
      EXPECT_NE(d["text"].find("error state"), std::string::npos) << d["text"];
    }
}

// The original responder NAKed (remote access error) a WRITE inside the
// region it had accepted a WRITE to just before: the live one accepts it.
TEST(Replay, RequestTheOriginalResponderRefusedIsAcceptedLive) {
  TraceFile t("refused");
  t.write(0, kVa, 4096, bytes(4096, 3));
  t.ack(0, Aeth::ack(1));
  t.write(1, kVa + 100, 64, bytes(64, 4));
  t.ack(1, Aeth::nak(1, NakCode::kRemoteAccessError));
  auto r = t.replay();
  EXPECT_EQ(r.status, 1) << r.err;
  ASSERT_EQ(r.kinds("behaviour").size(), 1u);
  EXPECT_EQ(r.kinds("behaviour")[0], "nak");
  EXPECT_NE(r.diffs[0]["capture"].find("remote access error"), std::string::npos) << r.diffs[0]["capture"];
  EXPECT_NE(r.diffs[0]["live"].find("ACK"), std::string::npos) << r.diffs[0]["live"];
}

// ACK coalescing is policy: the capture's responder acknowledged a request
// that did not ask (no AckReq); the live one acknowledges it with the next.
TEST(Replay, AckCoalescingIsPolicy) {
  TraceFile t("coalesce");
  t.send(0, 8, false);
  t.ack(0, Aeth::ack(1, 7));
  t.send(1, 8, true);
  t.ack(1, Aeth::ack(2, 7));
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.kinds("policy"), "ack_coalescing"));
  EXPECT_TRUE(has(r.kinds("policy"), "credits"));  // 7 in the capture, 31 live
  EXPECT_TRUE(r.kinds("behaviour").empty());
}

// A capture that begins mid-connection: its PSNs and MSNs do not start at the
// live responder's; both are compared from where the capture begins.
TEST(Replay, CaptureBeginningMidConnection) {
  TraceFile t("midway");
  RoceHeaders mid;  // the end of a SEND whose First is not in the capture: skipped
  mid.bth.opcode = op::kRcSendLast;
  mid.bth.psn = Psn(0xFFFFFE);
  t.add(true, mid, bytes(8, 1));
  t.send(0xFFFFFF, 8);
  t.ack(0xFFFFFF, Aeth::ack(57));
  t.write(0, kVa, 64, bytes(64, 2));
  t.ack(0, Aeth::ack(58));
  t.send(1, 8);
  t.ack(1, Aeth::ack(59));
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.result["requests"], "3");
  EXPECT_EQ(r.result["requests_skipped"], "1");
  EXPECT_TRUE(r.kinds("behaviour").empty());
  EXPECT_EQ(r.kinds("network"), std::vector<std::string>{"msn_start"});
}

// A responder that counts messages otherwise (its MSN stands still after a
// WRITE): a behaviour difference.
TEST(Replay, MsnCountedOtherwiseIsABehaviourDifference) {
  TraceFile t("msn");
  t.send(0, 8);
  t.ack(0, Aeth::ack(1));
  t.write(1, kVa, 64, bytes(64, 2));
  t.ack(1, Aeth::ack(1));  // should be 2
  auto r = t.replay();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.kinds("behaviour"), std::vector<std::string>{"msn"});
}

// --pcap records the live exchange: every request sent and every response.
TEST(Replay, PcapRecordsTheLiveExchange) {
  TraceFile t("pcap");
  t.write(0, kVa, 64, bytes(64, 1));
  t.ack(0, Aeth::ack(1));
  t.send(1, 100);
  t.ack(1, Aeth::ack(2));
  const std::string live = wire::testutil::temp_path("replay_live.pcap");
  auto r = t.replay("--as-fast-as-possible --pcap " + quote(live));
  EXPECT_EQ(r.status, 0) << r.err;
  auto rd = PcapReader::open(live);
  ASSERT_TRUE(rd);
  std::vector<uint8_t> ops;
  for (;;) {
    auto f = rd->next();
    ASSERT_TRUE(f);
    if (!f->has_value()) break;
    auto d = decode_frame(rd->link_type(), (**f).data);
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->icrc_ok());
    ops.push_back(d->roce.hdr.bth.opcode);
    if (d->roce.hdr.bth.opcode == op::kRcWriteOnly) {
      EXPECT_EQ(d->roce.hdr.bth.psn.value(), 0u);  // relative PSNs
    }
  }
  EXPECT_EQ(ops, (std::vector<uint8_t>{op::kRcWriteOnly, op::kRcAck, op::kRcSendOnly, op::kRcAck}));
}

// The live MRs cost the pages the capture writes, not the span of its
// addresses: two WRITEs 2^40 bytes apart under one R_Key (legal on the wire)
// and a READ of each are replayed with one page of each end written, live MR
// and shadow, and every READ byte compared.
TEST(Replay, ASpanOf2To40BytesCostsOnlyThePagesWritten) {
  TraceFile t("span40");
  constexpr uint64_t kFar = kVa + (uint64_t{1} << 40) - 64;
  const auto near = bytes(64, 5), far = bytes(64, 6);
  t.write(0, kVa, 64, near);
  t.ack(0, Aeth::ack(1));
  t.write(1, kFar, 64, far);
  t.ack(1, Aeth::ack(2));
  t.read(2, kVa, 64);
  t.read_only(2, 3, near);
  t.read(3, kFar, 64);
  t.read_only(3, 4, far);
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.diffs.empty()) << r.diffs.front()["kind"] << ": " << r.diffs.front()["text"];
  EXPECT_EQ(r.result["mrs"], "1");
  EXPECT_EQ(r.result["mr_bytes"], std::to_string(uint64_t{1} << 40));
  EXPECT_EQ(r.result["memory_written"], std::to_string(2 * 2 * 4096));  // two pages, MR and shadow
  EXPECT_EQ(r.result["reads_compared"], "2");
  EXPECT_EQ(r.result["read_bytes_compared"], "128");
}

// A span over --max-span: exit 2 before anything is sent, naming the R_Key,
// the VAs, the span and the limit.
TEST(Replay, ASpanOverTheLimitIsAClearError) {
  TraceFile t("spanlimit");
  t.write(0, kVa, 64, bytes(64, 5));
  t.ack(0, Aeth::ack(1));
  t.write(1, kVa + (uint64_t{1} << 40) - 64, 64, bytes(64, 6));
  t.ack(1, Aeth::ack(2));
  auto r = t.replay("--max-span 512");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("R_Key 0x00001234 reach VA 0x7f0000001000..0x800000000fff, a span of 1099511627776 bytes"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("more than the limit of 549755813888 bytes (set with --max-span GIB)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.result["requests"], "");  // nothing was replayed
}

// The pages written count against --max-memory as they are written: WRITEs to
// 200 pages (400 with their shadows) pass 1 MiB (256 pages) and the replay
// stops with exit 2, naming the R_Key and the frame.
TEST(Replay, PagesWrittenOverTheLimitAreAClearError) {
  TraceFile t("pagelimit");
  for (uint32_t i = 0; i < 200; ++i) {
    t.write(i, kVa + uint64_t{i} * 4096, 64, bytes(64, static_cast<uint8_t>(i)));
    t.ack(i, Aeth::ack(i + 1));
  }
  auto r = t.replay("--max-memory 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("more than the memory limit of 1048576 bytes of pages"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(set with --max-memory MIB)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("R_Key 0x00001234 passed it at frame 257"), std::string::npos) << r.err;
  // The same capture within the default limit: 400 pages written.
  r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.result["memory_written"], std::to_string(400 * 4096));
}

// Ranges that reach past 2^64 - 1 are in no MR: a WRITE of 64 bytes at
// 2^64 - 16, a READ of 64 at 2^64 - 1, a FETCH_ADD at 2^64 - 8. The capture's
// responder refused each: the live one refuses it too, no difference. It
// accepted it: the live one refuses it (remote access error), a behaviour
// difference. Either way the R_Key's span is its one sane WRITE.
TEST(Replay, RangesReachingPast2To64AreRefusedLive) {
  const uint64_t kTop = ~uint64_t{0};
  for (const char* op : {"write", "read", "atomic"}) {
    for (const bool accepted : {false, true}) {
      SCOPED_TRACE(std::string(op) + (accepted ? " accepted" : " refused") + " by the capture's responder");
      TraceFile t(std::string("wrap_") + op + (accepted ? "_acked" : "_naked"));
      t.write(0, kVa, 64, bytes(64, 1));
      t.ack(0, Aeth::ack(1));
      if (op[0] == 'w') t.write(1, kTop - 15, 64, bytes(64, 2));
      if (op[0] == 'r') t.read(1, kTop, 64);
      if (op[0] == 'a') t.fetch_add(1, kTop - 7, 1);
      if (!accepted) t.ack(1, Aeth::nak(1, NakCode::kRemoteAccessError));
      else if (op[0] == 'w') t.ack(1, Aeth::ack(2));
      else if (op[0] == 'r') t.read_only(1, 2, bytes(64, 3));
      else t.atomic_ack(1, 2, 0);
      auto r = t.replay();
      EXPECT_EQ(r.result["mr_bytes"], "64");
      EXPECT_EQ(r.result["requests"], "2");
      if (!accepted) {
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_TRUE(r.kinds("behaviour").empty()) << r.diffs.front()["text"];
      } else {
        EXPECT_EQ(r.status, 1) << r.err;
        ASSERT_EQ(r.kinds("behaviour"), (std::vector<std::string>{"nak"}));
        EXPECT_NE(r.diffs[0]["live"].find("NAK remote access error"), std::string::npos) << r.diffs[0]["live"];
      }
    }
  }
}

// An input of fuzz_replay_capture's kept corpus: R_Key 0x104 is written at VA
// 0x1000 and fetch-added at 0x8000000000001000, a span of 2^63 + 8 bytes,
// over --max-span: a clear error.
TEST(Replay, TheFuzzersSpanFindingIsAClearError) {
  const std::string finding = std::string(ROCELAB_SOURCE_DIR) + "/tests/fuzz/kept/replay_capture/span-overflow.pcap";
  auto r = run(wire::testutil::kRocelab + " replay " + quote(finding));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("R_Key 0x00000104 reach VA 0x1000..0x8000000000001007, a span of 9223372036854775816 bytes: "
                       "the live MRs would span more than the limit of 1099511627776 bytes (set with --max-span GIB)"),
            std::string::npos)
      << r.err;
}

// A READ resent with a RETH asking for more than the original (1 GiB here,
// the original 16 bytes) is not served again: its responses would pass the
// original's last PSN. The live responder drops it and answers the original
// once (the fuzzer's input for it: kept/replay_capture/duplicate-read-1gib.pcap).
TEST(Replay, ADuplicateReadLongerThanTheOriginalIsDropped) {
  TraceFile t("dupread");
  const auto data = bytes(16, 4);
  t.write(0, kVa, 16, data);
  t.ack(0, Aeth::ack(1));
  t.read(1, kVa, 16);
  t.read_only(1, 2, data);
  t.read(1, kVa, 1u << 30);
  auto r = t.replay();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.result["requests"], "3");
  EXPECT_EQ(r.result["live_responses"], "2");
  EXPECT_EQ(r.result["reads_compared"], "1");
}

TEST(Replay, BadFilesAndArgumentsExit2) {
  auto r = run(wire::testutil::kRocelab + " replay /nonexistent/x.pcap");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot read as a capture"), std::string::npos) << r.err;
  const std::string garbage = wire::testutil::temp_path("replay_garbage.pcap");
  {
    std::FILE* f = std::fopen(garbage.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 4096; ++i) std::fputc((i * 7919) & 0xFF, f);
    std::fclose(f);
  }
  r = run(wire::testutil::kRocelab + " replay " + quote(garbage));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot read as a capture"), std::string::npos) << r.err;
  // A capture cut inside its last record: replayed up to there, exit 2.
  TraceFile t("cut");
  t.send(0, 8);
  t.ack(0, Aeth::ack(1));
  t.send(1, 8);
  t.ack(1, Aeth::ack(2));
  t.close();
  const std::string whole = wire::testutil::slurp(t.path());
  const std::string cut = wire::testutil::temp_path("replay_cut.pcap");
  {
    std::FILE* f = std::fopen(cut.c_str(), "wb");
    std::fwrite(whole.data(), 1, whole.size() - 5, f);
    std::fclose(f);
  }
  r = run(wire::testutil::kRocelab + " replay " + quote(cut));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("damaged"), std::string::npos) << r.err;
  r = run(wire::testutil::kRocelab + " replay --to-scenario " + quote(cut + ".textproto") + " " + quote(cut));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("damaged"), std::string::npos) << r.err;
  r = run(wire::testutil::kRocelab + " replay --qp 0x99 " + quote(t.path()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no connection has QP 0x000099"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--qp 0x000011"), std::string::npos) << r.err;  // the choices
  r = run(wire::testutil::kRocelab + " replay --qp banana " + quote(t.path()));
  EXPECT_EQ(r.status, 2);
  r = run(wire::testutil::kRocelab + " replay --speed 0 " + quote(t.path()));
  EXPECT_EQ(r.status, 2);
  r = run(wire::testutil::kRocelab + " replay --role responder " + quote(t.path()));
  EXPECT_EQ(r.status, 2);
  // A capture with nothing to replay.
  TraceFile empty("empty");
  empty.close();
  r = run(wire::testutil::kRocelab + " replay " + quote(empty.path()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no RC or UC connection"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rocelab::replay::test
