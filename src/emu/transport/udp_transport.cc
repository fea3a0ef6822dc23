#include "emu/transport/udp_transport.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include "emu/transport/timer_queue.h"
#include "emu/transport/unreachable_set.h"
#include "wire/byte_order.h"
#include "wire/icrc.h"
#include "wire/packet.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace rocelab::emu {

namespace asio = boost::asio;
using asio::ip::udp;

namespace {

constexpr size_t kRxSlotBytes = 65536;   // a GRO super-datagram fits
constexpr size_t kMaxGsoSegments = 64;   // UDP_MAX_SEGMENTS on older kernels
constexpr size_t kMaxGsoBytes = 65000;   // below the 16-bit IP/UDP length limits
constexpr size_t kTxMsgs = 64;           // messages per sendmmsg
constexpr size_t kCmsgBytes = 128;
constexpr int64_t kNoDeadline = INT64_MAX;
constexpr int64_t kNotSleeping = INT64_MIN;

// Control-message space, aligned as the kernel's CMSG macros expect.
struct alignas(cmsghdr) CmsgBuf {
  std::byte bytes[kCmsgBytes];
  std::byte* data() { return bytes; }
};

std::error_code last_error() { return {errno, std::system_category()}; }

socklen_t to_sockaddr(const wire::IpAddr& a, uint16_t port, sockaddr_storage& ss, uint32_t scope_id = 0) {
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

}  // namespace

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

struct UdpTransport::Impl {
  UdpTransportConfig cfg;
  wire::IpAddr local;
  asio::io_context io;  // send sockets may be registered from another thread than wait()'s
  udp::socket rx{io};
  asio::posix::stream_descriptor wake_fd{io};
  asio::steady_timer sleep_timer{io};
  TimerQueue timers;
  std::atomic<int64_t> timer_hint{kNoDeadline};   // earliest armed timer (may be early)
  std::atomic<int64_t> sleeping_until{kNotSleeping};
  std::atomic<bool> rx_backlog{false};  // poll() left received datagrams undelivered
  TransportStats stats;
  UdpStats ustats;

  // Multicast groups joined (join_group): a socket bound to <group>:4791 each,
  // member of the group on the local address's interface.
  struct Group {
    wire::IpAddr addr;
    int joins = 0;
    udp::socket sock;
  };
  std::deque<Group> groups;
  // wait() sleeps on this epoll set of the group sockets (join_group and
  // leave_group change it while wait() may run in another thread).
  asio::posix::stream_descriptor group_ep{io};
  uint32_t mcast_ifindex = 0;  // IPv6: the interface of the local address (0: not looked up)

  // Send sockets, one per reserved source port.
  std::deque<udp::socket> send_socks;
  std::vector<int32_t> sock_of_port = std::vector<int32_t>(0x10000 - kFirstSourcePort, -1);

  // Receive state: recvmmsg slots and the position of the next segment to deliver.
  std::vector<std::byte> rx_buf;
  std::vector<mmsghdr> rx_msgs;
  std::vector<iovec> rx_iov;
  std::vector<sockaddr_storage> rx_from;
  std::vector<CmsgBuf> rx_cmsg;
  size_t rx_count = 0, rx_next = 0;  // messages received, next message to start
  wire::IpAddr rx_dst;               // where they were sent (without IP_PKTINFO)
  size_t rx_turn = 0;                // the socket to read first next time (0: rx, k: groups[k-1])
  size_t cur_off = 0, cur_len = 0, cur_seg = 0;  // segments of the current message
  bool cur_pending = false;  // the current message has segments left to deliver
  std::byte* cur_base = nullptr;
  wire::IpUdpInfo cur_ip;

  // Send scratch (sized once).
  std::array<mmsghdr, kTxMsgs> tx_msgs{};
  std::array<iovec, kTxMsgs * kMaxGsoSegments> tx_iov{};
  std::array<sockaddr_storage, kTxMsgs> tx_to{};
  std::array<CmsgBuf, kTxMsgs> tx_cmsg{};
  std::array<size_t, kTxMsgs> tx_count{};  // datagrams per message

  // Destinations ICMP reported unreachable (read from the send sockets' error queues).
  UnreachableSet unreachable;

