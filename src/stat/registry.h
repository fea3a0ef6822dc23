// The registry behind `rocelab stat`: every process with an emulated device
// open listens on a unix socket of its own below the runtime directory,
//
//   <host::net_dir()>/stat/<pid>-<start ticks>.sock
//
// (one directory per network namespace, private to the user), and answers
// each connection with one frame (frame.h) of its devices' snapshots. The
// server is a thread that sleeps in poll() until someone connects: nothing of
// it runs on the data path, and a snapshot takes each device's lock once.
//
// A process that ends normally withdraws its entry; one killed leaves the
// socket file behind, which the reader (client.h) finds dead — its pid gone,
// or taken by a process with another start time, or refusing connections —
// and removes.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "emu/snapshot.h"
#include "wire/error.h"

namespace rocelab::stat {

// <net_dir>/stat
std::string registry_dir(const std::string& net_dir);
// "<pid>-<start ticks>.sock"
std::string entry_name(uint32_t pid, uint64_t start_ticks);
// The pid and start ticks an entry's file name gives; false for another name.
bool parse_entry_name(const std::string& name, uint32_t* pid, uint64_t* start_ticks);

// Removes the entries of dir whose process is gone (by pid and start time,
// without connecting): what a publisher does as it starts, so that entries
// left by killed processes do not pile up between readers.
void remove_dead_entries(const std::string& dir);

using SnapshotFn = std::function<std::vector<emu::DeviceSnapshot>()>;

class Publisher {
 public:
  // Creates dir (0700) if needed, binds this process's entry there and starts
  // the thread that answers with snapshot()'s devices. Errors: the directory
  // or socket cannot be made (its errno), the path is too long for a unix
  // socket (ENAMETOOLONG).
  static wire::Result<std::unique_ptr<Publisher>> start(const std::string& dir, SnapshotFn snapshot);
  // Withdraws the entry (unlinks it) and stops the thread.
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  const std::string& path() const { return path_; }
  // The process that started it; in a child made by fork() it is not this
  // one, and the child's copy does nothing (not even withdraw the parent's entry).
  uint32_t pid() const { return pid_; }

 private:
  Publisher() = default;
  void serve();
  void answer(int conn);

  std::string path_;
  uint32_t pid_ = 0;
  uint64_t start_ticks_ = 0;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: the destructor wakes the thread
  SnapshotFn snapshot_;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace rocelab::stat
