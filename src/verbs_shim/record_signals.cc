#include "verbs_shim/record_signals.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include "wire/write_barrier.h"

namespace rocelab::verbs_shim {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
struct sigaction g_previous[NSIG];
std::atomic<QuiesceFn> g_also{nullptr};
static_assert(std::atomic<QuiesceFn>::is_always_lock_free);

void on_signal(int sig, siginfo_t* info, void* ucontext) {
  const struct sigaction& prev = g_previous[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, ucontext);
    return;
  }
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler != SIG_DFL) {
    prev.sa_handler(sig);
    return;
  }
  // The default action ends the process: let a record write under way finish
  // first, then die of the same signal (exit status as without the shim).
  // When the signal landed inside a write of this very thread, that write
  // has to resume first: it raises the signal again when it is done.
  // Either barrier may find this thread inside one of its writes: then that
  // write raises the signal again when it ends, and the handler runs anew.
  if (!wire::quiesce_writes(1000, sig)) return;
  if (QuiesceFn also = g_also.load(std::memory_order_acquire); also != nullptr && !also(1000, sig)) return;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, sig);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  raise(sig);
}

}  // namespace

void also_quiesce_on_signal(QuiesceFn fn) noexcept { g_also.store(fn, std::memory_order_release); }

void guard_records_against_signals() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kSignals) {
      struct sigaction prev {};
      if (sigaction(sig, nullptr, &prev) != 0) continue;
      if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) continue;  // stays ignored
      g_previous[sig] = prev;
      struct sigaction ours {};
      ours.sa_sigaction = on_signal;
      ours.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&ours.sa_mask);
      sigaction(sig, &ours, nullptr);
    }
  });
}

}  // namespace rocelab::verbs_shim
