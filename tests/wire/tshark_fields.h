// tshark as a judge: the command line (heuristic payload dissectors off) and
// the InfiniBand fields it prints, one row per frame. Used by the tests that
// compare tshark's reading of a capture with ours.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/wire/run_util.h"

namespace rocelab::wire::testutil {

// Heuristic payload dissectors that claim SEND payloads and then call them
// malformed (notes/rxe-and-wire.md); tftp: oferby's peer uses UDP source port 69.
inline const std::string kTshark =
    "tshark -n --disable-protocol rpcordma --disable-protocol smb_direct "
    "--disable-protocol nvme-rdma --disable-protocol iser --disable-protocol lnet "
    "--disable-protocol smc --disable-protocol infiniband_sdp --disable-protocol fcoib "
    "--disable-protocol tftp";

// tshark -T fields, one row per frame, in this column order.
inline const char* const kFields[] = {
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

inline std::vector<std::vector<std::string>> tshark_rows(const std::string& path) {
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

inline uint32_t bswap(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24);
}

}  // namespace rocelab::wire::testutil
