#include "wire/write_barrier.h"

#include <signal.h>
#include <time.h>

#include <atomic>

namespace rocelab::wire {
namespace {

std::atomic<int> g_in_progress{0};
std::atomic<bool> g_quiesced{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

// This thread's writes under way, and the signal to raise when they end.
// initial-exec: a signal handler reads them, and the library is loaded at
// start (preloaded or linked), so no TLS allocation can happen there.
[[gnu::tls_model("initial-exec")]] thread_local int t_writing = 0;
[[gnu::tls_model("initial-exec")]] thread_local volatile sig_atomic_t t_deferred_signal = 0;

}  // namespace

// write_begin (count, then look at the flag) against quiesce_writes (flag,
// then look at the count): each side stores one variable and then loads the
// other, so the accesses are sequentially consistent; with acquire/release
// both could miss the other's store and a write would start under a dying
// process.
bool write_begin() noexcept {
  g_in_progress.fetch_add(1, std::memory_order_seq_cst);
  if (g_quiesced.load(std::memory_order_seq_cst)) {
    g_in_progress.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  ++t_writing;
  return true;
}

void write_end() noexcept {
  --t_writing;
  g_in_progress.fetch_sub(1, std::memory_order_acq_rel);
  if (t_writing == 0 && t_deferred_signal != 0) {
    const int sig = t_deferred_signal;
    t_deferred_signal = 0;
    raise(sig);  // the handler runs again, finds no write of ours, and lets the process die
  }
}

bool quiesce_writes(int max_wait_ms, int sig) noexcept {
  g_quiesced.store(true, std::memory_order_seq_cst);
  if (t_writing > 0) {
    t_deferred_signal = sig;
    return false;
  }
  const timespec tick{0, 1'000'000};  // 1 ms; nanosleep is async-signal-safe
  for (int i = 0; i < max_wait_ms && g_in_progress.load(std::memory_order_seq_cst) > 0; ++i)
    nanosleep(&tick, nullptr);
  return true;
}

}  // namespace rocelab::wire