  Result<int> send_fd(uint16_t port);
  uint32_t ifindex();
  bool receive_batch(int fd, const wire::IpAddr& dst);
  bool start_message();
  size_t send_run(int fd, std::span<const Datagram> run);
  void read_errors(int fd);
};

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

Result<std::unique_ptr<UdpTransport>> UdpTransport::open(const wire::IpAddr& local,
                                                        const UdpTransportConfig& cfg) {
  auto rx = bind_rx_socket(local, cfg.scope_id);
  if (!rx) return rx.error();
  return open(std::move(*rx), cfg);
}

Result<std::unique_ptr<UdpTransport>> UdpTransport::open(RxSocket rx_sock,
                                                        const UdpTransportConfig& cfg) {
  if (rx_sock.fd() < 0) return std::make_error_code(std::errc::bad_file_descriptor);
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->cfg.rx_batch = std::clamp<size_t>(cfg.rx_batch, 1, 1024);
  impl->local = rx_sock.address();
  const int fd = rx_sock.fd();
  set_rx_options(fd, impl->local.v6, cfg);

  boost::system::error_code ec;
  impl->rx.assign(impl->local.v6 ? udp::v6() : udp::v4(), rx_sock.release(), ec);
  if (ec) return std::error_code(ec.value(), std::system_category());
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return last_error();
  impl->wake_fd.assign(efd, ec);
  if (ec) {
    ::close(efd);
    return std::error_code(ec.value(), std::system_category());
  }
  int epfd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) return last_error();
  impl->group_ep.assign(epfd, ec);
  if (ec) {
    ::close(epfd);
    return std::error_code(ec.value(), std::system_category());
  }

  const size_t n = impl->cfg.rx_batch;
  impl->rx_buf.resize(n * kRxSlotBytes);
  impl->rx_msgs.resize(n);
  impl->rx_iov.resize(n);
  impl->rx_from.resize(n);
  impl->rx_cmsg.resize(n);

  Impl* raw = impl.get();
  impl->timers.set_on_arm([raw](Nanos deadline) {
    int64_t d = deadline.count();
    int64_t cur = raw->timer_hint.load();
    while (d < cur && !raw->timer_hint.compare_exchange_weak(cur, d)) {
    }
    // A thread asleep for a later deadline must come back for this one.
    if (d < raw->sleeping_until.load()) {
      uint64_t one = 1;
      [[maybe_unused]] auto r = ::write(raw->wake_fd.native_handle(), &one, sizeof one);
    }
  });
  return std::unique_ptr<UdpTransport>(new UdpTransport(std::move(impl)));
}

UdpTransport::UdpTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UdpTransport::~UdpTransport() = default;

const wire::IpAddr& UdpTransport::local_address() const { return impl_->local; }
Nanos UdpTransport::now() const {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}
TransportStats UdpTransport::stats() const { return impl_->stats; }
UdpStats UdpTransport::udp_stats() const { return impl_->ustats; }
size_t UdpTransport::take_unreachable(std::span<wire::IpAddr> out) {
  return impl_->unreachable.take(out);
}

std::unique_ptr<Timer> UdpTransport::make_timer(std::function<void()> on_expiry) {
  return impl_->timers.make_timer(std::move(on_expiry));
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

// ---- multicast groups ----

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

// ---- send ----

namespace {

bool is_loopback(const wire::IpAddr& a) {
  if (!a.v6) return a.b[0] == 127;
  for (size_t i = 0; i < 15; ++i) {
    if (a.b[i] != 0) return false;
  }
  return a.b[15] == 1;
}

bool same_endpoint(const wire::IpUdpInfo& a, const wire::IpUdpInfo& b) {
  return a.dst == b.dst && a.dport == b.dport && a.sport == b.sport && a.tclass == b.tclass &&
         a.ttl == b.ttl;
}

// Whether datagram e shares its bytes with one of run (a fault injector's
// duplicate): such a pair cannot be two segments whose ICRCs differ.
bool shares_bytes(std::span<const Datagram> run, const Datagram& e) {
  for (const Datagram& x : run)
    if (x.payload.data() == e.payload.data()) return true;
  return false;
}

// XORs into the ICRC of segment k (k >= 1) of an IPv4 GSO run what makes it
// the ICRC for IPv4 Identification k; a second call undoes it (the same XOR).
// The payloads are the engine's (or the fault injector's) own, writable
// buffers; send() gives them back unchanged.
void set_segment_icrcs(std::span<const Datagram> run) {
  for (size_t k = 1; k < run.size(); ++k) {
    auto* p = const_cast<std::byte*>(run[k].payload.data());
    const size_t len = run[k].payload.size();
    const size_t rest = len - wire::kBthLen - wire::kIcrcLen;
    std::byte* icrc = p + len - wire::kIcrcLen;
    wire::store_le32(icrc, wire::load_le32(icrc) ^
                               wire::ipv4_id_icrc_delta(static_cast<uint16_t>(k), wire::kIpv4HeaderLen, rest));
  }
}

// Appends one control message at offset msg_controllen of m.msg_control (which
// has room for kCmsgBytes).
template <typename T>
void put_cmsg(msghdr& m, int level, int type, T value) {
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<std::byte*>(m.msg_control) + m.msg_controllen);
  std::memset(c, 0, CMSG_SPACE(sizeof(T)));
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof(T));
  std::memcpy(CMSG_DATA(c), &value, sizeof(T));
  m.msg_controllen += CMSG_SPACE(sizeof(T));
}

}  // namespace

