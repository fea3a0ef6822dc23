// Property tests of RC reliability: the random scenario of one seed
// and the memory images it must leave behind. Pure data, no engine: the
// harness (property_test.cc) runs a Scenario on two devices and compares.
//
// One seed gives, through our own splitmix64 (no std distributions, so the
// same seed means the same scenario with every standard library):
//  - the fault configuration of each device (loss up to the limit, reorder,
//    duplication, corruption, sometimes an extra schedule rule: rx-side
//    duplication/reordering, ACK or READ-response loss, delay with jitter);
//  - the path MTU, initial PSNs, max_rd_atomic, min_rnr_timer;
//  - per QP pair one or two streams (A -> B, B -> A), each a list of WRs:
//    SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ,
//    FETCH_ADD, CMP_SWP, 0 B .. max_size (most small), 1-3 SGEs, some
//    unsignaled or fenced, posted with a window of several WRs in flight.
//
// Buffers, one MR per stream on each side (offsets below are from the MR's iova):
//  local  (requester): the sources of SEND/WRITE (each with a header naming
//         the stream and the WR index), the destinations of READs and of the
//         atomics' original values. Every WR has its own range.
//  remote (responder): [0,8) the FETCH_ADD word, [8,16) the CMP_SWP word,
//         then a read-only area READs take from, the WRITE area (WRITEs may
//         overwrite earlier WRITEs: the last one in posting order must win),
//         then one range per receive WQE.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "emu/transport/fault_config.h"
#include "emu/verbs_types.h"

namespace rocelab::emu::test {

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, the same everywhere.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return mix64(s_ += 0x9E3779B97F4A7C15ull); }
  // Uniform enough in [0, n) for test purposes (modulo bias < 2^-40 here).
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }  // inclusive
  bool per_mille(unsigned pm) { return below(1000) < pm; }

 private:
  uint64_t s_;
};

// The seeded byte pattern: the byte at position x of pattern `tag` is byte
// x % 8 (little end first) of mix64(tag + x - x % 8). out[i] gets position
// base + i, so any slice of a pattern can be made on its own.
inline void fill_seeded(std::span<std::byte> out, uint64_t tag, uint64_t base = 0) {
  for (size_t i = 0; i < out.size();) {
    const uint64_t x = base + i;
    const uint64_t v = mix64(tag + (x & ~uint64_t{7}));
    for (unsigned b = x & 7; b < 8 && i < out.size(); ++b, ++i) out[i] = std::byte(v >> (8 * b));
  }
}

enum class OpKind : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kFetchAdd, kCmpSwap };
const char* to_string(OpKind k);
WrOpcode wr_opcode(OpKind k);
WcOpcode wc_opcode(OpKind k);  // of the requester's completion
inline bool is_atomic(OpKind k) { return k == OpKind::kFetchAdd || k == OpKind::kCmpSwap; }
inline bool is_write(OpKind k) { return k == OpKind::kWrite || k == OpKind::kWriteImm; }
inline bool has_imm(OpKind k) { return k == OpKind::kSendImm || k == OpKind::kWriteImm; }
inline bool takes_recv(OpKind k) {
  return k == OpKind::kSend || k == OpKind::kSendImm || k == OpKind::kWriteImm;
}

// A SEND/WRITE source that is at least this long starts with a header: the
// magic, the stream and the WR index (each 4 bytes, host order), so a
// misplaced message names itself.
inline constexpr uint32_t kHeaderMagic = 0x50524F50;  // "PROP"
inline constexpr size_t kHeaderLen = 12;
inline constexpr uint32_t kMaxInline = 128;  // the QPs' max_inline_data

struct Op {
  OpKind kind = OpKind::kSend;
  uint32_t len = 0;       // bytes (8 for atomics)
  bool signaled = true;
  bool fence = false;
  bool inline_data = false;  // IBV_SEND_INLINE (SEND/WRITE up to kMaxInline bytes)
  uint8_t nsge = 1;       // 0 only for len 0
  uint32_t split[2] = {0, 0};  // SGE boundaries inside [0, len) when nsge > 1
  uint32_t imm = 0;       // network order in memory, as ibv
  uint64_t local_off = 0;   // local MR
  uint64_t remote_off = 0;  // remote MR: WRITE target, READ source, atomic word
  uint64_t compare_add = 0, swap = 0;
  uint64_t expect_orig = 0;  // atomics: the value this one must return
  size_t recv = 0;           // takes_recv: index of its receive WQE
};

struct RecvPlan {
  size_t op = 0;        // the WR that consumes it
  uint64_t off = 0;     // remote MR
  uint32_t cap = 0;     // total SGE length (>= the message)
  uint32_t split = 0;   // 0: one SGE, else the second starts there
};

struct StreamPlan {
  unsigned id = 0;      // index in Scenario::streams, in the SEND/WRITE headers
  unsigned pair = 0;    // QP pair index
  int req = 0;          // requester device: 0 = A, 1 = B
  unsigned window = 1;  // WRs in flight at most
  bool lazy_recv = false;  // receives are posted a few at a time (RNR NAKs)
  std::vector<Op> ops;
  std::vector<RecvPlan> recvs;
  uint64_t local_tag = 0, remote_tag = 0;
  uint64_t fadd_init = 0, cas_init = 0;
  uint64_t ro_off = 0, ro_len = 0, wr_off = 0, wr_len = 0, rv_off = 0;
  size_t local_len = 0, remote_len = 0;

  static constexpr uint64_t kFaddOff = 0, kCasOff = 8;
  // What the buffers hold before anything runs, and must hold at the end.
  std::vector<std::byte> initial_local() const;
  std::vector<std::byte> initial_remote() const;
  std::vector<std::byte> final_local() const;
  std::vector<std::byte> final_remote() const;
  // The bytes a SEND/WRITE sends (its local range before anything ran).
  std::vector<std::byte> source(const Op& op) const;
  // The bytes receive WQE i must hold (its whole range) when it completes.
  std::vector<std::byte> expected_recv(size_t i) const;
};

struct PropertyLimits {
  unsigned pairs = 3;             // QP pairs
  unsigned min_ops = 10, max_ops = 40;  // per stream
  uint32_t max_size = 1u << 20;
  unsigned max_large = 1;         // WRs above 64 KiB per stream
  unsigned max_loss_pm = 300, max_reorder_pm = 100, max_dup_pm = 100, max_corrupt_pm = 20;  // per mille
  bool rx_rules = true;           // extra schedule rules on received packets
  bool small_mtu = true;          // allow 256/512 (many packets)
  bool short_timeouts = true;     // sometimes a timeout of 3..8
};

struct Scenario {
  uint64_t seed = 0;
  Mtu mtu = Mtu::k1024;
  uint32_t psn[2] = {0, 0};
  uint8_t max_rd_atomic = 16, min_rnr_timer = 12;
  uint8_t timeout = 10;   // 4.096 us * 2^timeout; short ones retransmit before the ACK is back
  FaultConfig faults[2];  // of device A, B
  std::vector<StreamPlan> streams;
  std::string describe() const;  // one line per stream, for failure messages
};

Scenario make_scenario(uint64_t seed, const PropertyLimits& lim);

}  // namespace rocelab::emu::test
