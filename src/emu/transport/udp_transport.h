// The real transport: RoCEv2 over UDP sockets (Boost.Asio for the sockets, the
// blocking wait and its timer; recvmmsg/sendmmsg, UDP GSO and GRO on the native
// handles, since Asio does not batch).
//
// Receiving: one socket bound to <local address>:4791 (IPv4 or IPv6). poll()
// drains it with recvmmsg; GRO super-datagrams are split back into their
// segments; the destination address comes from IP_PKTINFO, TTL and TOS from
// IP_RECVTTL/IP_RECVTOS (IPv6: their IPV6_ equivalents). IPv4 ID is not
// visible to a socket: Datagram.ip.ip_id is 0. One more socket per multicast
// group joined (join_group), bound to <group>:4791, read in turn with it.
//
// Sending: the ICRC covers the UDP source port and the IP header, so each
// datagram leaves from an UNCONNECTED socket bound to (local address, its UDP
// source port) with IP_PMTUDISC_DO: Linux then sends IPv4 ID 0 with DF, TTL 64,
// TOS 0 (a TOS or TTL other than that is set per message by ancillary data).
// Send sockets are bound lazily per source port in 0xC000-0xFFFF; call
// reserve_source_port() first to learn which ports are usable. Runs of datagrams
// from one source port to one destination with equal sizes (the last may be
// shorter) leave as one UDP GSO send (sendmmsg of up to 64 such messages).
// Where the kernel segments an IPv4 GSO send (on a real link, or on delivery
// to a socket without GRO) it numbers the segments' IDs 0, 1, 2, ...: the
// ICRC of segment k is rewritten for ID k before the send and put back after
// (tests/emu/transport/udp_netns_test.cc reads them on a veth pair). On
// loopback nothing is segmented for a receiver with GRO, so `tcpdump -i lo`
// sees super-datagrams where a NIC would send packets; a rocelab receiver
// splits them by the GRO segment size and recovers each segment's ID from its
// ICRC. UdpTransportConfig::wire_exact() sends one datagram per packet.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "emu/transport/transport.h"
#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

using wire::Result;  // as device.h has it (an alias template of the same name would clash)

inline constexpr uint16_t kFirstSourcePort = 0xC000;  // RoCEv2 source ports: 0xC000-0xFFFF

struct UdpTransportConfig {
  size_t rx_batch = 32;        // recvmmsg slots (each holds one GRO super-datagram)
  bool gro = true;             // UDP_GRO on the receive socket
  bool gso = true;             // UDP_SEGMENT for runs of equal-size datagrams: IPv6 ...
  bool gso_ipv4 = true;        // ... and IPv4 (each segment's ICRC made for the ID it gets)
  bool gso_loopback = true;    // ... and to loopback addresses (127/8, ::1), both families
  // One datagram per packet everywhere (no GSO): what a capture of the
  // interface (tcpdump -i lo) shows is then packet for packet what a NIC
  // would send. rocelab run --wire-exact.
  static UdpTransportConfig wire_exact() {
    UdpTransportConfig c;
    c.gso = c.gso_ipv4 = c.gso_loopback = false;
    return c;
  }
  int socket_buffer_bytes = 4 << 20;  // SO_RCVBUF / SO_SNDBUF (forced when permitted)
  // IPv6 link-local (fe80::/10) addresses mean nothing without an interface:
  // the index of the interface of a link-local local address, used to bind it
  // and to send to link-local peers (sin6_scope_id). 0: none.
  uint32_t scope_id = 0;
};

// UDP port 4791 bound on a local address: the receive side of one device.
// Holding it keeps the address taken (that is what makes it "not free").
class RxSocket {
 public:
  RxSocket() = default;
  RxSocket(int fd, const wire::IpAddr& addr) : fd_(fd), addr_(addr) {}
  RxSocket(RxSocket&& o) noexcept : fd_(o.fd_), addr_(o.addr_) { o.fd_ = -1; }
  RxSocket& operator=(RxSocket&& o) noexcept;
  ~RxSocket();
  int fd() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  const wire::IpAddr& address() const { return addr_; }