// Sends datagrams that all share one source port (one socket).
size_t UdpTransport::Impl::send_run(int fd, std::span<const Datagram> run) {
  size_t handed = 0, i = 0;
  while (i < run.size()) {
    // Build up to kTxMsgs messages, each one datagram or a GSO run.
    size_t nmsg = 0, niov = 0, j = i;
    while (j < run.size() && nmsg < kTxMsgs) {
      const Datagram& d = run[j];
      const bool gso_ok = (is_loopback(d.ip.dst) ? cfg.gso_loopback
                                                 : cfg.gso && (d.ip.dst.v6 || cfg.gso_ipv4)) &&
                          d.payload.size() >= wire::kBthLen + wire::kIcrcLen;
      size_t segs = 1, bytes = d.payload.size();
      tx_iov[niov] = {const_cast<std::byte*>(d.payload.data()), d.payload.size()};
      if (gso_ok) {
        const size_t seg = d.payload.size();
        while (j + segs < run.size() && segs < kMaxGsoSegments) {
          const Datagram& e = run[j + segs];
          if (!same_endpoint(d.ip, e.ip) || e.payload.size() > seg || e.payload.empty() ||
              bytes + e.payload.size() > kMaxGsoBytes ||
              e.payload.size() < wire::kBthLen + wire::kIcrcLen ||
              shares_bytes(run.subspan(j, segs), e))
            break;
          tx_iov[niov + segs] = {const_cast<std::byte*>(e.payload.data()), e.payload.size()};
          bytes += e.payload.size();
          ++segs;
          if (e.payload.size() < seg) break;  // a shorter segment ends the run
        }
      }
      mmsghdr& mm = tx_msgs[nmsg];
      mm = {};
      msghdr& m = mm.msg_hdr;
      m.msg_name = &tx_to[nmsg];
      m.msg_namelen = to_sockaddr(d.ip.dst, d.ip.dport, tx_to[nmsg], cfg.scope_id);
      m.msg_iov = &tx_iov[niov];
      m.msg_iovlen = segs;
      m.msg_control = tx_cmsg[nmsg].data();
      m.msg_controllen = 0;
      if (segs > 1) put_cmsg<uint16_t>(m, SOL_UDP, UDP_SEGMENT, static_cast<uint16_t>(d.payload.size()));
      if (d.ip.dst.v6) {
        if (d.ip.tclass != 0) put_cmsg<int>(m, IPPROTO_IPV6, IPV6_TCLASS, d.ip.tclass);
        if (d.ip.ttl != 64) put_cmsg<int>(m, IPPROTO_IPV6, IPV6_HOPLIMIT, d.ip.ttl);
      } else {
        if (d.ip.tclass != 0) put_cmsg<int>(m, IPPROTO_IP, IP_TOS, d.ip.tclass);
        if (d.ip.ttl != 64) put_cmsg<int>(m, IPPROTO_IP, IP_TTL, d.ip.ttl);
      }
      if (m.msg_controllen == 0) m.msg_control = nullptr;
      tx_count[nmsg] = segs;
      // IPv4: the kernel gives segment k of a GSO send the Identification k
      // (unconnected DF socket: 0 for the first, then counting up; the
      // ICRC covers the ID). The datagrams came with ICRCs for ID 0: each
      // segment's is made the one for its ID here, and put back after the send.
      if (segs > 1 && !d.ip.dst.v6) set_segment_icrcs(run.subspan(j, segs));
      niov += segs;
      j += segs;
      ++nmsg;
    }
    size_t done = 0, reported_errors = 0;
    // The ICRCs of IPv4 GSO segments go back to ID 0 however the send ends.
    auto restore_icrcs = [&] {
      for (size_t k = 0, at = i; k < nmsg; at += tx_count[k], ++k)
        if (tx_count[k] > 1 && !run[at].ip.dst.v6) set_segment_icrcs(run.subspan(at, tx_count[k]));
    };
    while (done < nmsg) {
      int r = ::sendmmsg(fd, &tx_msgs[done], static_cast<unsigned>(nmsg - done), 0);
      if (r > 0) {
        for (size_t k = done; k < done + static_cast<size_t>(r); ++k) {
          handed += tx_count[k];
          stats.tx_datagrams += tx_count[k];
          for (size_t s = 0; s < tx_msgs[k].msg_hdr.msg_iovlen; ++s)
            stats.tx_bytes += tx_msgs[k].msg_hdr.msg_iov[s].iov_len;
          if (tx_count[k] > 1) ++ustats.gso_sends;
        }
        done += static_cast<size_t>(r);
        // A partial send: the next message may have met the pending ICMP
        // error of an earlier one (sendmmsg then reports only the count, and
        // the error is lost; the queued error itself is not).
        if (done < nmsg) read_errors(fd);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
        // Full: the rest are dropped, as a NIC would drop them (RC recovers).
        for (size_t k = done; k < nmsg; ++k) ustats.tx_dropped_full += tx_count[k];
        for (size_t k = j; k < run.size(); ++k) ++ustats.tx_dropped_full;
        restore_icrcs();
        return handed;
      }
      const int err = errno;
      read_errors(fd);  // what the error queue holds, whatever this error is
      if ((err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH) &&
          reported_errors++ < kTxMsgs) {
        // The pending ICMP error of an earlier datagram, reported by this send
        // (which did not go out): noted; now send this message again.
        continue;
      }
      stats.tx_errors += tx_count[done];  // this message is refused: skip it
      ++done;
    }
    restore_icrcs();
    i = j;
  }
  return handed;
}

