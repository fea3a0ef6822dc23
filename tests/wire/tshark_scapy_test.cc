// Judges outside our code: Wireshark (tshark) reads our packets the way our
// decoder does, and scapy computes the same ICRCs. These run external programs
// (ctest label "tools"); `make` installs them, so a missing program is a
// failure, not a skip.
#include <gtest/gtest.h>

#include "capture/pcap_reader.h"
#include "capture/pcap_writer.h"
#include "tests/wire/run_util.h"
#include "tests/wire/tshark_fields.h"
#include "wire/frame.h"
#include "wire/ib_native.h"

namespace rocelab::wire {
namespace {

using namespace testutil;

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
