// The narrow interface between the verbs engine and whatever carries its
// packets: real UDP sockets (udp_transport.h) or the simulated fabric
// (sim_fabric.h). The engine builds whole RoCEv2 transport packets (BTH ..
// ICRC) and hands them over in batches; the transport moves them and reports
// what arrives. It also owns time: the UDP transport runs on the steady clock,
// the simulated fabric on a virtual clock, so the engine never reads a clock
// of its own (that is what makes a simulated run reproducible).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <system_error>

#include "wire/ip_udp.h"

namespace rocelab::emu {

using Nanos = std::chrono::nanoseconds;  // time on the transport's clock

// One datagram. On send: the IP/UDP fields the packet must leave with
// (src/dst address, UDP source port, destination port 4791); the ICRC inside
// payload was computed over exactly those, with IPv4 ID 0 and DF set. On
// receive: what the packet arrived with (ip_id is 0 when it cannot be known).
//
// icrc_omitted: the ICRC's 4 bytes were left as zeros, because the transport
// said nobody on the way reads them (Transport::icrc_optional: the simulated
// fabric). Such a datagram is intact by construction; whoever reads or
// changes its bytes (a capture, a corruption fault) first fills the ICRC in
// (wire::roce_icrc) and clears the flag.
struct Datagram {
  wire::IpUdpInfo ip;
  std::span<const std::byte> payload;  // UDP payload: BTH .. ICRC
  bool icrc_omitted = false;
};

// Called for every received datagram. The payload is valid only during the call.
using RecvHandler = std::function<void(const Datagram&)>;

// A re-armable one-shot timer. Created once (per QP, per device), armed many
// times: arming allocates nothing.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void arm_at(Nanos deadline) = 0;   // replaces any earlier deadline
  virtual void cancel() = 0;
  virtual bool armed() const = 0;
};

// Counters every transport keeps (the fault injector adds its own).
struct TransportStats {
  uint64_t tx_datagrams = 0, tx_bytes = 0, tx_batches = 0;
  uint64_t rx_datagrams = 0, rx_bytes = 0, rx_batches = 0;
  uint64_t tx_errors = 0;
};

// The RoCEv2 UDP source port a QP would like: 0xC000 | 14 bits of a hash of
// its QPN (rxe's older scheme). The engine asks the transport for it with
// reserve_source_port() when it creates a QP (and QP 1), and uses the port
// it gets.
constexpr uint16_t preferred_source_port(uint32_t qpn) {
  return static_cast<uint16_t>(0xC000 | ((qpn ^ (qpn >> 14) ^ (qpn * 2654435761u >> 18)) & 0x3FFF));
}

class Transport {
 public:
  virtual ~Transport() = default;

  // The local address this transport receives on (UDP port 4791 on it).
  virtual const wire::IpAddr& local_address() const = 0;

  // Sends a batch. Datagrams to the same destination that follow one another
  // may leave as one GSO super-datagram. Returns how many were handed to the
  // network (a full socket buffer is not an error: the rest are dropped, as a
  // NIC would drop them, and RC recovers).
  virtual size_t send(std::span<const Datagram> batch) = 0;

  // Runs the callbacks of due timers, then delivers what has arrived to the
  // handler, without blocking; returns how many datagrams it delivered.
  // Called by the threads that post and poll (the engine's progress model).
  // The engine serializes send(), poll(), make_timer() and Timer::arm_at/cancel
  // (it holds its device lock around them).
  virtual size_t poll(const RecvHandler& handler, size_t max = 64) = 0;

  // Blocks until a datagram may be ready, a timer is due, or wake() is called,
  // at most until `deadline`; runs no callbacks itself (the caller then takes the
  // engine lock and calls poll()). The engine's helper thread sleeps here: no
  // spinning. wait() and wake() may be called concurrently with everything else.
  // On the simulated fabric wait() advances the virtual clock instead of sleeping.
  virtual void wait(Nanos deadline) = 0;
  virtual void wake() = 0;
  // Blocks until `deadline` or wake(), whatever arrives or falls due meanwhile:
  // the helper thread's sleep while the application drives progress itself.
  // The arrivals it sleeps through may not wake a later wait(): the caller
  // polls before it waits again. A transport without such a sleep waits.
  virtual void sleep_until(Nanos deadline) { wait(deadline); }

  // The transport's clock and timers. Timer callbacks run inside poll(), on the
  // calling thread.
  virtual Nanos now() const = 0;
  virtual std::unique_ptr<Timer> make_timer(std::function<void()> on_expiry) = 0;

  virtual TransportStats stats() const = 0;

  // Whether the engine may leave the ICRC out of what it sends here
  // (Datagram::icrc_omitted): only where nothing between the two engines
  // reads a packet's bytes without filling the ICRC in first. Real sockets
  // carry every packet to whatever listens, so the default is no.
  virtual bool icrc_optional() const { return false; }

  // A UDP source port (0xC000-0xFFFF) this transport can send from: `preferred`
  // when usable, otherwise another one (0: any). The UDP transport binds a
  // socket per source port, and a port another process holds is not usable;
  // the engine asks here before it builds packets (their ICRC covers the port).
  // Transports without real ports accept any port in the range.
  virtual wire::Result<uint16_t> reserve_source_port(uint16_t preferred = 0) {
    return preferred >= 0xC000 ? preferred : uint16_t{0xC000};
  }

  // UDP multicast (UD multicast groups, ibv_attach_mcast): from join_group on,
  // datagrams sent to the multicast address `group` on this transport's
  // network arrive through poll() as well, with Datagram.ip.dst = group; and
  // send() may address datagrams to a group (every member receives a copy,
  // this transport's own joined groups included). Joins are counted: the
  // group is left when leave_group has been called as often as join_group.
  // operation_not_supported where the transport cannot (the default).
  virtual std::error_code join_group(const wire::IpAddr& group) {
    (void)group;
    return std::make_error_code(std::errc::operation_not_supported);
  }
  virtual void leave_group(const wire::IpAddr& group) { (void)group; }

  // Destinations the network has reported unreachable since the last call:
  // an ICMP port (or host/network) unreachable came back for a datagram sent
  // there, i.e. nothing receives RoCEv2 at that address any more — on our
  // transports, the peer process has exited. Writes at most out.size()
  // addresses, each once, and returns how many. The engine uses this to end
  // the retries of an RC QP whose peer has vanished (docs/rc-reliability.md,
  // "A vanished peer"). Transports that cannot tell report nothing.
  virtual size_t take_unreachable(std::span<wire::IpAddr> out) {
    (void)out;
    return 0;
  }
};

}  // namespace rocelab::emu
