// This process's entry in the `rocelab stat` registry (src/stat/registry.h):
// made when its first emulated device starts, answering with a snapshot of
// every device open at the time of asking, withdrawn at exit. A process
// killed leaves it behind; readers find it dead and remove it.
#pragma once

namespace rocelab::verbs_shim {

// Publishes the entry if this process (after a fork: this child) has none
// yet. When the registry cannot be reached the program runs on, unlisted,
// and one line on stderr says why.
void ensure_stat_entry() noexcept;

}  // namespace rocelab::verbs_shim
