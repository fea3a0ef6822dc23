#include "host/runtime_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace rocelab::host {
namespace {

std::error_code errno_code() { return {errno, std::generic_category()}; }

// A directory we may trust: ours, and writable by nobody else.
std::error_code check_private(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno_code();
  if (!S_ISDIR(st.st_mode)) return std::make_error_code(std::errc::not_a_directory);
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return std::make_error_code(std::errc::permission_denied);
  return {};
}

}  // namespace

std::error_code make_private_dirs(const std::string& path) {
  if (path.empty()) return std::make_error_code(std::errc::invalid_argument);
  for (size_t pos = 1;; ++pos) {
    pos = path.find('/', pos);
    const std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return errno_code();
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_code();
  if (!S_ISDIR(st.st_mode)) return std::make_error_code(std::errc::not_a_directory);
  return {};
}

wire::Result<std::string> runtime_dir() {
  std::string dir;
  if (const char* d = std::getenv("ROCELAB_RUNTIME_DIR"); d && *d) {
    dir = d;
  } else if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) {
    dir = std::string(x) + "/rocelab";
  } else if (::geteuid() == 0) {
    dir = "/run/rocelab";
  } else {
    dir = "/tmp/rocelab-" + std::to_string(::geteuid());
  }
  if (auto ec = make_private_dirs(dir)) return ec;
  if (auto ec = check_private(dir)) return ec;
  return dir;
}

wire::Result<uint64_t> netns_inode() {
  struct stat st;
  if (::stat("/proc/thread-self/ns/net", &st) != 0 && ::stat("/proc/self/ns/net", &st) != 0)
    return errno_code();
  return static_cast<uint64_t>(st.st_ino);
}

wire::Result<std::string> net_dir() {
  auto root = runtime_dir();
  if (!root) return root.error();
  auto ino = netns_inode();
  if (!ino) return ino.error();
  std::string dir = *root + "/net-" + std::to_string(*ino);
  if (auto ec = make_private_dirs(dir)) return ec;
  return dir;
}

}  // namespace rocelab::host
