// Internal to the UDP transport (src/emu/transport/udp_*.cc): its state and
// the socket helpers its files share. Not part of the transport's interface
// (udp_transport.h). The files, one role each:
//   udp_transport.cc  open, clock and timers, wait/wake
//   udp_socket.cc     socket set-up: receive and send sockets, address
//                     allocation, source ports
//   udp_multicast.cc  multicast groups (join_group / leave_group)
//   udp_send.cc       sendmmsg, GSO runs and their IPv4 segment ICRCs
//   udp_receive.cc    recvmmsg, GRO splitting, ancillary data
//   udp_errqueue.cc   ICMP errors from the send sockets' error queues
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <climits>
#include <deque>
#include <vector>

#include "emu/transport/timer_queue.h"
#include "emu/transport/udp_transport.h"
#include "emu/transport/unreachable_set.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace rocelab::emu {

namespace udp_detail {

namespace asio = boost::asio;
using asio::ip::udp;

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

std::error_code last_error();
socklen_t to_sockaddr(const wire::IpAddr& a, uint16_t port, sockaddr_storage& ss, uint32_t scope_id = 0);
void from_sockaddr(const sockaddr_storage& ss, wire::IpAddr& a, uint16_t& port);
void set_buffer(int fd, int force_opt, int opt, int bytes);
int set_int(int fd, int level, int opt, int v);
// A non-blocking UDP socket bound to (addr, port).
Result<int> bind_udp(const wire::IpAddr& addr, uint16_t port, uint32_t scope_id);
// The index of the interface that has address a (0: none has it).
uint32_t ifindex_of(const wire::IpAddr& a);
// What a receive socket reports with each datagram, and its buffer.
void set_rx_options(int fd, bool v6, const UdpTransportConfig& cfg);

}  // namespace udp_detail

// (An internal header of the transport's own files: they all use these names.)
using namespace udp_detail;

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
  uint32_t control_magic = 0;  // set_control_handler
  std::function<void(const Datagram&)> on_control;

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

}  // namespace rocelab::emu
