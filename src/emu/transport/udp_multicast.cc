// The UDP transport (udp_impl.h): multicast groups, a socket bound to
// <group>:4791 per group joined.
#include "emu/transport/udp_impl.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "wire/packet.h"

namespace rocelab::emu {

uint32_t UdpTransport::Impl::ifindex() {
  if (mcast_ifindex == 0) mcast_ifindex = is_link_local(local) ? cfg.scope_id : ifindex_of(local);
  return mcast_ifindex;
}

std::error_code UdpTransport::join_group(const wire::IpAddr& group) {
  Impl& m = *impl_;
  if (!group.is_multicast() || group.v6 != m.local.v6)
    return std::make_error_code(std::errc::invalid_argument);
  for (Impl::Group& g : m.groups) {
    if (g.addr == group) {
      ++g.joins;
      return {};
    }
  }
  // Every member socket of the group on this host gets its own copy of each
  // datagram: several devices (processes) may join the same group.
  int fd = ::socket(group.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return last_error();
  set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(group, wire::kRoceV2Port, ss);
  int r = -1;
  if (group.v6) {
    set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    ipv6_mreq mr{};
    std::memcpy(&mr.ipv6mr_multiaddr, group.b.data(), 16);
    mr.ipv6mr_interface = m.ifindex();
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0)
      r = setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &mr, sizeof mr);
  } else {
    set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);  // only what this socket joined
    ip_mreqn mr{};
    std::memcpy(&mr.imr_multiaddr, group.b.data(), 4);
    std::memcpy(&mr.imr_address, m.local.b.data(), 4);  // the local address's interface
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0)
      r = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof mr);
  }
  if (r != 0) {
    std::error_code ec = last_error();
    ::close(fd);
    return ec;
  }
  set_rx_options(fd, group.v6, UdpTransportConfig{.gro = false});
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (::epoll_ctl(m.group_ep.native_handle(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    std::error_code e = last_error();
    ::close(fd);
    return e;
  }
  boost::system::error_code ec;
  m.groups.push_back(Impl::Group{group, 1, udp::socket(m.io)});
  m.groups.back().sock.assign(group.v6 ? udp::v6() : udp::v4(), fd, ec);
  if (ec) {
    m.groups.pop_back();
    ::close(fd);
    return std::error_code(ec.value(), std::system_category());
  }
  return {};
}

void UdpTransport::leave_group(const wire::IpAddr& group) {
  Impl& m = *impl_;
  for (auto it = m.groups.begin(); it != m.groups.end(); ++it) {
    if (!(it->addr == group)) continue;
    if (--it->joins > 0) return;
    ::epoll_ctl(m.group_ep.native_handle(), EPOLL_CTL_DEL, it->sock.native_handle(), nullptr);
    m.groups.erase(it);  // closing the socket leaves the group
    return;
  }
}

}  // namespace rocelab::emu
