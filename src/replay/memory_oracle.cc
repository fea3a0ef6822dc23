#include "replay/memory_oracle.h"

#include <algorithm>
#include <cstring>

namespace rocelab::replay::detail {

void Known::add(uint64_t a, uint64_t n) {
  if (n == 0) return;
  uint64_t b = a + n;
  auto it = m_.upper_bound(a);
  if (it != m_.begin() && std::prev(it)->second >= a) --it;
  while (it != m_.end() && it->first <= b) {
    a = std::min(a, it->first);
    b = std::max(b, it->second);
    it = m_.erase(it);
  }
  if (m_.size() < 65536) m_[a] = b;
}

bool Known::covers(uint64_t a, uint64_t n) const {
  if (n == 0) return true;
  auto it = m_.upper_bound(a);
  if (it == m_.begin()) return false;
  --it;
  return it->first <= a && it->second >= a + n;
}

MemoryOracle::MemoryOracle(const Plan& plan, uint64_t max_memory, uint32_t mtu) : written_(max_memory), mtu_(mtu) {
  for (const auto& [rkey, g] : plan.regions) {
    LiveMr& m = mrs_[rkey];
    m.index = static_cast<uint32_t>(mrs_.size() - 1);
    m.lo = g.lo;
    m.hi = g.hi;
  }
}

std::string MemoryOracle::reserve() {
  for (auto& [rkey, m] : mrs_) {
    for (Reservation* res : {&m.mem, &m.shadow}) {
      const std::string refused = res->reserve(m.hi - m.lo);
      if (!refused.empty())
        return "cannot reserve " + std::to_string(m.hi - m.lo) + " bytes for R_Key " + rkey_text(rkey) + ": " + refused;
    }
  }
  return {};
}

// The pages of [va, va + n) under rkey count against the limit before a
// request that writes them is sent (twice: the live MR's and the shadow's).
bool MemoryOracle::budget(uint32_t rkey, uint64_t va, uint64_t n, uint64_t frame) {
  auto it = mrs_.find(rkey);
  if (it == mrs_.end() || !it->second.covers(va, n) || written_.touch(it->second.index, va - it->second.lo, n, 2))
    return true;
  over_limit_ = "the capture's WRITEs and atomics write more than the memory limit of " +
                std::to_string(written_.max_bytes()) + " bytes of pages (each page twice: the live MR and its " +
                "shadow); R_Key " + rkey_text(rkey) + " passed it at frame " + std::to_string(frame);
  return false;
}

bool MemoryOracle::on_request(const wire::RocePacket& p, int64_t rel, bool refused, uint64_t frame, int64_t* answer) {
  const wire::RoceHeaders& h = p.hdr;
  const wire::OpInfo& info = h.info();
  const auto len = static_cast<uint32_t>(p.payload.size());
  *answer = -1;
  if (info.is(OpClass::kWrite)) {
    if (info.carries(wire::Hdr::kReth)) wmsg_ = {!refused, true, rel, h.reth.rkey, h.reth.va};
    if (wmsg_.any && rel >= wmsg_.start) {
      const uint64_t va = wmsg_.va + static_cast<uint64_t>(rel - wmsg_.start) * mtu_;
      if (!budget(wmsg_.rkey, va, len, frame)) return false;
      // What the capture determines of the responder's memory.
      auto it = mrs_.find(wmsg_.rkey);
      std::byte* b = !wmsg_.open || it == mrs_.end() ? nullptr : it->second.at(va, len);
      if (b) {
        std::memcpy(b, p.payload.data(), len);
        it->second.known.add(va, len);
      }
    }
    if (info.is(OpClass::kLast)) wmsg_.open = wmsg_.any = false;
  } else if (info.is(OpClass::kAtomic) && !budget(h.atomic_eth.rkey, h.atomic_eth.va, 8, frame)) {
    return false;
  }
  if (info.is(OpClass::kRead)) {
    Pending q;
    q.rkey = h.reth.rkey;
    q.va = h.reth.va;
    q.len = h.reth.dma_len;
    q.npk = std::max<uint32_t>(1, (q.len + mtu_ - 1) / mtu_);
    pending_[rel] = q;
    *answer = rel + q.npk - 1;
  } else if (info.is(OpClass::kAtomic)) {
    auto it = mrs_.find(h.atomic_eth.rkey);
    Pending q;
    q.rkey = h.atomic_eth.rkey;
    q.va = h.atomic_eth.va;
    q.len = 8;
    q.known = it != mrs_.end() && it->second.known.covers(q.va, 8) && it->second.at(q.va, 8);
    if (q.known) std::memcpy(&q.before, it->second.at(q.va, 8), 8);
    q.cmp_swap = wire::rc_relative(h.bth.opcode) == wire::op::kRcCmpSwap;
    q.compare = h.atomic_eth.compare;
    q.swap_add = h.atomic_eth.swap_add;
    if (!pending_.count(rel)) pending_[rel] = q;  // a retransmission changes nothing
    *answer = rel;
  }
  return true;
}

Determined MemoryOracle::determined(bool capture, int64_t rel, const wire::RocePacket& p) {
  Determined det;
  const wire::OpInfo& info = p.hdr.info();
  if (!info.is(OpClass::kRead) && !info.is(OpClass::kAtomic)) return det;
  auto it = pending_.upper_bound(rel);
  if (it == pending_.begin()) return det;
  --it;
  Pending& q = it->second;
  auto m = mrs_.find(q.rkey);
  if (m == mrs_.end()) return det;
  if (info.is(OpClass::kAtomic)) {
    if (it->first != rel || !q.known) return det;
    const uint64_t orig = p.hdr.atomic_ack_eth.orig;
    det = {8, orig == q.before};
    if (capture && det.match && !q.applied) {  // once (a duplicate ACK repeats it)
      const uint64_t v = q.cmp_swap ? (orig == q.compare ? q.swap_add : orig) : orig + q.swap_add;
      if (std::byte* b = m->second.at(q.va, 8)) std::memcpy(b, &v, 8);
      q.applied = true;
    }
    return det;
  }
  if (rel >= it->first + static_cast<int64_t>(q.npk)) return det;
  const uint64_t va = q.va + static_cast<uint64_t>(rel - it->first) * mtu_;
  det.match = true;
  m->second.known.each_known(va, p.payload.size(), [&](uint64_t a, uint64_t n) {
    const std::byte* b = m->second.at(a, n);
    det.known_bytes += static_cast<uint32_t>(n);
    if (!b || std::memcmp(b, p.payload.data() + (a - va), n) != 0) det.match = false;
  });
  return det;
}

void MemoryOracle::forget_before(int64_t rel) {
  auto keep = pending_.lower_bound(rel);
  if (keep != pending_.begin()) pending_.erase(pending_.begin(), std::prev(keep));
}

}  // namespace rocelab::replay::detail
