// What lies between the simulated fabric's ports when it is more than a wire:
// a network of switches and links (src/fabric) that the fabric hands every
// datagram to and that hands each one back, at the time it reaches its host,
// or drops it. The fabric keeps the ports, the payload copies, the clock and
// the timers; the network owns only the journey in between.
//
// Without a network (SimFabricConfig::network empty) a datagram reaches its
// destination a fixed latency after it left (sim_fabric.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "emu/transport/transport.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

// One datagram on its way. buf/len name the fabric's copy of the payload
// (BTH .. ICRC) and opcode is its first byte, the BTH opcode (0 when the
// payload is empty), so a network that counts CNPs need not read the payload;
// ip is what the IP and UDP headers carry and may be changed on the way (a
// switch marks ECN in ip.tclass, which the ICRC does not cover); to is the
// host it is routed to (ip.dst, or a member of the multicast group ip.dst).
// seq is the order the fabric accepted it in; port is the fabric's own number
// for the port at `to`, handed back untouched; icrc_omitted is the
// datagram's (transport.h), also handed back.
struct SimPacket {
  uint32_t buf = 0, len = 0;
  uint64_t seq = 0;
  uint32_t port = 0;
  uint8_t opcode = 0;
  bool icrc_omitted = false;
  wire::IpAddr to;
  wire::IpUdpInfo ip;
};

// The fabric's side, which the network calls back.
class SimNetworkSink {
 public:
  virtual ~SimNetworkSink() = default;
  // p has reached its host at time `at` (>= the time of the event that
  // delivers it); the fabric now owns p's buffer again.
  virtual void deliver(Nanos at, const SimPacket& p) = 0;
  // p will never arrive (a full buffer, a reset); its buffer is released.
  virtual void discard(const SimPacket& p) = 0;
};

class SimNetwork {
 public:
  virtual ~SimNetwork() = default;
  // Called by the fabric the network is given to, and with nullptr when that
  // fabric is destroyed: the network then forgets the packets inside (their
  // buffers went with the fabric) and keeps its counters.
  virtual void bind(SimNetworkSink* sink) = 0;
  // Whether addr is a host of the network (a port may attach there).
  virtual bool has_host(const wire::IpAddr& addr) const = 0;
  // p leaves host `from` at time now. false when there is no route from it to
  // p.to: the caller keeps p.
  virtual bool send(Nanos now, const wire::IpAddr& from, const SimPacket& p) = 0;
  // The time of the earliest event inside the network, or Nanos::max().
  virtual Nanos next_event() const = 0;
  // Runs every event due at or before now, in time order.
  virtual void run(Nanos now) = 0;
  // Packets inside the network.
  virtual size_t in_flight() const = 0;
  // Every packet inside discarded, every link idle, the counters zero, the
  // network's own clock at `start`.
  virtual void reset(Nanos start) = 0;
};

}  // namespace rocelab::emu
