// The simulated fabric: an in-memory network with a virtual clock, for
// deterministic tests and the protocol simulator. Single-threaded: the fabric
// and every transport attached to it are driven from one thread (wake() alone
// may be called from anywhere).
//
// A datagram sent at virtual time t by port S arrives at its destination port at
//   depart + latency, where depart = max(t, S's link busy-until) + frame_bits / rate
// (no serialization delay when link_bits_per_sec is 0). It is delivered by the
// destination's poll() once the clock has reached that time. Payloads are copied
// into fabric-owned, reused buffers at send(). Events due at the same time are
// delivered in the order they were sent; timers fire by deadline, then in the
// order they were armed. There is no randomness in the fabric itself: the same
// sequence of calls produces the same sequence of events (seeded faults come
// from FaultInjector, layered on top).
//
// With a network (SimFabricConfig::network: switches, queues, ECN, PFC; see
// src/fabric) the network decides when and whether a datagram arrives, and a
// port may attach only at one of its hosts' addresses; latency and
// link_bits_per_sec are then unused.
//
// Time only moves in wait() / advance(): to the earliest pending event of the
// WHOLE fabric (every port's deliveries and timers) or the deadline, whichever
// is first — so one loop that polls every port and then waits on any of them
// drives all devices of a simulation. An event that is already due but not yet
// polled holds the clock where it is. A loop with many ports need not poll
// them all: ports_with_work() lists those a poll would find something for.
//
// The fabric keeps, in one indexed heap (event_index.h), each port's earliest
// time: a port lowers its entry when a datagram is queued for it or one of its
// timers is armed, and sets it exactly after each poll. An entry may be too
// early (a timer cancelled or re-armed later), never too late, so the fabric's
// next event is the top entry once that one is confirmed against its port.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "emu/transport/datagram_pool.h"
#include "emu/transport/event_index.h"
#include "emu/transport/sim_network.h"
#include "emu/transport/transport.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

struct SimFabricConfig {
  Nanos latency{1000};             // one-way propagation delay, every path
  uint64_t link_bits_per_sec = 0;  // per sending port; 0 = infinitely fast links
  Nanos start{0};                  // the virtual clock's initial value
  std::shared_ptr<SimNetwork> network;  // between the ports; none: a direct wire
};

// Counters of the fabric as a whole (each port keeps its TransportStats).
struct SimFabricStats {
  uint64_t delivered = 0;
  uint64_t dropped_no_port = 0;   // sent to an address nobody has attached
  uint64_t dropped_oversize = 0;  // payload larger than a UDP datagram can be
  uint64_t dropped_detached = 0;  // still in flight when its destination detached
  uint64_t dropped_no_route = 0;  // the network has no path from its sender
  uint64_t dropped_network = 0;   // the network discarded it (a full switch buffer)
};

class SimPort;

class SimFabric {
 public:
  explicit SimFabric(SimFabricConfig cfg = {});
  ~SimFabric();
  SimFabric(const SimFabric&) = delete;
  SimFabric& operator=(const SimFabric&) = delete;

  // A transport receiving on addr. nullptr if addr is already attached (or,
  // with a network, is not one of its hosts). The
  // transport must not outlive the fabric; destroying it detaches the address.
  std::unique_ptr<Transport> attach(const wire::IpAddr& addr);

  Nanos now() const { return now_; }
  const SimFabricConfig& config() const { return cfg_; }
  SimFabricStats stats() const { return stats_; }

  // The time of the earliest pending event (delivery or armed timer) on any
  // port, or Nanos::max() when nothing is pending.
  Nanos next_event() const;
  // Datagrams sent and not yet delivered.
  size_t in_flight() const;

  // Appends to *out the ports (transports this fabric attached) that have
  // something to do at now(): a timer due, a datagram arrived, an unreachable
  // address to report; in the order they were attached in (a detached port's
  // place goes to the next port attached). The network first
  // runs up to now(), as any port's poll() would run it. Polling a port that
  // is not listed finds nothing; polling one that is may give work at this
  // same instant to a port not listed (a datagram to itself, a link without
  // delay), which the next call lists, the clock still standing on its event.
  void ports_with_work(std::vector<Transport*>* out);
  // The same for one port, asked when its turn comes in a round: polling the
  // ports in some order, each only when this holds, does what polling them
  // all in that order does. A transport the fabric did not attach has work.
  bool has_work(const Transport& port);

  // Moves the clock forward to min(next_event(), deadline); never backwards.
  // Returns the new time.
  Nanos advance(Nanos deadline);

  // Back to the state the fabric was made in, with the same ports attached:
  // nothing in flight (dropped, uncounted), the clock at config().start,
  // the fabric's and every port's stats zero, no unreachable address
  // remembered, every link idle. Multicast memberships stay (the devices
  // joined them). EBUSY, and nothing changed, while a timer is armed on a
  // port: the objects that own the timers go first (Device::reset).
  std::error_code reset();

  // Drives a simulation: repeatedly calls step() (which must poll every port
  // of interest), stops with true as soon as done() holds, otherwise advances
  // the clock to the next event. Returns false when the next event lies beyond
  // `deadline` (the clock is then left at `deadline`) or when the clock stops
  // moving because step() leaves due events unpolled.
  bool run_until(const std::function<bool()>& done, Nanos deadline,
                 const std::function<void()>& step);

 private:
  friend class SimPort;
  SimPort* find(const wire::IpAddr& addr) const;
  void detach(SimPort* port);
  // The clock to target (>= now: never backwards), the network run up to it.
  Nanos advance_to(Nanos target);
  // Hands a copy of d, routed to `to`, to the network or straight to the port.
  void transmit(SimPort& from, SimPort& to_port, const Datagram& d, Nanos depart);

  // The network's way back into the fabric.
  class Sink final : public SimNetworkSink {
   public:
    explicit Sink(SimFabric& f) : f_(f) {}
    void deliver(Nanos at, const SimPacket& p) override;
    void discard(const SimPacket& p) override;

   private:
    SimFabric& f_;
  };

  SimFabricConfig cfg_;
  Nanos now_;
  uint64_t next_seq_ = 0;
  // The attached ports by id (a detached port leaves nullptr, and its id goes
  // to the next attach), and by address.
  struct AddrHash {
    size_t operator()(const wire::IpAddr& a) const;
  };
  std::vector<SimPort*> ports_;
  std::vector<uint32_t> free_ids_;
  std::unordered_map<wire::IpAddr, uint32_t, AddrHash> by_addr_;
  // Each port's earliest timer or arrival, a lower bound (next_event() makes
  // the top exact, hence mutable).
  mutable EventIndex events_;
  std::vector<uint32_t> reporting_;  // ports that may hold unreachable addresses
  std::vector<uint32_t> scratch_;    // ports_with_work's candidates
  // Multicast: the ports that joined each group (joins counted, as
  // Transport::join_group says).
  struct Member {
    wire::IpAddr group;
    SimPort* port;
    int joins;
  };
  std::vector<Member> members_;
  DatagramPool pool_;  // the payloads in flight
  SimFabricStats stats_;
  Sink sink_{*this};
};

}  // namespace rocelab::emu
