// Judges outside our code: Wireshark (tshark) reads our packets the way our
// decoder does, and scapy computes the same ICRCs. These run external programs
// (ctest label "tools"); `make` installs them, so a missing program is a
// failure, not a skip.
#include <gtest/gtest.h>

#include "tests/wire/run_util.h"
#include "wire/frame.h"
#include "wire/ib_native.h"
#include "wire/pcap_reader.h"
#include "wire/pcap_writer.h"

namespace rocelab::wire {
namespace {

using namespace testutil;

// Heuristic payload dissectors that claim SEND payloads and then call them
// malformed (notes/rxe-and-wire.md); tftp: oferby's peer uses UDP source port 69.
const std::string kTshark =
    "tshark -n --disable-protocol rpcordma --disable-protocol smb_direct "
    "--disable-protocol nvme-rdma --disable-protocol iser --disable-protocol lnet "
    "--disable-protocol smc --disable-protocol infiniband_sdp --disable-protocol fcoib "
    "--disable-protocol tftp";

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

}  // namespace
}  // namespace rocelab::wire
