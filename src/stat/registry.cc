#include "stat/registry.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>

#include "host/runtime_dir.h"
#include "stat/encode.h"
#include "stat/frame.h"
#include "stat/proc.h"

namespace rocelab::stat {
namespace {

std::error_code last_error() { return {errno, std::generic_category()}; }

bool send_all(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string_view rocelab_version() { return ROCELAB_VERSION; }

std::string registry_dir(const std::string& net_dir) { return net_dir + "/stat"; }

std::string entry_name(uint32_t pid, uint64_t start_ticks) {
  return std::to_string(pid) + "-" + std::to_string(start_ticks) + ".sock";
}

bool parse_entry_name(const std::string& name, uint32_t* pid, uint64_t* start_ticks) {
  const char* b = name.data();
  const char* e = b + name.size();
  auto [p1, ec1] = std::from_chars(b, e, *pid);
  if (ec1 != std::errc{} || p1 == e || *p1 != '-') return false;
  auto [p2, ec2] = std::from_chars(p1 + 1, e, *start_ticks);
  return ec2 == std::errc{} && std::string_view(p2, static_cast<size_t>(e - p2)) == ".sock";
}

void remove_dead_entries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> dead;
  while (dirent* de = ::readdir(d)) {
    uint32_t pid = 0;
    uint64_t start = 0;
    if (!parse_entry_name(de->d_name, &pid, &start)) continue;
    if (process_start_ticks(pid) != start) dead.push_back(dir + "/" + de->d_name);
  }
  ::closedir(d);
  for (const std::string& path : dead) ::unlink(path.c_str());
}

wire::Result<std::unique_ptr<Publisher>> Publisher::start(const std::string& dir, SnapshotFn snapshot) {
  if (std::error_code ec = host::make_private_dirs(dir)) return ec;
  remove_dead_entries(dir);
  std::unique_ptr<Publisher> p(new Publisher);
  p->pid_ = static_cast<uint32_t>(::getpid());
  auto ticks = process_start_ticks(p->pid_);
  if (!ticks) return std::make_error_code(std::errc::no_such_process);
  p->start_ticks_ = *ticks;
  p->path_ = dir + "/" + entry_name(p->pid_, p->start_ticks_);
  p->snapshot_ = std::move(snapshot);

  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (p->path_.size() >= sizeof sa.sun_path) return std::make_error_code(std::errc::filename_too_long);
  std::memcpy(sa.sun_path, p->path_.c_str(), p->path_.size() + 1);
  p->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (p->listen_fd_ < 0) return last_error();
  ::unlink(p->path_.c_str());  // ours by name: a file left by an earlier process with our pid and start time cannot exist
  if (::bind(p->listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(p->listen_fd_, 16) != 0) {
    std::error_code ec = last_error();
    ::close(p->listen_fd_);
    p->listen_fd_ = -1;
    return ec;
  }
  p->stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (p->stop_fd_ < 0) {
    std::error_code ec = last_error();
    ::unlink(p->path_.c_str());
    return ec;  // the destructor closes listen_fd_
  }
  // The thread takes no signals: they stay with the program's own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  p->thread_ = std::make_unique<std::thread>([raw = p.get()] { raw->serve(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return p;
}

Publisher::~Publisher() {
  if (pid_ != static_cast<uint32_t>(::getpid())) {
    // A child made by fork(): the thread and the entry are the parent's.
    (void)thread_.release();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (stop_fd_ >= 0) ::close(stop_fd_);
    return;
  }
  if (!path_.empty() && thread_) ::unlink(path_.c_str());
  if (thread_) {
    uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_->join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void Publisher::serve() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    answer(conn);
    ::close(conn);
  }
}

void Publisher::answer(int conn) {
  // A reader that stops reading holds us up for a second at most.
  timeval tv{1, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ProcessInfo info;
  info.pid = pid_;
  info.comm = process_comm(pid_);
  info.cmdline = process_cmdline(pid_);
  info.start_ticks = start_ticks_;
  info.version = std::string(rocelab_version());
  info.taken_unix_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  const std::vector<emu::DeviceSnapshot> devices = snapshot_();
  const std::string body = encode_process(info, devices);
  if (body.size() > kMaxFrameBody) return;  // the reader sees the connection closed: no answer
  const FrameHeader h = make_header(static_cast<uint32_t>(body.size()));
  if (send_all(conn, &h, sizeof h)) send_all(conn, body.data(), body.size());
}

}  // namespace rocelab::stat
