#include "host/bounded_lock.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace rocelab::host {

bool lock_within(int fd, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // Held only for table updates (microseconds): a short first wait, longer
  // ones after, never more than a millisecond late.
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    if (Clock::now() >= deadline) {
      errno = ETIMEDOUT;
      return false;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::string describe_lock_holder(int fd) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) return "a process that /proc/locks does not name";
  char id[64];
  std::snprintf(id, sizeof id, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  // "1: FLOCK  ADVISORY  WRITE 4242 00:2a:1234 0 EOF"; waiters' lines have "->".
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream in(line);
    std::string n, kind, mode, rw, pid, where;
    if (!(in >> n >> kind) || kind == "->" || kind != "FLOCK") continue;
    if (!(in >> mode >> rw >> pid >> where) || where != id) continue;
    std::string comm, state = "?";
    std::ifstream comm_file("/proc/" + pid + "/comm");
    std::getline(comm_file, comm);
    std::ifstream stat_file("/proc/" + pid + "/stat");
    std::string all((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    if (size_t close = all.rfind(')'); close != std::string::npos && close + 2 < all.size())
      state = all.substr(close + 2, 1);
    std::string s = "pid " + pid + " (" + (comm.empty() ? "?" : comm);
    if (state == "T" || state == "t") s += ", stopped";
    else if (state == "D") s += ", in uninterruptible sleep";
    else if (state == "Z") s += ", a zombie";
    return s + ")";
  }
  return "a process that /proc/locks does not name";
}

}  // namespace rocelab::host
