#include "host/port_holder.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rocelab::host {

std::string describe_port_holder(const wire::IpAddr& addr, uint16_t port) {
  // /proc/net/udp{,6}: local address as the kernel's words in hex, then the inode.
  std::ostringstream want;
  char hex[40];
  if (addr.v6) {
    for (int w = 0; w < 4; ++w) {
      uint32_t v;
      std::memcpy(&v, addr.b.data() + 4 * w, 4);
      std::snprintf(hex, sizeof hex, "%08X", v);
      want << hex;
    }
  } else {
    uint32_t v;
    std::memcpy(&v, addr.b.data(), 4);
    std::snprintf(hex, sizeof hex, "%08X", v);
    want << hex;
  }
  std::snprintf(hex, sizeof hex, ":%04X", port);
  want << hex;
  std::ifstream f(addr.v6 ? "/proc/net/udp6" : "/proc/net/udp");
  std::string line, inode;
  std::getline(f, line);
  while (inode.empty() && std::getline(f, line)) {
    std::istringstream in(line);
    std::string sl, local, rem, st, queues, tr, retr, uid, timeout, ino;
    in >> sl >> local >> rem >> st >> queues >> tr >> retr >> uid >> timeout >> ino;
    if (local == want.str()) inode = ino;
  }
  if (inode.empty()) return "a socket this process cannot see";
  const std::string target = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  std::string who;
  for (dirent* e; proc != nullptr && who.empty() && (e = ::readdir(proc)) != nullptr;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string fd_dir = std::string("/proc/") + e->d_name + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    for (dirent* d; fds != nullptr && (d = ::readdir(fds)) != nullptr;) {
      char link[128];
      const std::string p = fd_dir + "/" + d->d_name;
      const ssize_t n = ::readlink(p.c_str(), link, sizeof link - 1);
      if (n <= 0) continue;
      link[n] = 0;
      if (target != link) continue;
      std::ifstream comm(std::string("/proc/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      who = "pid " + std::string(e->d_name) + " (" + name + ")";
      break;
    }
    if (fds != nullptr) ::closedir(fds);
  }
  if (proc != nullptr) ::closedir(proc);
  return who.empty() ? "a process of another user (socket inode " + inode + ")" : who;
}

}  // namespace rocelab::host