 private:
  int fd_ = -1;
  wire::IpAddr addr_;
};

// Binds UDP port 4791 on addr (IPv4 or IPv6). Errors: the errno of socket/bind
// (address_in_use when another socket holds it).
Result<RxSocket> bind_rx_socket(const wire::IpAddr& addr, uint32_t scope_id = 0);

// fe80::/10: an address that needs an interface (scope) to be used.
bool is_link_local(const wire::IpAddr& a);

// Binds UDP port 4791 on the first free 127.0.0.x, x = first .. 254 ("free":
// nobody has port 4791 bound there), so several processes on one machine are
// distinct hosts. address_in_use when all are taken.
Result<RxSocket> allocate_loopback_address(uint8_t first = 1);

// Counters of the UDP paths (in addition to TransportStats).
struct UdpStats {
  uint64_t gso_sends = 0;        // messages that carried more than one segment
  uint64_t gro_receives = 0;     // received super-datagrams split into segments
  uint64_t rx_truncated = 0;     // datagrams larger than a receive slot (dropped)
  uint64_t tx_dropped_full = 0;  // datagrams dropped because the socket buffer was full
};

class UdpTransport final : public Transport {
 public:
  static Result<std::unique_ptr<UdpTransport>> open(RxSocket rx, const UdpTransportConfig& cfg = {});
  static Result<std::unique_ptr<UdpTransport>> open(const wire::IpAddr& local,
                                                    const UdpTransportConfig& cfg = {});
  ~UdpTransport() override;

  // A UDP source port in 0xC000-0xFFFF that is bound (on local_address()) and
  // usable by send(). Send sockets are created in the calling thread's network
  // namespace: reserve ports from the namespace the transport was opened in.
  // Returns `preferred` when it is free or already ours, otherwise the next
  // free one upward (wrapping); 0 means "any". address_in_use when none is free.
  Result<uint16_t> reserve_source_port(uint16_t preferred = 0) override;

  const wire::IpAddr& local_address() const override;
  // Datagrams whose ip.src is not local_address(), or whose source port is
  // outside 0xC000-0xFFFF or cannot be bound, are not sent (tx_errors).
  size_t send(std::span<const Datagram> batch) override;
  size_t poll(const RecvHandler& handler, size_t max = 64) override;
  // One waiter at a time; wake() from any thread.
  void wait(Nanos deadline) override;
  void wake() override;
  void sleep_until(Nanos deadline) override;
  Nanos now() const override;  // std::chrono::steady_clock
  std::unique_ptr<Timer> make_timer(std::function<void()> on_expiry) override;
  TransportStats stats() const override;
  // From ICMP errors (IP_RECVERR on the send sockets), noticed when the next
  // datagram is sent from the same socket: a retransmission finds them.
  size_t take_unreachable(std::span<wire::IpAddr> out) override;
  // A socket bound to <group>:4791 (SO_REUSEADDR: every member on the host
  // gets a copy), member of the group on the local address's interface; send
  // sockets address groups through that interface with loopback on. IPv4
  // multicast works over lo and veth; IPv6 needs an interface that has the
  // MULTICAST flag (lo does not).
  std::error_code join_group(const wire::IpAddr& group) override;
  void leave_group(const wire::IpAddr& group) override;
  UdpStats udp_stats() const;

  // Datagrams to 4791 whose UDP payload starts with the 4 bytes of `magic`
  // (big-endian; no RoCEv2 packet does, see wire/host_probe.h) are given to
  // `on_control` inside poll(), on the polling thread, instead of to poll()'s
  // handler: how the processes sharing an address talk to each one's socket
  // (src/host). Set it before anything polls.
  void set_control_handler(uint32_t magic, std::function<void(const Datagram&)> on_control);

  struct Impl;

 private:
  explicit UdpTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocelab::emu
