// The engine fuzzer's harness, tested: its packets do reach the responder (a
// valid WRITE lands byte for byte), its refusals are the engine's (a WRITE
// with a read-only, stale or foreign R_Key changes nothing), and its memory
// check does fail when a byte it guards changes.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/fuzz/victim.h"
#include "wire/packet.h"

namespace rocelab::fuzz {
namespace {

constexpr size_t kGuard = 64, kRwStart = kGuard, kRoStart = kGuard + 4096 + kGuard;

// One record: a WRITE packet (opcode) with `payload` to QP index qp (1: RC,
// RTR, all remote access); the RETH, when the opcode has one, says dma_len.
std::vector<uint8_t> write_pkt(uint8_t opcode, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t dma_len,
                               const std::vector<uint8_t>& payload, uint8_t qp = 1) {
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.psn = wire::Psn(psn);
  h.bth.ack_req = true;
  h.reth = {va, rkey, dma_len};
  std::vector<std::byte> out(wire::kMaxRoceLen);
  auto n = wire::encode_roce(out, h,
                             std::span<const std::byte>(reinterpret_cast<const std::byte*>(payload.data()),
                                                        payload.size()));
  EXPECT_TRUE(n.ok());
  std::vector<uint8_t> rec{kRecPacket, qp, static_cast<uint8_t>(*n >> 8), static_cast<uint8_t>(*n)};
  for (size_t i = 0; i < *n; ++i) rec.push_back(static_cast<uint8_t>(out[i]));
  return rec;
}

// A WRITE Only (RC) of `payload`.
std::vector<uint8_t> write_only(uint32_t rkey, uint64_t va, const std::vector<uint8_t>& payload,
                                uint8_t qp = 1) {
  return write_pkt(0x0A, 0, rkey, va, static_cast<uint32_t>(payload.size()), payload, qp);
}

const std::vector<uint8_t> kPayload{0xEE, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                    0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0xEF};

TEST(FuzzVictim, ValidWriteLandsByteForByte) {
  Victim v;
  const MrInfo& rw = v.mrs()[Victim::kRw];
  v.run(write_only(rw.rkey, rw.iova + 8, kPayload));
  for (size_t i = 0; i < kPayload.size(); ++i)
    EXPECT_EQ(static_cast<uint8_t>(Victim::arena_byte(kRwStart + 8 + i)), kPayload[i]) << i;
  EXPECT_EQ(Victim::bytes_changed(Victim::kRw), kPayload.size());
  EXPECT_GE(v.counters().rcvd_pkts, 1u);
  v.check_memory();
}

TEST(FuzzVictim, WriteWithoutRightsChangesNothing) {
  Victim v;
  const auto& mrs = v.mrs();
  std::vector<uint8_t> in;
  for (const int r : {Victim::kRo, Victim::kOtherPd, Victim::kStale}) {
    const auto rec = write_only(mrs[r].rkey, mrs[r].iova, kPayload);
    in.insert(in.end(), rec.begin(), rec.end());
  }
  // To the RW MR through the QP that has no remote access, and wrapping past 2^64.
  auto rec = write_only(mrs[Victim::kRw].rkey, mrs[Victim::kRw].iova, kPayload, /*qp=*/2);
  in.insert(in.end(), rec.begin(), rec.end());
  rec = write_only(mrs[Victim::kRo].rkey, ~uint64_t{0} - 7, kPayload);
  in.insert(in.end(), rec.begin(), rec.end());
  v.run(in);
  for (const auto r : {Victim::kRw, Victim::kRo, Victim::kOtherPd, Victim::kStale})
    EXPECT_EQ(Victim::bytes_changed(r), 0u) << "region " << r;
  v.check_memory();
}

// The finding of tests/emu/hostile_test.cc, as the fuzzer's victim sees it.
TEST(FuzzVictim, WriteAfterDeregChangesNothingMore) {
  Victim v;
  const MrInfo& rw = v.mrs()[Victim::kRw];
  std::vector<uint8_t> in = write_pkt(0x06, 0, rw.rkey, rw.iova, 2048, std::vector<uint8_t>(1024, 0xAA));
  in.insert(in.end(), {kRecLocal, 0, 0, 0});  // the victim deregisters the MR
  const auto last = write_pkt(0x08, 1, 0, 0, 0, std::vector<uint8_t>(1024, 0xBB));
  in.insert(in.end(), last.begin(), last.end());
  v.run(in);
  for (size_t i = 0; i < 1024; ++i)  // the FIRST packet landed
    ASSERT_EQ(static_cast<uint8_t>(Victim::arena_byte(kRwStart + i)), 0xAA) << i;
  v.check_memory();  // aborts if a byte of the MR changed after its deregistration
}

std::vector<std::pair<std::string, uint64_t>> counter_list(const emu::Counters& c) {
  std::vector<std::pair<std::string, uint64_t>> out;
  c.for_each([&](std::string_view name, uint64_t v) { out.emplace_back(std::string(name), v); });
  return out;
}

// What an input left: the clock, the counters and the arena's bytes.
struct Trace {
  emu::Nanos now;
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<std::byte> arena;
  bool operator==(const Trace&) const = default;
};
Trace trace_of(const Victim& v) {
  Trace t{v.now(), counter_list(v.counters()), {}};
  for (size_t i = 0; i < Victim::arena_size(); ++i) t.arena.push_back(Victim::arena_byte(i));
  return t;
}

// The fuzz target runs every input on one victim, reset in between: the
// input must do what it does on a victim built for it alone.
TEST(FuzzVictim, AResetVictimIsTheVictimItWasBuiltAs) {
  Victim v;
  const auto qps = v.qps();
  const auto mrs = v.mrs();
  const MrInfo& rw = mrs[Victim::kRw];
  std::vector<uint8_t> in = write_pkt(0x06, 0, rw.rkey, rw.iova, 2048, std::vector<uint8_t>(1024, 0xAA));
  in.insert(in.end(), {kRecTime, 20, 0, 0});   // a millisecond: retransmits, ACK timers
  in.insert(in.end(), {kRecLocal, 3, 0, 0});   // QP 1 to ERR
  in.insert(in.end(), {kRecLocal, 0, 0, 0});   // the remote-write MR deregistered
  const auto more = write_only(rw.rkey, rw.iova + 8, kPayload, /*qp=*/0);
  in.insert(in.end(), more.begin(), more.end());
  in.insert(in.end(), {kRecTime, 24, 0, 0});

  v.run(in);
  const Trace first = trace_of(v);
  EXPECT_GT(Victim::bytes_changed(Victim::kRw), 0u);
  v.reset();
  for (int r = 0; r < Victim::kNumRegions; ++r) EXPECT_EQ(Victim::bytes_changed(Victim::Region(r)), 0u) << r;
  ASSERT_EQ(v.qps().size(), qps.size());
  for (size_t i = 0; i < qps.size(); ++i) {
    EXPECT_EQ(v.qps()[i].qpn, qps[i].qpn);
    EXPECT_EQ(v.qps()[i].state, qps[i].state);
  }
  ASSERT_EQ(v.mrs().size(), mrs.size());
  for (size_t i = 0; i < mrs.size(); ++i) EXPECT_EQ(v.mrs()[i].rkey, mrs[i].rkey);

  v.run(in);
  EXPECT_EQ(trace_of(v), first);
  v.check_memory();
  Victim fresh;
  fresh.run(in);
  EXPECT_EQ(trace_of(fresh), first);
}

TEST(FuzzVictimDeathTest, MemoryCheckCatchesAGuardByte) {
  EXPECT_DEATH(
      {
        Victim v;
        Victim::arena_byte(kGuard - 1) ^= std::byte{1};
        v.check_memory();
      },
      "guard byte");
}

TEST(FuzzVictimDeathTest, MemoryCheckCatchesAReadOnlyMr) {
  EXPECT_DEATH(
      {
        Victim v;
        Victim::arena_byte(kRoStart + 100) ^= std::byte{1};
        v.check_memory();
      },
      "remote-read-only MR changed");
}

}  // namespace
}  // namespace rocelab::fuzz
