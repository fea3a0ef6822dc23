// Internal: the concrete PD, MR, completion channel, CQ, SRQ and AH behind the
// public classes of objects.h. Everything here is guarded by the device lock
// (Engine::mu) unless a comment says otherwise.
#pragma once
#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "emu/device.h"
#include "emu/objects.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

class QpImpl;
using Engine = Device::Engine;

struct PdImpl final : Pd {
  Engine* eng = nullptr;
  uint32_t handle = 0;
  int users = 0;  // MRs, QPs, SRQs, AHs on it
};

struct MrImpl final : Mr {
  Engine* eng = nullptr;
  PdImpl* pd = nullptr;
  std::byte* addr = nullptr;
  uint64_t length = 0;
  uint64_t iova = 0;
  unsigned access = 0;
  uint32_t key = 0;  // lkey == rkey (as rxe)
  int bound_mws = 0;  // memory windows bound to it (dereg_mr: EBUSY)

  // Host pointer for [va, va+len) in iova space, or nullptr when out of range.
  std::byte* at(uint64_t va, uint64_t len) const {
    if (va < iova || len > length || va - iova > length - len) return nullptr;
    return addr + (va - iova);
  }
};

// A memory window (mw.cc). Its R_Key's upper 24 bits (the index) never change;
// the low byte is set by each bind. Bound: mr is set and [addr, addr+length)
// in mr's iova space is reachable with access.
struct MwImpl final : Mw {
  enum class State : uint8_t { kValid, kFree, kInvalid };  // rxe_mw_state
  Engine* eng = nullptr;
  PdImpl* pd = nullptr;
  MwType type = MwType::kType1;
  State state = State::kValid;
  uint32_t key = 0;
  MrImpl* mr = nullptr;
  QpImpl* qp = nullptr;   // type 2: the QP it is bound to
  uint64_t addr = 0;      // in mr's iova space
  uint64_t length = 0;
  unsigned access = 0;    // access::kRemote* | kZeroBased
};

// A completion channel: an eventfd (EFD_SEMAPHORE) counts the fired CQs queued
// in `fired`. `fired` has its own lock: get_event runs without the device lock.
struct ChannelImpl final : CompChannel {
  Engine* eng = nullptr;
  int efd = -1;
  std::mutex qmu;
  std::deque<Cq*> fired;
  int users = 0;  // CQs on it (device lock)
  void signal(Cq* cq);
};

struct CqImpl final : Cq {
  enum class Arm : uint8_t { kNone, kNext, kSolicited };
  Engine* eng = nullptr;
  ChannelImpl* ch = nullptr;
  uint32_t num = 0;  // the CQ's number on its device (rocelab stat)
  int cap = 0;
  std::vector<Wc> ring;  // cap entries, allocated at creation
  size_t head = 0, count = 0;
  Arm arm = Arm::kNone;
  bool overflowed = false;
  int users = 0;  // QPs on it
  uint32_t async_queue = 0;  // where its async events go (Device::set_async_queue)
  std::atomic<unsigned> delivered{0}, acked{0};

  // Adds a completion; false on overflow (the caller raises CQ_ERR).
  bool push(const Wc& wc, bool solicited);
};

// One receive WQE: the SGEs as posted (resolved to memory when consumed).
struct RecvWqe {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  std::vector<Sge> sge;  // max_sge entries, allocated at creation
};

// A ring of receive WQEs (a QP's RQ or an SRQ), allocated at creation.
class RecvQueue {
 public:
  void init(uint32_t max_wr, uint32_t max_sge);
  uint32_t max_wr() const { return static_cast<uint32_t>(ring_.size()); }
  uint32_t max_sge() const { return max_sge_; }
  uint32_t size() const { return static_cast<uint32_t>(tail_ - head_); }
  bool empty() const { return tail_ == head_; }
  bool full() const { return size() == ring_.size(); }
  RecvWqe& front() { return ring_[head_ % ring_.size()]; }
  void pop() { ++head_; }
  // EINVAL: too many SGEs; ENOMEM: full.
  std::error_code push(const RecvWr& wr);
  void clear() { head_ = tail_ = 0; }

 private:
  std::vector<RecvWqe> ring_;
  uint32_t max_sge_ = 0;
  uint64_t head_ = 0, tail_ = 0;
};

struct XrcdImpl final : Xrcd {
  Engine* eng = nullptr;
  uint64_t file_key = 0;  // 0: not tied to a file
  int opens = 0;          // open_xrcd calls not yet closed
  int users = 0;          // XRC SRQs and target QPs in it
};

struct SrqImpl final : Srq {
  Engine* eng = nullptr;
  PdImpl* pd = nullptr;
  RecvQueue rq;
  uint32_t limit = 0;  // armed when > 0
  int users = 0;       // QPs on it
  uint32_t num = 0;    // srq_num, 24 bits, unique on the device
  SrqType type_ = SrqType::kBasic;
  XrcdImpl* xrcd = nullptr;  // XRC
  CqImpl* cq = nullptr;      // XRC: its receives complete here
  uint32_t async_queue = 0;  // where its async events go (Device::set_async_queue)
};

struct AhImpl final : Ah {
  Engine* eng = nullptr;
  PdImpl* pd = nullptr;
  AhAttr attr;
  wire::IpAddr dst;
};

}  // namespace rocelab::emu
