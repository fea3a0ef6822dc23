#include "stat/client.h"

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "stat/frame.h"
#include "stat/proc.h"
#include "stat/registry.h"

namespace rocelab::stat {
namespace {

using Clock = std::chrono::steady_clock;

// Reads len bytes before deadline; false on EOF, error or timeout.
bool read_all(int fd, void* out, size_t len, Clock::time_point deadline) {
  char* p = static_cast<char*>(out);
  while (len > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::recv(fd, p, len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

Entry stale(Entry e, const std::string& why) {
  ::unlink(e.path.c_str());
  e.status = Entry::Status::kStale;
  e.message = "pid " + std::to_string(e.pid) + " " + why + ": its registry entry was removed";
  return e;
}

Entry failed(Entry e, Entry::Status s, const std::string& why) {
  e.status = s;
  e.message = "pid " + std::to_string(e.pid) + ": " + why;
  return e;
}

}  // namespace

Entry read_entry(const std::string& path, uint32_t pid, uint64_t start_ticks, int timeout_ms) {
  Entry e;
  e.pid = pid;
  e.path = path;
  auto ticks = process_start_ticks(pid);
  if (!ticks) return stale(std::move(e), "is not running");
  if (*ticks != start_ticks) return stale(std::move(e), "is another process now (the one that registered ended)");

  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return failed(std::move(e), Entry::Status::kBad, "socket path too long");
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return failed(std::move(e), Entry::Status::kNoAnswer, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno == ECONNREFUSED || errno == ENOENT) return stale(std::move(e), "does not listen on its entry");
    return failed(std::move(e), Entry::Status::kNoAnswer, std::string("connect: ") + std::strerror(errno));
  }
  ucred cred{};
  socklen_t cl = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || static_cast<uint32_t>(cred.pid) != pid)
    return failed(std::move(e), Entry::Status::kBad,
                  "its entry is bound by another process (pid " + std::to_string(cred.pid) + "): not trusted");

  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  FrameHeader h{};
  if (!read_all(fd, &h, sizeof h, deadline))
    return failed(std::move(e), Entry::Status::kNoAnswer,
                  "no answer within " + std::to_string(timeout_ms) + " ms");
  if (std::memcmp(h.magic, kFrameMagic, sizeof h.magic) != 0)
    return failed(std::move(e), Entry::Status::kBad, "its answer is not a rocelab stat frame");
  if (h.layout != kStatLayoutVersion)
    return failed(std::move(e), Entry::Status::kOtherVersion,
                  "runs rocelab " + header_version(h) + " (stat layout " + std::to_string(h.layout) +
                      "), this is rocelab " + std::string(rocelab_version()) + " (stat layout " +
                      std::to_string(kStatLayoutVersion) + "): not read; use the rocelab it runs");
  if (h.length > kMaxFrameBody)
    return failed(std::move(e), Entry::Status::kBad, "its answer claims " + std::to_string(h.length) + " bytes");
  std::string body(h.length, '\0');
  if (!read_all(fd, body.data(), body.size(), deadline))
    return failed(std::move(e), Entry::Status::kNoAnswer, "its answer was cut short");
  if (!e.process.ParseFromString(body) || e.process.pid() != pid)
    return failed(std::move(e), Entry::Status::kBad, "its answer does not decode as a Process of pid " +
                                                          std::to_string(pid));
  e.status = Entry::Status::kLive;
  return e;
}

wire::Result<std::vector<Entry>> read_registry(const std::string& dir, int timeout_ms) {
  std::vector<Entry> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    return std::error_code(errno, std::generic_category());
  }
  struct Names {
    std::string name;
    uint32_t pid;
    uint64_t start;
  };
  std::vector<Names> names;
  while (dirent* de = ::readdir(d)) {
    Names n{de->d_name, 0, 0};
    if (parse_entry_name(n.name, &n.pid, &n.start)) names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end(), [](const Names& a, const Names& b) { return a.pid < b.pid; });
  for (const Names& n : names) out.push_back(read_entry(dir + "/" + n.name, n.pid, n.start, timeout_ms));
  return out;
}

}  // namespace rocelab::stat
