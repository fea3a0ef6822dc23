// The `rocelab decode` / `rocelab opcodes` command lines behave as documented
// (docs/wire.md): output lines, exit codes, JSON, pcapng input, and the
// reproducibility of traces/opcodes.pcap. Label "tools" (runs rocelab, tshark, python).
#include <gtest/gtest.h>

#include "capture/pcap_reader.h"
#include "capture/pcap_writer.h"
#include "tests/wire/run_util.h"
#include "wire/frame.h"
#include "wire/ib_native.h"

namespace rocelab::wire {
namespace {

using capture::PcapWriter;

using namespace testutil;

// `rocelab opcodes --pcap` writes traces/opcodes.pcap again, byte for byte.
TEST(Cli, OpcodesPcapIsReproducible) {
  const std::string out = temp_path("opcodes.pcap");
  Output r = run(quote(kRocelab) + " opcodes --pcap " + quote(out));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string fresh = slurp(out), checked_in = slurp(kOpcodesPcap);
  EXPECT_FALSE(checked_in.empty());
  EXPECT_TRUE(fresh == checked_in) << "traces/opcodes.pcap is stale: regenerate it with "
                                      "`rocelab opcodes --pcap traces/opcodes.pcap`";
  ::unlink(out.c_str());
}

TEST(Cli, OpcodesTableListsEveryOpcode) {
  Output r = run(quote(kRocelab) + " opcodes");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("0x0c   RC        RC RDMA READ Request"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("BTH+DETH+ImmDt+payload (24)"), std::string::npos);
  EXPECT_EQ(split(r.out, '\n').size(), 1u + 61u);  // heading + every opcode in the table
}

TEST(Cli, DecodeOpcodesCaptureWithSummary) {
  Output r = run(quote(kRocelab) + " decode --summary " + quote(kOpcodesPcap));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = split(r.out, '\n');
  ASSERT_GT(lines.size(), static_cast<size_t>(kOpcodesPackets));
  EXPECT_EQ(lines[0],
            "     1 0.000000 192.0.2.1 -> 192.0.2.2 RC SEND First QP=0x000012 PSN=1000 len=34 "
            "ICRC ok");
  EXPECT_NE(r.out.find("RC RDMA WRITE First QP=0x000012 PSN=1006 RETH[va=0x00007f5a1272e000 "
                       "rkey=0x00a1b2c3 len=40] len=40 ICRC ok"),
            std::string::npos);
  EXPECT_NE(r.out.find("RC CmpSwap QP=0x000012 PSN=1013 A AtomicETH[va=0x00007f5a56780008 "
                       "rkey=0x00a1b2c4 swap=0x1111222233334444 cmp=0x5555666677778888]"),
            std::string::npos);
  EXPECT_NE(r.out.find("UD SEND Only with Immediate QP=0x000032 PSN=3001 SE "
                       "DETH[qkey=0x11111111 srcqp=0x000031] ImmDt=0x12345678 len=48 ICRC ok"),
            std::string::npos);
  EXPECT_NE(r.out.find("AETH[RNR NAK timer=14 (1280 us) MSN=7]"), std::string::npos);
  EXPECT_NE(r.out.find(": 41 frames, 41 RoCEv2 (0 bad ICRC), 0 malformed, 0 not RoCEv2"),
            std::string::npos);
  // One PSN space: 192.0.2.1's requests to QP 0x12 and the responses to its QP 0x11.
  EXPECT_NE(r.out.find("192.0.2.1 qp 0x000011 -> 192.0.2.2 qp 0x000012 (RC): 27 packets (18 requests, "
                       "9 responses), request PSN 1000..1016"),
            std::string::npos);
  EXPECT_NE(r.out.find("retransmitted PSNs: 1 (1004)"), std::string::npos);
  EXPECT_NE(r.out.find("NAKs: 0 (PSN sequence error) x1, 2 (remote access error) x1; RNR NAKs: 1"),
            std::string::npos);
}

// Exit 2 and one line naming the file; the other files are still decoded.
TEST(Cli, UnreadableFilesExit2) {
  const std::string text = temp_path("notes.txt");
  std::ofstream(text) << "this is not a capture\n";
  Output r = run(quote(kRocelab) + " decode " + quote(text) + " " + quote(kOpcodesPcap));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "rocelab decode: " + text +
                       ": cannot read as a capture: not a pcap or pcapng capture (unknown file "
                       "format)\n");
  EXPECT_NE(r.out.find("41 RoCEv2"), std::string::npos);
  r = run(quote(kRocelab) + " decode " + quote(text + ".missing"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(split(r.err, '\n').size(), 1u);
  EXPECT_NE(r.err.find(text + ".missing: cannot read as a capture: No such file or directory"),
            std::string::npos);
  ::unlink(text.c_str());
}

// A capture cut in the middle of a record: the frames before the cut are
// decoded, then one line names the file and the exit status is 2.
TEST(Cli, DamagedCaptureExits2AfterTheGoodFrames) {
  const std::string cut = temp_path("cut.pcap");
  const std::string whole = slurp(kOpcodesPcap);
  // pcap header 24 bytes, then frame 1: record header 16 + 94 bytes; cut inside frame 2.
  std::ofstream(cut, std::ios::binary) << whole.substr(0, 24 + 16 + 94 + 16 + 10);
  Output r = run(quote(kRocelab) + " decode " + quote(cut));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(split(r.out, '\n').size(), 2u) << r.out;  // frame 1 and the file line
  EXPECT_NE(r.out.find("RC SEND First QP=0x000012 PSN=1000"), std::string::npos);
  EXPECT_EQ(split(r.err, '\n').size(), 1u) << r.err;
  EXPECT_NE(r.err.find(cut + ": damaged capture after frame 1"), std::string::npos) << r.err;
  ::unlink(cut.c_str());
}

// A bad ICRC and a malformed packet each print their line, are counted, do not
// stop decoding, and make the exit status 1. An SLL2 capture, like `tcpdump -i any`.
TEST(Cli, BadIcrcAndMalformedPacketsExit1) {
  std::vector<std::string> storage;
  auto frames = decode_file(kOpcodesPcap, storage);
  ASSERT_GE(storage.size(), 5u);
  const std::string path = temp_path("bad.pcap");
  {
    auto w = PcapWriter::open(path, {.link_type = 276});
    ASSERT_TRUE(w);
    auto sll2 = [](std::string eth_frame) {  // Ethernet -> SLL2: same ethertype, 20-byte header
      std::string h(20, '\0');
      h[0] = eth_frame[12];
      h[1] = eth_frame[13];
      h[7] = 1;
      h[11] = 6;
      return h + eth_frame.substr(kEthHeaderLen);
    };
    auto put = [&](const std::string& f) {
      ASSERT_FALSE(w->write(std::chrono::seconds(1), std::as_bytes(std::span(f))));
    };
    put(sll2(storage[0]));                        // good
    std::string bad_icrc = sll2(storage[4]);
    bad_icrc[bad_icrc.size() - 6] ^= 0x01;        // a pad bit flipped: ICRC BAD
    put(bad_icrc);
    std::string bad_tver = sll2(storage[4]);
    bad_tver[20 + kIpv4HeaderLen + kUdpHeaderLen + 1] |= 0x01;  // TVer 1
    put(bad_tver);
    std::string arp(28 + 20, '\0');
    arp[0] = 0x08;
    arp[1] = 0x06;
    put(arp);                                     // not RoCE: skipped
    put(sll2(storage[5]));                        // decoding goes on
    ASSERT_FALSE(w->close());
  }
  Output r = run(quote(kRocelab) + " decode " + quote(path));
  EXPECT_EQ(r.status, 1) << r.out;
  const auto lines = split(r.out, '\n');
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_NE(lines[0].find("RC SEND First QP=0x000012 PSN=1000 len=34 ICRC ok"), std::string::npos);
  EXPECT_NE(lines[1].find("RC SEND Only QP=0x000012 PSN=1004 A SE len=33 ICRC BAD (carried"),
            std::string::npos);
  EXPECT_NE(lines[2].find("     3 0.000000 192.0.2.1 -> 192.0.2.2 MALFORMED: BTH TVer is not 0 "
                          "(opcode 0x04)"),
            std::string::npos)
      << lines[2];
  EXPECT_NE(lines[3].find("     5 "), std::string::npos);
  EXPECT_NE(lines[4].find("5 frames, 3 RoCEv2 (1 bad ICRC), 1 malformed, 1 not RoCEv2 (skipped); "
                          "link type LINUX_SLL2"),
            std::string::npos)
      << lines[4];
  ::unlink(path.c_str());
}

// --json: every line is a JSON object Python's json module accepts, with the
// numbers as numbers, even for a file name full of characters that need escaping.
TEST(Cli, JsonLinesAreValidJson) {
  const std::string odd = temp_path("we\"ird\\name\t\xff\xfe.pcap");
  {
    std::ofstream(odd, std::ios::binary) << slurp(kOpcodesPcap);
  }
  const std::string check =
      "/usr/bin/python3 -c 'import json,sys\n"
      "objs=[json.loads(l) for l in sys.stdin]\n"
      "p=[o for o in objs if o[\"type\"]==\"packet\"]\n"
      "assert len(p)==41, len(p)\n"
      "assert all(isinstance(o[\"psn\"],int) and isinstance(o[\"icrc_ok\"],bool) for o in p)\n"
      "w=[o for o in p if o[\"opcode\"]==6][0]\n"
      "assert w[\"reth\"]=={\"va\":0x7f5a1272e000,\"rkey\":0xa1b2c3,\"dma_len\":40}, w\n"
      "a=[o for o in p if o[\"opcode\"]==17]\n"
      "assert a[1][\"aeth\"]=={\"syndrome\":0x2e,\"kind\":\"RNR NAK\",\"timer\":14,\"timer_us\":1280,\"msn\":7}\n"
      "f=[o for o in objs if o[\"type\"]==\"file\"][0]\n"
      "assert f[\"file\"].endswith(\"we\\\"ird\\\\name\\t\\ufffd\\ufffd.pcap\"), f[\"file\"]\n"
      "q=[o for o in objs if o[\"type\"] in (\"psn_space\",\"ud_flow\")]\n"
      "assert len(q)==3 and q[0][\"retransmitted_psns\"]==[1004] and q[0][\"responses\"]==9, q\n"
      "print(\"ok\")'";
  Output r = run(quote(kRocelab) + " decode --json --summary " + quote(odd) + " | " + check);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  ::unlink(odd.c_str());
}

// pcapng (what Wireshark and `tshark -i` write) decodes to the same lines as pcap.
TEST(Cli, PcapngDecodesLikePcap) {
  const std::string ng = temp_path("opcodes.pcapng");
  Output conv = run("tshark -F pcapng -r " + quote(kOpcodesPcap) + " -w " + quote(ng));
  ASSERT_EQ(conv.status, 0) << conv.err;
  ASSERT_EQ(slurp(ng).substr(0, 4), std::string("\x0a\x0d\x0d\x0a", 4));  // pcapng SHB
  Output a = run(quote(kRocelab) + " decode " + quote(kOpcodesPcap));
  Output b = run(quote(kRocelab) + " decode " + quote(ng));
  EXPECT_EQ(b.status, 0) << b.err;
  auto la = split(a.out, '\n'), lb = split(b.out, '\n');
  ASSERT_EQ(la.size(), lb.size());
  la.pop_back();  // the per-file line names the file
  lb.pop_back();
  EXPECT_EQ(la, lb);
  ::unlink(ng.c_str());
}

}  // namespace
}  // namespace rocelab::wire
