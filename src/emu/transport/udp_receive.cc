// The UDP transport (udp_impl.h): receiving. recvmmsg into fixed slots,
// GRO super-datagrams split back into segments, the ancillary data read.
#include "emu/transport/udp_impl.h"

#include <netinet/udp.h>

#include <algorithm>
#include <cstring>

#include "wire/byte_order.h"
#include "wire/packet.h"

namespace rocelab::emu {

// Fills the receive slots from socket fd (datagrams sent to dst, unless
// IP_PKTINFO says otherwise); false when it had nothing.
bool UdpTransport::Impl::receive_batch(int fd, const wire::IpAddr& dst) {
  const size_t slots = cfg.rx_batch;
  for (size_t k = 0; k < slots; ++k) {
    rx_iov[k] = {rx_buf.data() + k * kRxSlotBytes, kRxSlotBytes};
    msghdr& h = rx_msgs[k].msg_hdr;
    h = {};
    h.msg_name = &rx_from[k];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_iov = &rx_iov[k];
    h.msg_iovlen = 1;
    h.msg_control = rx_cmsg[k].data();
    h.msg_controllen = kCmsgBytes;
  }
  int r = ::recvmmsg(fd, rx_msgs.data(), static_cast<unsigned>(slots), MSG_DONTWAIT, nullptr);
  if (r <= 0) return false;
  rx_count = static_cast<size_t>(r);
  rx_next = 0;
  rx_dst = dst;
  ++stats.rx_batches;
  return true;
}

// Reads the next received message's ancillary data; false when none is left.
bool UdpTransport::Impl::start_message() {
  while (rx_next < rx_count) {
    const size_t k = rx_next++;
    const msghdr& h = rx_msgs[k].msg_hdr;
    if (h.msg_flags & MSG_TRUNC) {
      ++ustats.rx_truncated;
      continue;
    }
    cur_ip = wire::IpUdpInfo{};
    from_sockaddr(rx_from[k], cur_ip.src, cur_ip.sport);
    cur_ip.dst = rx_dst;
    cur_ip.dport = wire::kRoceV2Port;
    if (local.v6) cur_ip.ip_header_len = wire::kIpv6HeaderLen;
    size_t seg = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(const_cast<msghdr*>(&h)); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
      int v = 0;
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        in_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        std::memcpy(cur_ip.dst.b.data(), &pi.ipi_addr, 4);
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        std::memcpy(cur_ip.dst.b.data(), &pi.ipi6_addr, 16);
      } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        cur_ip.ttl = static_cast<uint8_t>(v);
      } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        uint8_t tos;
        std::memcpy(&tos, CMSG_DATA(c), 1);
        cur_ip.tclass = tos;
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        cur_ip.ttl = static_cast<uint8_t>(v);
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        cur_ip.tclass = static_cast<uint8_t>(v);
      } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        seg = static_cast<size_t>(v);
      }
    }
    cur_base = rx_buf.data() + k * kRxSlotBytes;
    cur_len = rx_msgs[k].msg_len;
    cur_off = 0;
    cur_seg = seg != 0 && seg < cur_len ? seg : cur_len;
    if (cur_seg < cur_len) ++ustats.gro_receives;
    cur_pending = true;
    return true;
  }
  return false;
}

size_t UdpTransport::poll(const RecvHandler& handler, size_t max) {
  Impl& m = *impl_;
  m.timers.run_due(now());
  m.timer_hint.store(m.timers.next_deadline().count());
  size_t n = 0;
  while (n < max) {
    if (!m.cur_pending && !m.start_message()) {
      // Everything received so far is delivered: ask the sockets for more,
      // the device's own and those of its multicast groups in turn (a busy
      // one does not starve the others).
      const size_t sources = 1 + m.groups.size();
      bool got = false;
      for (size_t i = 0; !got && i < sources; ++i) {
        const size_t k = (m.rx_turn + i) % sources;
        got = k == 0 ? m.receive_batch(m.rx.native_handle(), m.local)
                     : m.receive_batch(m.groups[k - 1].sock.native_handle(), m.groups[k - 1].addr);
        if (got) m.rx_turn = k + 1;
      }
      if (!got) break;
      continue;
    }
    // The next segment of the current message (an empty datagram is delivered once).
    const size_t len = std::min(m.cur_seg, m.cur_len - m.cur_off);
    Datagram d{m.cur_ip, std::span<const std::byte>(m.cur_base + m.cur_off, len)};
    m.cur_off += len;
    if (m.cur_off >= m.cur_len) m.cur_pending = false;
    if (m.on_control && len >= 4 && wire::load_be32(d.payload.data()) == m.control_magic) {
      m.on_control(d);
      continue;
    }
    ++m.stats.rx_datagrams;
    m.stats.rx_bytes += len;
    ++n;
    handler(d);
  }
  // Received but not yet delivered (max reached): wait() must not sleep on them.
  m.rx_backlog.store(m.cur_pending || m.rx_next < m.rx_count);
  return n;
}

}  // namespace rocelab::emu
