// What /proc tells about a process: enough to name it in `rocelab stat` and to
// tell it from a later process that got the same pid.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace rocelab::stat {

// Field 22 of /proc/<pid>/stat, the start time in clock ticks since boot:
// (pid, start ticks) names one process for as long as the machine is up.
// nullopt when there is no such process (or /proc cannot be read).
std::optional<uint64_t> process_start_ticks(uint32_t pid);

// /proc/<pid>/comm without its newline; "" when unreadable.
std::string process_comm(uint32_t pid);

// /proc/<pid>/cmdline with its NULs as spaces, cut at max_len bytes; "" when unreadable.
std::string process_cmdline(uint32_t pid, size_t max_len = 512);

}  // namespace rocelab::stat
