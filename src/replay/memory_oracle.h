// The memory side of `rocelab replay` (replay.h), internal to src/replay:
// the live MRs' spans (live_memory.h), and beside each the shadow of what the
// capture's own WRITEs and atomics put in the original responder's memory,
// with which bytes of it they determine. From those, the oracle says for a
// READ response or an atomic ACK — the capture's or the live responder's —
// whether its data matches the memory where the capture determines it.
// It also counts the pages written against the memory limit.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "emu/objects.h"
#include "replay/compare.h"
#include "replay/live_memory.h"
#include "replay/plan.h"
#include "wire/packet.h"

namespace rocelab::replay::detail {

// The bytes of one R_Key whose content the capture determines (written by
// its WRITEs): merged intervals [start, end).
class Known {
 public:
  void add(uint64_t a, uint64_t n);
  // Calls f(start, length) for each known piece of [a, a + n).
  template <class F>
  void each_known(uint64_t a, uint64_t n, F&& f) const {
    auto it = m_.upper_bound(a);
    if (it != m_.begin()) --it;
    for (; it != m_.end() && it->first < a + n; ++it) {
      const uint64_t s = std::max(a, it->first), e = std::min(a + n, it->second);
      if (s < e) f(s, e - s);
    }
  }
  bool covers(uint64_t a, uint64_t n) const;

 private:
  std::map<uint64_t, uint64_t> m_;
};

// One R_Key of the capture: the live MR registered for it, and its shadow.
struct LiveMr {
  uint32_t index = 0;                // its span's number, for the PageBudget
  uint64_t lo = UINT64_MAX, hi = 0;  // the VA range the capture's RETHs use
  Reservation mem;                   // the live MR's memory
  emu::Mr* mr = nullptr;             // registered by the live responder
  Reservation shadow;                // what the capture's WRITEs (and atomics) left there
  Known known;                       // ... and which bytes of it they determine
  bool covers(uint64_t va, uint64_t n) const {
    return va >= lo && va - lo <= shadow.size() && n <= shadow.size() - (va - lo);
  }
  std::byte* at(uint64_t va, uint64_t n) { return covers(va, n) ? shadow.data() + (va - lo) : nullptr; }
};

class MemoryOracle {
 public:
  MemoryOracle(const Plan& plan, uint64_t max_memory, uint32_t mtu);

  // Reserves every live MR's span and its shadow. Empty on success; else why,
  // naming the R_Key.
  std::string reserve();
  std::map<uint32_t, LiveMr>& mrs() { return mrs_; }

  // A request of the capture at relative PSN rel, before it is sent (frame:
  // its frame number; refused: the capture's responder refused it). WRITEs
  // fill the shadow; READs and atomics are kept until their answers are
  // judged, and *answer is the relative PSN of the last answer one asks for
  // (a READ's Last response, an atomic's ACK), else -1. False when the pages
  // it writes pass the memory limit: then over_limit() says why and it must
  // not be sent.
  bool on_request(const wire::RocePacket& p, int64_t rel, bool refused, uint64_t frame, int64_t* answer);

  // A READ response or atomic ACK at rel from the capture (capture = true)
  // or the live responder, against what the capture determines. The
  // capture's atomic ACK applies the atomic to the shadow.
  Determined determined(bool capture, int64_t rel, const wire::RocePacket& p);

  // Forgets the READs and atomics sent before relative PSN rel (their answers
  // are judged), except the last of them, whose responses may reach past rel.
  void forget_before(int64_t rel);

  uint64_t bytes_written() const { return written_.bytes(); }
  const std::string& over_limit() const { return over_limit_; }

 private:
  // A READ or atomic request sent, until the answers are judged.
  struct Pending {
    uint32_t rkey = 0;
    uint64_t va = 0;
    uint32_t len = 0, npk = 1;
    bool known = false;   // atomic: its 8 bytes were determined when it was sent ...
    uint64_t before = 0;  // ... and held this
    bool cmp_swap = false, applied = false;
    uint64_t compare = 0, swap_add = 0;
  };
  // The WRITE message under way.
  struct WriteMsg {
    bool open = false;  // its data is what the original responder's memory holds
    bool any = false;   // a WRITE message is under way
    int64_t start = 0;
    uint32_t rkey = 0;
    uint64_t va = 0;
  };
  bool budget(uint32_t rkey, uint64_t va, uint64_t n, uint64_t frame);

  std::map<uint32_t, LiveMr> mrs_;  // by the capture's R_Key
  PageBudget written_;
  uint32_t mtu_;
  std::map<int64_t, Pending> pending_;  // by relative PSN
  WriteMsg wmsg_;
  std::string over_limit_;
};

}  // namespace rocelab::replay::detail
