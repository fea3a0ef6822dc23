// The UDP transport (udp_impl.h): ICMP errors the kernel queued on the send
// sockets (IP_RECVERR), and the destinations they name as unreachable.
#include "emu/transport/udp_impl.h"

#include <linux/errqueue.h>

#include <cstring>

namespace rocelab::emu {

// An ICMP error came back for a datagram this socket sent (IP_RECVERR): the
// kernel queued it, with the datagram's destination in msg_name. Port, host or
// network unreachable means nobody receives RoCEv2 there any more.
void UdpTransport::Impl::read_errors(int fd) {
  for (int k = 0; k < 64; ++k) {
    sockaddr_storage to{};
    std::array<std::byte, 64> data;
    CmsgBuf control;
    iovec iov{data.data(), data.size()};
    msghdr mh{};
    mh.msg_name = &to;
    mh.msg_namelen = sizeof to;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.data();
    mh.msg_controllen = sizeof control.bytes;
    if (::recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      const bool v4 = c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR;
      const bool v6 = c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR;
      if (!v4 && !v6) continue;
      sock_extended_err ee;
      std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
      const bool icmp = ee.ee_origin == SO_EE_ORIGIN_ICMP || ee.ee_origin == SO_EE_ORIGIN_ICMP6;
      const bool gone = ee.ee_errno == ECONNREFUSED || ee.ee_errno == EHOSTUNREACH ||
                        ee.ee_errno == ENETUNREACH;
      if (!icmp || !gone) continue;
      wire::IpAddr a;
      if (to.ss_family == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&to);
        a = wire::IpAddr::from_v4_u32(ntohl(sin->sin_addr.s_addr));
      } else if (to.ss_family == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&to);
        a.v6 = true;
        std::memcpy(a.b.data(), &sin6->sin6_addr, 16);
      } else {
        continue;
      }
      unreachable.add(a);
    }
  }
}

size_t UdpTransport::take_unreachable(std::span<wire::IpAddr> out) {
  return impl_->unreachable.take(out);
}

}  // namespace rocelab::emu
