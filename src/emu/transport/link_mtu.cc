#include "emu/transport/link_mtu.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rocelab::emu {
namespace {

std::error_code sys(int e) { return {e, std::generic_category()}; }

// How ifa relates to addr: 2 = the interface has addr assigned, 1 = it is a
// loopback interface and addr lies in its network (127.0.0.2 on lo, which
// holds 127.0.0.1/8 and answers for all of it), 0 = neither.
int match(const ifaddrs& ifa, const wire::IpAddr& addr) {
  if (ifa.ifa_addr == nullptr) return 0;
  const uint8_t* have = nullptr;
  const uint8_t* mask = nullptr;
  size_t len = 0;
  if (ifa.ifa_addr->sa_family == AF_INET && !addr.v6) {
    have = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(ifa.ifa_addr)->sin_addr);
    if (ifa.ifa_netmask)
      mask = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(ifa.ifa_netmask)->sin_addr);
    len = 4;
  } else if (ifa.ifa_addr->sa_family == AF_INET6 && addr.v6) {
    have = reinterpret_cast<const sockaddr_in6*>(ifa.ifa_addr)->sin6_addr.s6_addr;
    if (ifa.ifa_netmask) mask = reinterpret_cast<const sockaddr_in6*>(ifa.ifa_netmask)->sin6_addr.s6_addr;
    len = 16;
  } else {
    return 0;
  }
  if (std::memcmp(have, addr.b.data(), len) == 0) return 2;
  if (mask == nullptr || !(ifa.ifa_flags & IFF_LOOPBACK)) return 0;
  for (size_t i = 0; i < len; ++i)
    if ((have[i] & mask[i]) != (addr.b[i] & mask[i])) return 0;
  return 1;
}

}  // namespace

wire::Result<Netdev> netdev_of(const wire::IpAddr& addr) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return sys(errno);
  Netdev dev;  // the interface holding addr, else the one whose network has it
  int best = 0;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    const int m = match(*i, addr);
    if (m > best) {
      best = m;
      dev.name = i->ifa_name;
    }
  }
  ::freeifaddrs(list);
  if (dev.name.empty()) return sys(ENODEV);
  dev.ifindex = ::if_nametoindex(dev.name.c_str());
  if (dev.ifindex == 0) return sys(errno);  // gone since
  return dev;
}

wire::Result<uint32_t> link_mtu(const wire::IpAddr& addr) {
  auto dev = netdev_of(addr);
  if (!dev) return dev.error();
  const std::string& name = dev->name;
  const int fd = ::socket(addr.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys(errno);
  ifreq req{};
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  const int r = ::ioctl(fd, SIOCGIFMTU, &req);
  const int e = errno;
  ::close(fd);
  if (r != 0) return sys(e);
  return static_cast<uint32_t>(req.ifr_mtu);
}

}  // namespace rocelab::emu
