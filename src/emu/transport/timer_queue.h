// Timers for a transport that keeps its own clock: a heap of deadlines, fired
// by run_due() from inside Transport::poll(). Used by the simulated fabric
// (virtual clock) and the UDP transport (steady clock), so both fire timers in
// the same order: by deadline, then by the order they were armed.
//
// Not thread-safe: the engine serializes poll(), make_timer() and
// Timer::arm_at/cancel (transport.h). Arming allocates nothing once the heap
// has grown to its working size.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "emu/transport/transport.h"

namespace rocelab::emu {

class TimerQueue {
 public:
  TimerQueue();
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // A timer bound to this queue. It may outlive the queue (then it is inert).
  std::unique_ptr<Timer> make_timer(std::function<void()> on_expiry);

  // Runs the callback of every timer whose deadline is <= now and that was
  // armed before this call began (a callback that re-arms its timer for `now`
  // fires on the next call, not in a loop). Returns how many fired.
  size_t run_due(Nanos now);

  // The earliest armed deadline, or Nanos::max() when none is armed.
  Nanos next_deadline();

  // Called (if set) whenever a timer is armed, with its deadline: lets a
  // transport wake a thread blocked in wait() for a later deadline.
  void set_on_arm(std::function<void(Nanos)> f);

  size_t armed_count() const;

  struct Core;  // shared with the timers it made

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace rocelab::emu
