#include "emu/transport/timer_queue.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <utility>

namespace rocelab::emu {

namespace {
constexpr uint32_t kNoSlot = UINT32_MAX;
}  // namespace

struct TimerQueue::Core {
  struct Slot {
    std::function<void()> on_expiry;
    uint64_t gen = 0;  // bumped by every arm and cancel: older heap entries are stale
    bool armed = false;
    bool in_use = false;
    bool release_after_run = false;  // the Timer was destroyed inside its own callback
  };
  struct Entry {
    Nanos deadline;
    uint64_t seq;  // arming order: ties on deadline fire in that order
    uint32_t slot;
    uint64_t gen;
  };
  // Heap order: earliest deadline (then lowest seq) on top; an object, so
  // that the heap's sifts inline it.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.deadline != b.deadline ? a.deadline > b.deadline : a.seq > b.seq;
    }
  };

  std::deque<Slot> slots;  // stable addresses: a callback may create timers while it runs
  std::vector<uint32_t> free_slots;
  std::vector<Entry> heap;
  std::vector<Entry> deferred;  // scratch for run_due
  uint64_t next_seq = 0;
  size_t armed = 0;
  uint32_t running = kNoSlot;
  bool alive = true;
  std::function<void(Nanos)> on_arm;

  bool valid(const Entry& e) const { return slots[e.slot].armed && slots[e.slot].gen == e.gen; }

  uint32_t acquire(std::function<void()> f) {
    uint32_t s;
    if (!free_slots.empty()) {
      s = free_slots.back();
      free_slots.pop_back();
    } else {
      s = static_cast<uint32_t>(slots.size());
      slots.emplace_back();
    }
    slots[s].on_expiry = std::move(f);
    slots[s].in_use = true;
    return s;
  }

  void release(uint32_t s) {
    cancel(s);
    if (running == s) {
      slots[s].release_after_run = true;
      return;
    }
    slots[s].on_expiry = nullptr;
    slots[s].in_use = false;
    free_slots.push_back(s);
  }

  void arm(uint32_t s, Nanos deadline) {
    Slot& slot = slots[s];
    if (!slot.armed) ++armed;
    slot.armed = true;
    ++slot.gen;
    // Re-arming leaves stale entries behind; drop them when they dominate.
    if (heap.size() > 4 * armed + 64) compact();
    heap.push_back({deadline, next_seq++, s, slot.gen});
    std::push_heap(heap.begin(), heap.end(), Later{});
    if (on_arm) on_arm(deadline);
  }

  void cancel(uint32_t s) {
    Slot& slot = slots[s];
    if (slot.armed) --armed;
    slot.armed = false;
    ++slot.gen;
  }

  void compact() {
    std::erase_if(heap, [this](const Entry& e) { return !valid(e); });
    std::make_heap(heap.begin(), heap.end(), Later{});
  }

  void prune_top() {
    while (!heap.empty() && !valid(heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), Later{});
      heap.pop_back();
    }
  }
};

namespace {

class QueueTimer final : public Timer {
 public:
  QueueTimer(std::shared_ptr<TimerQueue::Core> core, uint32_t slot)
      : core_(std::move(core)), slot_(slot) {}
  ~QueueTimer() override {
    if (core_->alive) core_->release(slot_);
  }
  void arm_at(Nanos deadline) override {
    if (core_->alive) core_->arm(slot_, deadline);
  }
  void cancel() override {
    if (core_->alive) core_->cancel(slot_);
  }
  bool armed() const override { return core_->alive && core_->slots[slot_].armed; }

 private:
  std::shared_ptr<TimerQueue::Core> core_;
  uint32_t slot_;
};

}  // namespace

TimerQueue::TimerQueue() : core_(std::make_shared<Core>()) {}

TimerQueue::~TimerQueue() {
  core_->alive = false;
  core_->on_arm = nullptr;
  for (auto& s : core_->slots) s.on_expiry = nullptr;
}

std::unique_ptr<Timer> TimerQueue::make_timer(std::function<void()> on_expiry) {
  uint32_t s = core_->acquire(std::move(on_expiry));
  return std::make_unique<QueueTimer>(core_, s);
}

size_t TimerQueue::run_due(Nanos now) {
  Core& c = *core_;
  const uint64_t seq_limit = c.next_seq;
  size_t fired = 0;
  while (!c.heap.empty() && c.heap.front().deadline <= now) {
    std::pop_heap(c.heap.begin(), c.heap.end(), Core::Later{});
    Core::Entry e = c.heap.back();
    c.heap.pop_back();
    if (!c.valid(e)) continue;
    if (e.seq >= seq_limit) {  // armed by a callback during this call
      c.deferred.push_back(e);
      continue;
    }
    c.slots[e.slot].armed = false;
    --c.armed;
    c.running = e.slot;
    c.slots[e.slot].on_expiry();  // may arm, cancel or destroy any timer
    c.running = kNoSlot;
    if (c.slots[e.slot].release_after_run) {
      c.slots[e.slot].release_after_run = false;
      c.release(e.slot);
    }
    ++fired;
  }
  for (const auto& e : c.deferred) {
    c.heap.push_back(e);
    std::push_heap(c.heap.begin(), c.heap.end(), Core::Later{});
  }
  c.deferred.clear();
  return fired;
}

Nanos TimerQueue::next_deadline() {
  core_->prune_top();
  return core_->heap.empty() ? Nanos::max() : core_->heap.front().deadline;
}

void TimerQueue::set_on_arm(std::function<void(Nanos)> f) { core_->on_arm = std::move(f); }

size_t TimerQueue::armed_count() const { return core_->armed; }

}  // namespace rocelab::emu
