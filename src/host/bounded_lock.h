// The address group's lock (flock of <dir>/lock) taken with a deadline, and
// who holds it when the deadline passes: a member stopped with SIGSTOP (or
// under a debugger) keeps its lock, and a process that joins must not hang
// behind it without a word.
#pragma once
#include <string>

namespace rocelab::host {

// flock(fd, LOCK_EX), given up after timeout_ms: false with errno ETIMEDOUT
// then, or with flock's errno on another failure.
bool lock_within(int fd, int timeout_ms);

// Who holds an flock on fd's file, from /proc/locks: "pid 123 (prog,
// stopped)" — the state said when it is not running or sleeping — or
// "a process that /proc/locks does not name".
std::string describe_lock_holder(int fd);

}  // namespace rocelab::host
