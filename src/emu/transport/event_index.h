// An indexed min-heap of times, one per small integer id: the simulated
// fabric's index of when each of its ports next has something to do (a timer
// due, a datagram arriving), so that the fabric's next event is the top of one
// heap instead of a scan of every port. An id's key can be raised, lowered or
// removed in O(log n); the earliest key is read in O(1), and every id whose
// key is at or before a time is listed in time proportional to their number.
//
// Not thread-safe (the fabric is single-threaded). Allocates only when an id
// larger than any before is inserted.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "emu/transport/transport.h"

namespace rocelab::emu {

class EventIndex {
 public:
  static constexpr uint32_t kAbsent = std::numeric_limits<uint32_t>::max();

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  bool contains(uint32_t id) const { return id < pos_.size() && pos_[id] != kAbsent; }
  // id's key; only for an id the index contains.
  Nanos key(uint32_t id) const { return heap_[pos_[id]].t; }
  // The earliest key and its id; only when not empty.
  Nanos top_key() const { return heap_.front().t; }
  uint32_t top_id() const { return heap_.front().id; }

  // id's key becomes t (id is inserted if absent).
  void set(uint32_t id, Nanos t) {
    if (!contains(id)) {
      insert(id, t);
      return;
    }
    const uint32_t i = pos_[id];
    const Nanos old = heap_[i].t;
    heap_[i].t = t;
    if (t < old)
      up(i);
    else if (old < t)
      down(i);
  }

  // id's key becomes t if t is earlier (id is inserted if absent).
  void lower(uint32_t id, Nanos t) {
    if (!contains(id)) {
      insert(id, t);
      return;
    }
    const uint32_t i = pos_[id];
    if (t < heap_[i].t) {
      heap_[i].t = t;
      up(i);
    }
  }

  void erase(uint32_t id) {
    if (!contains(id)) return;
    const uint32_t i = pos_[id];
    pos_[id] = kAbsent;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    place(i, last);
    if (i > 0 && last.t < heap_[parent(i)].t)
      up(i);
    else
      down(i);
  }

  void clear() {
    for (const Entry& e : heap_) pos_[e.id] = kAbsent;
    heap_.clear();
  }

  // Appends to *out every id whose key is <= t, in no particular order: a walk
  // of the heap that stops below any entry later than t.
  void collect_until(Nanos t, std::vector<uint32_t>* out) const {
    if (heap_.empty() || heap_.front().t > t) return;
    stack_.clear();
    stack_.push_back(0);
    while (!stack_.empty()) {
      const uint32_t i = stack_.back();
      stack_.pop_back();
      out->push_back(heap_[i].id);
      for (uint32_t c = 2 * i + 1; c <= 2 * i + 2 && c < heap_.size(); ++c)
        if (heap_[c].t <= t) stack_.push_back(c);
    }
  }

 private:
  struct Entry {
    Nanos t;
    uint32_t id;
  };
  static uint32_t parent(uint32_t i) { return (i - 1) / 2; }

  void insert(uint32_t id, Nanos t) {
    if (id >= pos_.size()) pos_.resize(id + 1, kAbsent);
    heap_.push_back({t, id});
    pos_[id] = static_cast<uint32_t>(heap_.size() - 1);
    up(pos_[id]);
  }
  void place(uint32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.id] = i;
  }
  void up(uint32_t i) {
    const Entry e = heap_[i];
    while (i > 0 && e.t < heap_[parent(i)].t) {
      place(i, heap_[parent(i)]);
      i = parent(i);
    }
    place(i, e);
  }
  void down(uint32_t i) {
    const Entry e = heap_[i];
    const uint32_t n = static_cast<uint32_t>(heap_.size());
    for (;;) {
      uint32_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && heap_[c + 1].t < heap_[c].t) ++c;
      if (!(heap_[c].t < e.t)) break;
      place(i, heap_[c]);
      i = c;
    }
    place(i, e);
  }

  std::vector<Entry> heap_;
  std::vector<uint32_t> pos_;            // id -> its place in heap_, or kAbsent
  mutable std::vector<uint32_t> stack_;  // scratch for collect_until
};

}  // namespace rocelab::emu
