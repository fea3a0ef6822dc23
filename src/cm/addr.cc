// Which addresses are ours, how an unbound id finds its device and whether a
// destination is routable, and the port table (bind, listen, ephemeral ports).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cm/impl.h"
#include "wire/packet.h"

namespace rocelab::cm {
namespace {

// The kernel's route lookup for from -> dst, sending nothing: a UDP socket
// bound to the device address and connect()ed to dst. Loopback devices reach
// every 127/8 address; a device on a real interface reaches what its routes
// reach; an address with no route fails as the kernel's rdma_resolve_ip does.
RouteVerdict kernel_route(const wire::IpAddr& from, const wire::IpAddr& dst) {
  const int fam = dst.v6 ? AF_INET6 : AF_INET;
  if (from.v6 != dst.v6) return RouteVerdict::kNetUnreach;
  const int fd = ::socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return RouteVerdict::kHostUnreach;
  sockaddr_storage a{}, b{};
  socklen_t len = 0;
  auto fill = [&](sockaddr_storage& s, const wire::IpAddr& ip, uint16_t port) {
    if (ip.v6) {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(&s);
      s6->sin6_family = AF_INET6;
      s6->sin6_port = htons(port);
      std::memcpy(&s6->sin6_addr, ip.b.data(), 16);
      len = sizeof(sockaddr_in6);
    } else {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&s);
      s4->sin_family = AF_INET;
      s4->sin_port = htons(port);
      std::memcpy(&s4->sin_addr, ip.b.data(), 4);
      len = sizeof(sockaddr_in);
    }
  };
  RouteVerdict v = RouteVerdict::kReachable;
  fill(a, from, 0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    // The device address is not on this host (e.g. a simulated one): judge by dst alone.
  }
  fill(b, dst, wire::kRoceV2Port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&b), len) != 0)
    v = errno == ENETUNREACH ? RouteVerdict::kNetUnreach : RouteVerdict::kHostUnreach;
  ::close(fd);
  return v;
}

bool overlaps(const SockAddr& a, bool a_afonly, const SockAddr& b, bool b_afonly) {
  if (a.is_any() || b.is_any()) {
    if (a.ip.v6 == b.ip.v6) return true;
    // An IPv6 wildcard without AFONLY also takes IPv4 (and conflicts with it).
    const SockAddr& any = a.is_any() ? a : b;
    const bool afonly = a.is_any() ? a_afonly : b_afonly;
    return any.ip.v6 && !afonly;
  }
  return a.ip == b.ip;
}

}  // namespace

uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time) {
  int ack = packet_life_time + 1;
  if (ack >= ca_ack_delay)
    ack += (ca_ack_delay >= ack - 1) ? 1 : 0;
  else
    ack = ca_ack_delay + ((ack >= ca_ack_delay - 1) ? 1 : 0);
  return static_cast<uint8_t>(ack > 31 ? 31 : ack);
}

RouteVerdict Impl::route(const emu::Device& from, const wire::IpAddr& dst) const {
  if (cfg.route) return cfg.route(from, dst);
  return kernel_route(from.address(), dst);
}

DevicePort* Impl::port_for(const wire::IpAddr& ip) const {
  for (const auto& p : ports)
    if (p->dev->address() == ip) return p.get();
  return nullptr;
}

std::error_code Impl::reserve_port(Id& id, SockAddr* addr) {
  auto in_use = [&](uint16_t port) {
    for (const auto& [h, o] : ids) {
      if (h == id.h || !o.bound || o.ps != id.ps || o.src.port != port) continue;
      if (!overlaps(o.src, o.opt.afonly, *addr, id.opt.afonly)) continue;
      const bool listening = o.state == IdState::kListen;
      if (o.opt.reuseaddr && id.opt.reuseaddr && !listening) continue;
      return true;
    }
    return false;
  };
  if (addr->port != 0) {
    if (in_use(addr->port)) return {EADDRINUSE, std::generic_category()};
    return {};
  }
  // The kernel's ip_local_port_range default, from a random start.
  constexpr uint32_t kLow = 32768, kHigh = 60999, kRange = kHigh - kLow + 1;
  const uint32_t start = static_cast<uint32_t>(rng() % kRange);
  for (uint32_t i = 0; i < kRange; ++i) {
    const auto port = static_cast<uint16_t>(kLow + (start + i) % kRange);
    if (!in_use(port)) {
      addr->port = port;
      return {};
    }
  }
  return {EADDRNOTAVAIL, std::generic_category()};
}

}  // namespace rocelab::cm
