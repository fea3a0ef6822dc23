// PcapWriter / PcapReader: what the writer puts in a file, libpcap reads back
// byte for byte, with its timestamps; concurrent writers lose nothing.
// FrameReader: frames numbered from 1, and the end of a damaged file told apart
// from the end of a whole one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "capture/frames.h"
#include "capture/pcap_reader.h"
#include "capture/pcap_writer.h"
#include "wire/frame.h"

namespace rocelab::capture {
namespace {

using namespace wire;

using namespace std::chrono_literals;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "rocelab_" + std::to_string(::getpid()) + "_" + name;
}

// A transport packet (BTH .. ICRC) for an RC SEND Only of n payload bytes, and its addresses.
std::vector<std::byte> send_only(IpUdpInfo& ip, uint32_t psn, size_t n) {
  ip.src = IpAddr::v4(127, 0, 0, 1);
  ip.dst = IpAddr::v4(127, 0, 0, 2);
  ip.sport = 49152;
  RoceHeaders h;
  h.bth.opcode = op::kRcSendOnly;
  h.bth.dest_qpn = Qpn(0x11);
  h.bth.psn = Psn(psn);
  std::vector<std::byte> payload(n, std::byte{0xA5});
  std::vector<std::byte> frame(kMaxFrameLen);
  auto len = build_frame(frame, ip, h, payload, /*with_ethernet=*/false);
  EXPECT_TRUE(len);
  const size_t hdrs = ip_udp_header_len(false);
  return {frame.begin() + hdrs, frame.begin() + *len};
}

TEST(PcapIo, WriteRoceThenReadBack) {
  const std::string path = temp_path("roundtrip.pcap");
  auto w = PcapWriter::open(path, {.nanosecond = true});
  ASSERT_TRUE(w) << w.error().message();
  IpUdpInfo ip;
  auto pkt = send_only(ip, 7, 13);
  ASSERT_FALSE(w->write_roce(1'700'000'000s + 123'456'789ns, ip, pkt));
  ASSERT_FALSE(w->write_roce(1'700'000'001s, ip, pkt));
  EXPECT_EQ(w->packets(), 2u);
  ASSERT_FALSE(w->close());
  EXPECT_EQ(w->write(0ns, pkt), make_error_code(WireErrc::kClosed));

  auto r = PcapReader::open(path);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->link_type(), 1);
  auto f = r->next();
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->ts, 1'700'000'000s + 123'456'789ns);
  EXPECT_EQ((*f)->data.size(), kEthHeaderLen + ip_udp_header_len(false) + pkt.size());
  auto d = decode_frame(r->link_type(), (*f)->data);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_TRUE(d->icrc_ok());  // the synthesized IP header is the one the ICRC was computed over
  EXPECT_EQ(d->roce.hdr.bth.psn, Psn(7));
  EXPECT_EQ(d->roce.payload.size(), 13u);
  EXPECT_EQ(d->ip.info.src, ip.src);
  EXPECT_EQ(d->ip.info.sport, 49152);
  f = r->next();
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->ts, 1'700'000'001s);
  f = r->next();
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->has_value());  // end of file
  ::unlink(path.c_str());
}

TEST(PcapIo, MicrosecondFilesRoundDown) {
  const std::string path = temp_path("micro.pcap");
  auto w = PcapWriter::open(path);
  ASSERT_TRUE(w);
  const std::vector<std::byte> frame(60, std::byte{0});
  ASSERT_FALSE(w->write(5s + 1'234'567ns, frame));
  ASSERT_FALSE(w->close());
  auto r = PcapReader::open(path);
  ASSERT_TRUE(r);
  auto f = r->next();
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->ts, 5s + 1'234'000ns);
  ::unlink(path.c_str());
}

TEST(PcapIo, SnaplenCutsLongFrames) {
  const std::string path = temp_path("snap.pcap");
  auto w = PcapWriter::open(path, {.snaplen = 64});
  ASSERT_TRUE(w);
  const std::vector<std::byte> frame(100, std::byte{1});
  ASSERT_FALSE(w->write(0ns, frame));
  ASSERT_FALSE(w->close());
  auto r = PcapReader::open(path);
  ASSERT_TRUE(r);
  auto f = r->next();
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->data.size(), 64u);
  EXPECT_EQ((*f)->orig_len, 100u);
  ::unlink(path.c_str());
}

// The tap is called from several engine threads: every packet arrives whole.
TEST(PcapIo, ConcurrentWritersLoseNothing) {
  const std::string path = temp_path("threads.pcap");
  auto w = PcapWriter::open(path);
  ASSERT_TRUE(w);
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w, t] {
      IpUdpInfo ip;
      for (int i = 0; i < kPerThread; ++i) {
        auto pkt = send_only(ip, static_cast<uint32_t>(t * kPerThread + i), 1 + (i % 50));
        EXPECT_FALSE(w->write_roce(std::chrono::microseconds(i), ip, pkt));
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_FALSE(w->close());
  auto r = PcapReader::open(path);
  ASSERT_TRUE(r);
  std::vector<bool> seen(kThreads * kPerThread, false);
  for (;;) {
    auto f = r->next();
    ASSERT_TRUE(f);
    if (!f->has_value()) break;
    auto d = decode_frame(r->link_type(), (*f)->data);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->icrc_ok());
    seen.at(d->roce.hdr.bth.psn.value()) = true;
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << "PSN " << i;
  ::unlink(path.c_str());
}

TEST(PcapIo, WriteRoceNeedsEthernetOrRawIp) {
  const std::string path = temp_path("sll.pcap");
  auto w = PcapWriter::open(path, {.link_type = 113});
  ASSERT_TRUE(w);
  IpUdpInfo ip;
  auto pkt = send_only(ip, 1, 1);
  EXPECT_EQ(w->write_roce(0ns, ip, pkt), make_error_code(WireErrc::kUnsupportedLinkType));
  const std::vector<std::byte> huge(kMaxRoceLen + 1);
  auto w2 = PcapWriter::open(path);
  ASSERT_TRUE(w2);
  EXPECT_EQ(w2->write_roce(0ns, ip, huge), make_error_code(WireErrc::kOversized));
  ::unlink(path.c_str());
}

TEST(PcapIo, OpenErrorsAreTyped) {
  std::string detail;
  auto missing = PcapReader::open(temp_path("does-not-exist.pcap"), &detail);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), std::error_code(ENOENT, std::generic_category()));
  EXPECT_FALSE(detail.empty());

