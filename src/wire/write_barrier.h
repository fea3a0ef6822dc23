// Records that survive a signal. The pcap writer and the event log write their
// buffers out between write_begin() and write_end(); a signal handler about to
// let the process die calls quiesce_writes() first, which waits (bounded) until
// no such write is in progress and makes later ones return without writing.
// Then a file never ends inside a record because a signal landed mid-write
// (a SIGKILL, which no handler sees, still can). Everything here is
// async-signal-safe: lock-free atomics only.
#pragma once

namespace rocelab::wire {

// False once quiesce_writes() ran: the caller must not write then.
bool write_begin() noexcept;
void write_end() noexcept;

// From a signal handler about to let the process die of signal sig: no new
// writes start; waits until those under way have ended, at most about
// max_wait_ms milliseconds, and returns true. When the signal interrupted a
// write of the handler's own thread, waiting would be in vain (that write
// resumes only after the handler returns): then it returns false at once, and
// the thread raises sig again as soon as its write has ended (write_end), so
// the handler must just return.
bool quiesce_writes(int max_wait_ms, int sig) noexcept;

}  // namespace rocelab::wire
