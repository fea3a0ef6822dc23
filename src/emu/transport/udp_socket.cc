// The UDP transport (udp_impl.h): sockets. Binding, the receive socket's
// options, loopback address allocation, the send socket of each source port.
#include "emu/transport/udp_impl.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <cstring>

#include "wire/packet.h"

namespace rocelab::emu {

namespace udp_detail {

std::error_code last_error() { return {errno, std::system_category()}; }

socklen_t to_sockaddr(const wire::IpAddr& a, uint16_t port, sockaddr_storage& ss, uint32_t scope_id) {
  std::memset(&ss, 0, sizeof ss);
  if (a.v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(&s6->sin6_addr, a.b.data(), 16);
    if (is_link_local(a)) s6->sin6_scope_id = scope_id;
    return sizeof(sockaddr_in6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  std::memcpy(&s4->sin_addr, a.b.data(), 4);
  return sizeof(sockaddr_in);
}

void from_sockaddr(const sockaddr_storage& ss, wire::IpAddr& a, uint16_t& port) {
  if (ss.ss_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    a.v6 = true;
    std::memcpy(a.b.data(), &s6->sin6_addr, 16);
    port = ntohs(s6->sin6_port);
  } else {
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(&ss);
    a = wire::IpAddr{};
    std::memcpy(a.b.data(), &s4->sin_addr, 4);
    port = ntohs(s4->sin_port);
  }
}

void set_buffer(int fd, int force_opt, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0) {
    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);  // best effort without CAP_NET_ADMIN
  }
}

int set_int(int fd, int level, int opt, int v) { return setsockopt(fd, level, opt, &v, sizeof v); }

// A non-blocking UDP socket bound to (addr, port).
Result<int> bind_udp(const wire::IpAddr& addr, uint16_t port, uint32_t scope_id) {
  int fd = ::socket(addr.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return last_error();
  sockaddr_storage ss;
  socklen_t len = to_sockaddr(addr, port, ss, scope_id);
  if (addr.v6) set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    std::error_code ec = last_error();
    ::close(fd);
    return ec;
  }
  return fd;
}

// The index of the interface that has address a (0: none has it).
uint32_t ifindex_of(const wire::IpAddr& a) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  uint32_t index = 0;
  for (ifaddrs* i = list; i != nullptr && index == 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != (a.v6 ? AF_INET6 : AF_INET)) continue;
    const void* raw = a.v6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr)
                           : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
    if (std::memcmp(raw, a.b.data(), a.v6 ? 16 : 4) == 0) index = ::if_nametoindex(i->ifa_name);
  }
  ::freeifaddrs(list);
  return index;
}

// What a receive socket reports with each datagram, and its buffer.
void set_rx_options(int fd, bool v6, const UdpTransportConfig& cfg) {
  set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, cfg.socket_buffer_bytes);
  if (v6) {
    set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
    // Soft-RoCE sends RoCEv2 over IPv6 with a UDP checksum of 0 (the ICRC
    // guards the packet), which RFC 8200 forbids and Linux drops unless the
    // socket allows it; real NICs may do the same. Without this no packet of
    // the kernel's reached the engine (make interop, rc6).
    set_int(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, 1);
  } else {
    set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
    set_int(fd, IPPROTO_IP, IP_RECVTTL, 1);
    set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
  }
  if (cfg.gro) set_int(fd, IPPROTO_UDP, UDP_GRO, 1);  // older kernels: plain datagrams
}

}  // namespace udp_detail

RxSocket& RxSocket::operator=(RxSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    addr_ = o.addr_;
    o.fd_ = -1;
  }
  return *this;
}

RxSocket::~RxSocket() {
  if (fd_ >= 0) ::close(fd_);
}

bool is_link_local(const wire::IpAddr& a) { return a.v6 && a.b[0] == 0xfe && (a.b[1] & 0xc0) == 0x80; }

Result<RxSocket> bind_rx_socket(const wire::IpAddr& addr, uint32_t scope_id) {
  auto fd = bind_udp(addr, wire::kRoceV2Port, scope_id);
  if (!fd) return fd.error();
  return RxSocket(*fd, addr);
}

Result<RxSocket> allocate_loopback_address(uint8_t first) {
  for (unsigned x = std::max<unsigned>(first, 1); x <= 254; ++x) {
    auto s = bind_rx_socket(wire::IpAddr::v4(127, 0, 0, static_cast<uint8_t>(x)));
    if (s) return s;
    if (s.error() != std::errc::address_in_use) return s.error();
  }
  return std::make_error_code(std::errc::address_in_use);
}

Result<int> UdpTransport::Impl::send_fd(uint16_t port) {
  if (port < kFirstSourcePort) return std::make_error_code(std::errc::invalid_argument);
  int32_t& idx = sock_of_port[port - kFirstSourcePort];
  if (idx >= 0) return send_socks[static_cast<size_t>(idx)].native_handle();
  auto fd = bind_udp(local, port, cfg.scope_id);
  if (!fd) return fd.error();
  // ICMP errors for what we send (a peer that has exited answers "port
  // unreachable"): queued on the socket, read by read_errors().
  set_int(*fd, local.v6 ? IPPROTO_IPV6 : IPPROTO_IP, local.v6 ? IPV6_RECVERR : IP_RECVERR, 1);
  if (local.v6) {
    set_int(*fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
  } else {
    // DF set and, on an unconnected socket, IPv4 ID 0 (ip_select_ident_segs):
    // the header the ICRC was computed over.
    set_int(*fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
  }
  set_buffer(*fd, SO_SNDBUFFORCE, SO_SNDBUF, cfg.socket_buffer_bytes);
  // Datagrams to a multicast group leave on the local address's interface
  // (not the default route's) with the TTL of every other packet, and come
  // back to this host's members (our own joined groups included, as on rxe).
  if (local.v6) {
    set_int(*fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, static_cast<int>(ifindex()));
    set_int(*fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, 64);
    set_int(*fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, 1);
  } else {
    in_addr ifaddr;
    std::memcpy(&ifaddr, local.b.data(), 4);
    setsockopt(*fd, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, sizeof ifaddr);
    set_int(*fd, IPPROTO_IP, IP_MULTICAST_TTL, 64);
    set_int(*fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1);
  }
  boost::system::error_code ec;
  send_socks.emplace_back(io);
  send_socks.back().assign(local.v6 ? udp::v6() : udp::v4(), *fd, ec);
  if (ec) {
    send_socks.pop_back();
    ::close(*fd);
    return std::error_code(ec.value(), std::system_category());
  }
  idx = static_cast<int32_t>(send_socks.size() - 1);
  return *fd;
}

Result<uint16_t> UdpTransport::reserve_source_port(uint16_t preferred) {
  const uint32_t span = 0x10000 - kFirstSourcePort;
  const uint32_t start = preferred >= kFirstSourcePort ? preferred - kFirstSourcePort : 0;
  for (uint32_t i = 0; i < span; ++i) {
    const auto port = static_cast<uint16_t>(kFirstSourcePort + (start + i) % span);
    auto fd = impl_->send_fd(port);
    if (fd) return port;
    if (fd.error() != std::errc::address_in_use) return fd.error();
  }
  return std::make_error_code(std::errc::address_in_use);
}

}  // namespace rocelab::emu