size_t UdpTransport::send(std::span<const Datagram> batch) {
  Impl& m = *impl_;
  ++m.stats.tx_batches;
  size_t handed = 0, i = 0;
  while (i < batch.size()) {
    const Datagram& d = batch[i];
    // A datagram built for another source address would carry a wrong ICRC.
    auto fd = d.ip.src == m.local ? m.send_fd(d.ip.sport)
                                  : Result<int>(std::make_error_code(std::errc::invalid_argument));
    if (!fd) {
      ++m.stats.tx_errors;
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < batch.size() && batch[j].ip.sport == d.ip.sport && batch[j].ip.src == m.local)
      ++j;
    handed += m.send_run(*fd, batch.subspan(i, j - i));
    i = j;
  }
  return handed;
}

// ---- receive ----

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
    ++m.stats.rx_datagrams;
    m.stats.rx_bytes += len;
    ++n;
    handler(d);
  }
  // Received but not yet delivered (max reached): wait() must not sleep on them.
  m.rx_backlog.store(m.cur_pending || m.rx_next < m.rx_count);
  return n;
}

// ---- wait / wake ----

void UdpTransport::wait(Nanos deadline) {
  Impl& m = *impl_;
  // Publish the deadline before reading the timer hint: a timer armed meanwhile
  // for an earlier time then sees it and wakes us (see set_on_arm).
  m.sleeping_until.store(deadline.count());
  const Nanos until = std::min(deadline, Nanos(m.timer_hint.load()));
  if (until > now() && !m.rx_backlog.load()) {
    bool fired = false;
    auto done = [&fired](const boost::system::error_code&) { fired = true; };
    m.io.restart();
    m.rx.async_wait(udp::socket::wait_read, done);
    m.wake_fd.async_wait(asio::posix::stream_descriptor::wait_read, done);
    m.group_ep.async_wait(asio::posix::stream_descriptor::wait_read, done);
    m.sleep_timer.expires_at(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(until)));
    m.sleep_timer.async_wait(done);
    m.io.run_one();
    boost::system::error_code ec;
    m.rx.cancel(ec);
    m.wake_fd.cancel(ec);
    m.group_ep.cancel(ec);
    m.sleep_timer.cancel();
    m.io.poll();  // completes the cancelled waits
  }
  uint64_t count;
  [[maybe_unused]] auto r = ::read(m.wake_fd.native_handle(), &count, sizeof count);
  m.sleeping_until.store(kNotSleeping);
}

void UdpTransport::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(impl_->wake_fd.native_handle(), &one, sizeof one);
}

}  // namespace rocelab::emu
