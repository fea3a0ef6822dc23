#include "wire/write_barrier.h"

#include <time.h>

#include <atomic>

namespace rocelab::wire {
namespace {

std::atomic<int> g_in_progress{0};
std::atomic<bool> g_quiesced{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

}  // namespace

bool write_begin() noexcept {
  g_in_progress.fetch_add(1, std::memory_order_acq_rel);
  if (g_quiesced.load(std::memory_order_acquire)) {
    g_in_progress.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  return true;
}

void write_end() noexcept { g_in_progress.fetch_sub(1, std::memory_order_acq_rel); }

void quiesce_writes(int max_wait_ms) noexcept {
  g_quiesced.store(true, std::memory_order_release);
  const timespec tick{0, 1'000'000};  // 1 ms; nanosleep is async-signal-safe
  for (int i = 0; i < max_wait_ms && g_in_progress.load(std::memory_order_acquire) > 0; ++i)
    nanosleep(&tick, nullptr);
}

}  // namespace rocelab::wire