  const std::string text = temp_path("not-a-capture.txt");
  std::ofstream(text) << "hello, this is not a capture file\n";
  auto bad = PcapReader::open(text, &detail);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), make_error_code(WireErrc::kNotCapture));
  ::unlink(text.c_str());

  auto nodir = PcapWriter::open("/nonexistent-dir/x.pcap");
  ASSERT_FALSE(nodir);
  EXPECT_EQ(nodir.error(), std::error_code(ENOENT, std::generic_category()));
}

TEST(FrameReader, NumbersFramesAndTellsDamageFromTheEnd) {
  const std::string path = temp_path("frames.pcap");
  {
    auto w = PcapWriter::open(path);
    ASSERT_TRUE(w);
    for (uint32_t psn = 0; psn < 3; ++psn) {
      IpUdpInfo ip;
      auto pkt = send_only(ip, psn, 8 + psn);
      ASSERT_FALSE(w->write_roce(std::chrono::seconds(psn), ip, pkt));
    }
  }
  std::string error;
  auto r = FrameReader::open(path, &error);
  ASSERT_TRUE(r) << error;
  uint64_t n = 0;
  while (const Frame* f = r->next()) {
    ++n;
    EXPECT_EQ(f->number, n);
    EXPECT_EQ(f->ts, std::chrono::seconds(n - 1));
  }
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(r->frames(), 3u);
  EXPECT_EQ(r->damaged(), "");
  EXPECT_EQ(r->next(), nullptr);  // stays at the end

  // The same file cut in the middle of its last record: two frames, then the damage.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 5);
  auto cut = FrameReader::open(path, &error);
  ASSERT_TRUE(cut) << error;
  n = 0;
  while (cut->next() != nullptr) ++n;
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(cut->frames(), 2u);
  EXPECT_NE(cut->damaged(), "");
  EXPECT_EQ(cut->next(), nullptr);

  // Counting RoCEv2 packets over the same reader.
  const CaptureRead c = for_each_roce_frame(path, true, &error, [&](uint64_t no, auto, const DecodedFrame& d) {
    EXPECT_EQ(d.roce.hdr.bth.psn.value(), no - 1);
    EXPECT_TRUE(d.icrc_ok());
  });
  EXPECT_TRUE(c.readable);
  EXPECT_EQ(c.frames, 2u);
  EXPECT_EQ(c.packets, 2u);
  EXPECT_EQ(c.damaged, cut->damaged());
  ::unlink(path.c_str());
}

TEST(FrameReader, SaysWhyAFileIsNotACapture) {
  std::string error;
  EXPECT_FALSE(FrameReader::open(temp_path("does-not-exist.pcap"), &error));
  EXPECT_EQ(error, std::error_code(ENOENT, std::generic_category()).message());

  const std::string text = temp_path("not-a-capture.txt");
  std::ofstream(text) << "hello, this is not a capture file\n";
  EXPECT_FALSE(FrameReader::open(text, &error));
  // Ours, then libpcap's own words.
  EXPECT_EQ(error.rfind(make_error_code(WireErrc::kNotCapture).message() + " (", 0), 0u) << error;
  ::unlink(text.c_str());
}

}  // namespace
}  // namespace rocelab::capture
