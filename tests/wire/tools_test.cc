// Judges outside our code: Wireshark (tshark) reads our packets the way our
// decoder does, scapy computes the same ICRCs, and the `rocelab decode` /
// `rocelab opcodes` command lines behave as documented (docs/wire.md).
// These run external programs (ctest label "tools"); `make` installs them, so a
// missing program is a failure, not a skip.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "wire/frame.h"
#include "wire/ib_native.h"
#include "wire/pcap_reader.h"
#include "wire/pcap_writer.h"

namespace rocelab::wire {
namespace {

const std::string kOpcodesPcap = std::string(ROCELAB_SOURCE_DIR) + "/traces/opcodes.pcap";
const std::string kRocelab = ROCELAB_BIN;
constexpr int kOpcodesPackets = 41;

// Heuristic payload dissectors that claim SEND payloads and then call them
// malformed (notes/rxe-and-wire.md); tftp: oferby's peer uses UDP source port 69.
const std::string kTshark =
    "tshark -n --disable-protocol rpcordma --disable-protocol smb_direct "
    "--disable-protocol nvme-rdma --disable-protocol iser --disable-protocol lnet "
    "--disable-protocol smc --disable-protocol infiniband_sdp --disable-protocol fcoib "
    "--disable-protocol tftp";

struct Output {
  int status = -1;
  std::string out, err;
};

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "rocelab_tools_" + std::to_string(::getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Output run(const std::string& cmd) {
  const std::string err = temp_path("stderr");
  Output r;
  FILE* p = ::popen((cmd + " 2>" + quote(err)).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  ::unlink(err.c_str());
  return r;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

std::vector<DecodedFrame> decode_file(const std::string& path, std::vector<std::string>& storage) {
  std::vector<DecodedFrame> out;
  auto r = PcapReader::open(path);
  EXPECT_TRUE(r) << path;
  if (!r) return out;
  storage.reserve(1024);  // frames point into storage: no reallocation
  for (;;) {
    auto f = r->next();
    if (!f || !f->has_value()) break;
    storage.emplace_back(reinterpret_cast<const char*>((*f)->data.data()), (*f)->data.size());
    auto d = decode_frame(r->link_type(), std::as_bytes(std::span(storage.back())));
    EXPECT_TRUE(d) << path << " frame " << storage.size();
    if (d) out.push_back(*d);
  }
  return out;
}

uint64_t num(const std::string& s, int base = 0) { return std::stoull(s, nullptr, base); }

// tshark -T fields, one row per frame, in this column order.
const char* const kFields[] = {
    "frame.number", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
    "infiniband.bth.a", "infiniband.bth.se", "infiniband.bth.padcnt", "infiniband.bth.p_key",
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt", "infiniband.atomicacketh.origremdt", "infiniband.deth.q_key",
    "infiniband.deth.srcqp", "infiniband.immdt", "infiniband.ieth", "data.len",
    "infiniband.invariant.crc", "_ws.malformed", "_ws.expert.severity"};
enum Col {
  kFrame, kOpcode, kDestQp, kPsn, kA, kSe, kPad, kPkey, kVa, kRkey, kDmaLen, kSyndrome, kMsn,
  kSwap, kCmp, kOrig, kQkey, kSrcQp, kImm, kIeth, kDataLen, kCrc, kMalformed, kExpert, kNumCols
};

std::vector<std::vector<std::string>> tshark_rows(const std::string& path) {
  std::string cmd = kTshark + " -r " + quote(path) + " -T fields -E occurrence=f -E separator=/t";
  for (const char* f : kFields) cmd += std::string(" -e ") + f;
  Output r = run(cmd);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.err;
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : split(r.out, '\n')) {
    auto cols = split(line, '\t');
    cols.resize(kNumCols);
    rows.push_back(cols);
  }
  return rows;
}

uint32_t bswap(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24);
}

// Every field of every packet in traces/opcodes.pcap, as Wireshark reads it.
TEST(Tshark, AgreesOnEveryFieldOfTheOpcodesCapture) {
  std::vector<std::string> storage;
  const auto ours = decode_file(kOpcodesPcap, storage);
  const auto rows = tshark_rows(kOpcodesPcap);
  ASSERT_EQ(ours.size(), static_cast<size_t>(kOpcodesPackets));
  ASSERT_EQ(rows.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const auto& c = rows[i];
    const RoceHeaders& h = ours[i].roce.hdr;
    const OpInfo& info = h.info();
    SCOPED_TRACE("frame " + c[kFrame] + " " + std::string(info.name));
    ASSERT_FALSE(c[kOpcode].empty()) << "tshark did not decode InfiniBand";
    EXPECT_EQ(num(c[kOpcode]), info.code);
    EXPECT_EQ(num(c[kDestQp]), h.bth.dest_qpn.value());
    EXPECT_EQ(num(c[kPsn]), h.bth.psn.value());
    EXPECT_EQ(num(c[kA]), h.bth.ack_req);
    EXPECT_EQ(num(c[kSe]), h.bth.se);
    EXPECT_EQ(num(c[kPad]), h.bth.pad_count);
    EXPECT_EQ(num(c[kPkey]), h.bth.pkey);
    // RETH and AtomicETH share Wireshark's infiniband.reth.va / r_key fields.
    if (info.carries(Hdr::kReth)) {
      EXPECT_EQ(num(c[kVa]), h.reth.va);
      EXPECT_EQ(num(c[kRkey]), h.reth.rkey);
      EXPECT_EQ(num(c[kDmaLen]), h.reth.dma_len);
    } else if (info.carries(Hdr::kAtomicEth)) {
      EXPECT_EQ(num(c[kVa]), h.atomic_eth.va);
      EXPECT_EQ(num(c[kRkey]), h.atomic_eth.rkey);
      EXPECT_EQ(num(c[kSwap]), h.atomic_eth.swap_add);
      EXPECT_EQ(num(c[kCmp]), h.atomic_eth.compare);
    } else {
      EXPECT_EQ(c[kVa], "");
      EXPECT_EQ(c[kSwap], "");
    }
    if (info.carries(Hdr::kAeth)) {
      EXPECT_EQ(num(c[kSyndrome]), h.aeth.syndrome);
      EXPECT_EQ(num(c[kMsn]), h.aeth.msn);
    } else {
      EXPECT_EQ(c[kSyndrome], "");
    }
    if (info.carries(Hdr::kAtomicAckEth)) {
      EXPECT_EQ(num(c[kOrig]), h.atomic_ack_eth.orig);
    } else {
      EXPECT_EQ(c[kOrig], "");
    }
    if (info.carries(Hdr::kDeth)) {
      EXPECT_EQ(num(c[kQkey]), h.deth.qkey);
      EXPECT_EQ(num(c[kSrcQp]), h.deth.src_qpn.value());
    } else {
      EXPECT_EQ(c[kQkey], "");
    }
    if (info.carries(Hdr::kImmDt)) {
      EXPECT_EQ(num(c[kImm], 16), h.immdt.imm);
    } else {
      EXPECT_EQ(c[kImm], "");
    }
    if (info.carries(Hdr::kIeth)) {
      EXPECT_EQ(num(c[kIeth], 16), h.ieth.rkey);
    } else {
      EXPECT_EQ(c[kIeth], "");
    }
    // Wireshark's data is payload + pad (it shows no pad of its own).
    const size_t body = ours[i].roce.payload.size() + h.bth.pad_count;
    if (body > 0) {
      EXPECT_EQ(num(c[kDataLen]), body);
    } else {
      EXPECT_EQ(c[kDataLen], "");
    }
    // Wireshark shows the ICRC bytes as a big-endian number; we load them little-endian.
    EXPECT_EQ(num(c[kCrc]), bswap(ours[i].roce.icrc));
    EXPECT_EQ(c[kMalformed], "");
    EXPECT_EQ(c[kExpert], "");
  }
}

// The real captures: the BTH of every RoCEv2 packet, and no malformed packet.
TEST(Tshark, AgreesOnTheRealCaptures) {
  const std::string dir = std::string(ROCELAB_SHARED_DIR) + "/traces/public/";
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

// scapy.contrib.roce computes every ICRC of traces/opcodes.pcap as we do.
TEST(Scapy, ComputesTheSameIcrcs) {
  Output r = run("/usr/bin/python3 " + quote(std::string(ROCELAB_SOURCE_DIR) + "/tests/wire/scapy_icrc.py") +
              " " + quote(kOpcodesPcap));
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> storage;
  const auto ours = decode_file(kOpcodesPcap, storage);
  const auto lines = split(r.out, '\n');
  ASSERT_EQ(lines.size(), ours.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto f = split(lines[i], ' ');
    ASSERT_EQ(f.size(), 3u) << lines[i];
    char wire[9];
    std::snprintf(wire, sizeof wire, "%08x", bswap(ours[i].icrc_computed));
    EXPECT_EQ(f[0], std::to_string(i + 1));
    EXPECT_EQ(f[2], wire) << "frame " << i + 1 << ": scapy computes " << f[2];
    EXPECT_EQ(f[1], f[2]) << "frame " << i + 1 << ": carried ICRC differs from scapy's";
  }
}

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
  EXPECT_NE(r.out.find("192.0.2.1 -> 192.0.2.2 QP 0x000012: 18 packets, PSN 1000..1016"),
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
      "q=[o for o in objs if o[\"type\"]==\"qp\"]\n"
      "assert len(q)==4 and q[0][\"retransmitted_psns\"]==[1004], q\n"
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
