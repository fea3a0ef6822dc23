// The engine receive-path fuzzer's world (fuzz_engine_recv.cc): one emulated
// device, the victim, on the simulated fabric, with QPs of every type in every
// state, registered MRs of every kind of access, posted receives and
// outstanding requests; and two attacker ports that send it whatever the
// fuzzer says. Built once; reset() before each input returns the device, the
// fabric and the memory to where they were when it was built (Device::reset,
// SimFabric::reset, then the same objects made again: the same QPNs, R_Keys
// and PSNs), so the same input does the same thing every time and a crash
// reproduces from its input alone.
//
// The invariant (check_memory): after an input, no byte changed outside the
// memory the victim registered for the peer to change — an MR with
// REMOTE_WRITE or REMOTE_ATOMIC that a QP of its PD may reach, the posted
// receive buffers, and the buffer its own READ/atomic requests return into.
// Everything else is checked byte for byte: guard bytes around every MR, an
// MR with REMOTE_READ only, a local-only MR, a remote-write MR in a PD no QP
// uses, a deregistered MR (its stale R_Key), the send source buffer.
//
// Input format (records, one after another; a record cut short ends the input):
//   kind (1 byte):
//     bits 0-1  0, 1: a packet; 2: the victim acts locally; 3: time passes
//     bit 2     keep the ICRC as given (default: the harness computes it)
//     bit 3     keep the destination QPN (default: the QPN of QP `qp`)
//     bits 4-5  source: 0 the connected peer, 1 a stranger (another address),
//               2 the peer from another UDP source port, 3 the stranger so
//   qp (1 byte): index into the victim's QPs (modulo their number)
//   len (2 bytes, big-endian), then len bytes: the UDP payload (BTH .. ICRC)
//   For kind 3 the qp byte is the exponent e: the clock advances 2^(e%32) ns
//   (timers fire: retransmits, RNR waits, ACK coalescing) and len = 0.
//   For kind 2 (len = 0) the qp byte says what the victim does: even, it
//   deregisters the remote-write MR (from then on not one of its bytes may
//   change: a WRITE under way must not continue into it); odd, it moves QP
//   (byte / 2) to ERR (flushing its receives).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "emu/device.h"
#include "emu/transport/sim_fabric.h"
#include "testbed/testbed.h"

namespace rocelab::fuzz {

inline constexpr uint8_t kRecPacket = 0, kRecLocal = 2, kRecTime = 3;
inline constexpr uint8_t kKeepIcrc = 1u << 2, kKeepQpn = 1u << 3;
inline constexpr size_t kRecHeader = 4;

// What an input can know about the victim (the same in every run).
struct MrInfo {
  uint32_t rkey = 0;
  uint64_t iova = 0;
  uint32_t length = 0;
};
struct QpInfo {
  uint32_t qpn = 0;
  emu::QpType type = emu::QpType::kRC;
  emu::QpState state = emu::QpState::kReset;
};

inline constexpr uint32_t kPeerQpn = 0x000123;  // the QPN the victim's connected QPs talk to
inline constexpr uint32_t kQkey = 0x11111111;

class Victim {
 public:
  Victim();
  ~Victim();
  Victim(const Victim&) = delete;
  Victim& operator=(const Victim&) = delete;

  // Back to the state the constructor left: every object made again, the
  // arena's bytes restored, the clock at zero.
  void reset();
  // Runs one input (the format above).
  void run(std::span<const uint8_t> input);
  // Aborts with a report when a byte changed that the peer had no right to change.
  void check_memory() const;

  // The arena's regions (victim.cc has the layout), for the harness's own tests.
  enum Region : int { kRw, kRo, kLocal, kRecv, kRdDest, kOtherPd, kStale, kSrc, kNumRegions };
  // How many bytes of region r differ from what was there before the input.
  static size_t bytes_changed(Region r);
  // A byte of the arena (offset from its start; the guard before kRw is 0..63), for tests.
  static std::byte& arena_byte(size_t offset);
  static size_t arena_size();
  emu::Counters counters() const { return dev_->counters(); }
  emu::Nanos now() const { return fabric_.now(); }  // the fabric's virtual clock

  const std::vector<QpInfo>& qps() const { return qps_; }
  const std::vector<MrInfo>& mrs() const { return mr_infos_; }  // every rkey an attacker might try

 private:
  void setup();  // the objects and the outstanding requests
  void send(uint8_t kind, uint8_t qp, std::span<const uint8_t> bytes);
  void pump();
  void advance(emu::Nanos dt);
  void local(uint8_t what);

  testbed::Testbed bed_{testbed::Net::kSim};
  emu::SimFabric& fabric_ = *bed_.fabric();
  std::unique_ptr<emu::Transport> peer_, stranger_;
  std::unique_ptr<emu::Device> dev_;
  std::vector<emu::Qp*> qp_objs_;
  std::vector<emu::Cq*> cqs_;
  std::vector<QpInfo> qps_;
  std::vector<MrInfo> mr_infos_;
  std::vector<uint8_t> scratch_;
  emu::Mr* rw_mr_ = nullptr;           // nullptr once deregistered
  std::vector<std::byte> rw_at_dereg_;  // its bytes when it was deregistered
};

}  // namespace rocelab::fuzz
