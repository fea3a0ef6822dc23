// The switched network: a Topology run as a discrete-event simulation between
// the simulated fabric's ports (emu::SimNetwork). Every link direction has an
// egress queue; a packet is serialized at the link's rate (Ethernet framing,
// preamble and gap included), propagates for the link's delay, and at a
// switch is routed (ECMP over the shortest paths), admitted to the shared
// buffer or dropped, marked (RED on the egress queue's depth), queued, and
// counted against the port it came in on for PFC. Store and forward.
//
// Deterministic: the same sends at the same virtual times give the same
// events; ECN draws come from a PRNG seeded by Topology::seed. Single-threaded,
// as the fabric. Steady traffic allocates nothing (packets and events live in
// reused slabs); the optional time series grow by one sample per interval.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "emu/transport/sim_network.h"
#include "fabric/topology.h"

namespace rocelab::fabric {

// One direction of one link: what its egress queue did.
struct PortStats {
  uint64_t tx_packets = 0, tx_bytes = 0;  // frames sent on the link, payload bytes
  uint64_t ecn_marked = 0;                // packets this queue set CE on
  uint64_t dropped = 0;                   // refused at this queue: the buffer was full
  uint64_t max_queue_bytes = 0;           // deepest the queue has been
  uint64_t pauses_received = 0;           // XOFFs the link partner sent to this egress
  Nanos paused{0};                        // time this egress spent paused
};

// One sample of the time series: every `interval`, the state at that instant
// (queue depths) and what happened since the previous sample (bytes, pause
// time, CNPs).
struct Series {
  Nanos interval{0};
  std::vector<Nanos> t;  // sample times
  struct PortLine {
    uint32_t port;
    std::vector<uint64_t> queue_bytes;
    std::vector<uint64_t> paused_ns;  // within the interval
  };
  std::vector<PortLine> ports;  // every egress that ever queued or paused, in port order
  struct FlowLine {
    wire::IpAddr src, dst;
    uint16_t sport = 0;
    std::vector<uint64_t> bytes;  // UDP payload bytes delivered within the interval
  };
  std::vector<FlowLine> flows;  // in order of first delivery
  struct HostLine {
    uint32_t host;               // node index
    std::vector<uint32_t> cnps;  // CNPs delivered to it within the interval
  };
  std::vector<HostLine> hosts;  // hosts that received a CNP
};

class SwitchedNetwork final : public emu::SimNetwork {
 public:
  // topo must pass Topology::check(); *error says why not, and the network is
  // then empty (no host: every attach fails). sample_interval 0: no series.
  SwitchedNetwork(Topology topo, Nanos sample_interval, std::string* error);
  ~SwitchedNetwork() override;

  void bind(emu::SimNetworkSink* sink) override { sink_ = sink; if (!sink) forget(); }
  bool has_host(const wire::IpAddr& addr) const override;
  bool send(Nanos now, const wire::IpAddr& from, const emu::SimPacket& p) override;
  Nanos next_event() const override;
  void run(Nanos now) override;
  size_t in_flight() const override { return live_packets_; }
  // The most packets that were inside at once (since it was made or reset).
  size_t max_in_flight() const { return max_live_packets_; }
  void reset(Nanos start) override;

  const Topology& topology() const { return topo_; }

  // Ports: every direction of every link, numbered from 0; port 2k and 2k+1
  // are the two directions of topology().links[k] (a->b, then b->a).
  size_t port_count() const;
  // "leaf0->spine1".
  std::string port_name(uint32_t port) const;
  const PortStats& port_stats(uint32_t port) const;
  uint64_t queue_bytes(uint32_t port) const;
  bool paused(uint32_t port) const;
  // The port from node a toward node b, or -1.
  int port_between(const std::string& a, const std::string& b) const;
  int node_index(const std::string& name) const;
  // Totals over every port.
  PortStats totals() const;
  uint64_t cnps_delivered() const { return cnps_; }

  // The time series so far, completed up to `now`.
  const Series& series(Nanos now);

 private:
  struct Port;
  struct Node;
  struct Packet;
  struct Event;

  uint32_t new_packet(const emu::SimPacket& p, uint32_t dst_host);
  void free_packet(uint32_t pkt);
  void schedule(Nanos t, uint8_t kind, uint32_t a);
  void enqueue(uint32_t port, uint32_t pkt, Nanos now);
  void start_tx(uint32_t port, Nanos now);
  void on_tx_done(uint32_t port, Nanos now);
  void on_arrive(uint32_t pkt, Nanos now);
  void on_pause(uint32_t port, bool on, Nanos now);
  void deliver(uint32_t pkt, Nanos now);
  void drop(uint32_t pkt, uint32_t at_port);
  uint32_t pick_egress(uint32_t node, uint32_t pkt);
  bool mark(uint32_t port);
  // Takes the samples due before t (at t too when inclusive).
  void sample_until(Nanos t, bool inclusive);
  void account_flow(const emu::SimPacket& p);
  void forget();

  Topology topo_;
  emu::SimNetworkSink* sink_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<Port> ports_;
  std::vector<uint32_t> host_node_;  // host index -> node index
  std::unordered_map<uint32_t, uint32_t> host_by_v4_;  // IPv4 address -> host index
  std::vector<std::pair<wire::IpAddr, uint32_t>> host_by_v6_;
  // ECMP: route_[node * hosts + host] = {first, count} into route_ports_.
  std::vector<std::pair<uint32_t, uint32_t>> route_;
  std::vector<uint32_t> route_ports_;

  // Packets in two arrays by index: what every hop reads, kept small so that
  // tens of thousands of packets in flight stay in cache, and the datagram
  // itself, which only ECMP and the ends read.
  std::vector<Packet> packets_;
  std::vector<emu::SimPacket> datagrams_;
  std::vector<uint32_t> free_packets_;
  size_t live_packets_ = 0, max_live_packets_ = 0;
  std::vector<Event> events_;  // a heap, earliest on top
  uint64_t next_seq_ = 0;
  uint64_t rng_;
  uint64_t cnps_ = 0;

  // Time series.
  Series series_;
  Nanos next_sample_{0};
  std::vector<int32_t> port_line_;  // port -> index in series_.ports, or -1
  std::vector<uint64_t> paused_at_last_sample_;
  struct FlowKey {
    wire::IpAddr src, dst;
    uint16_t sport;
    bool operator==(const FlowKey&) const = default;
  };
  struct FlowKeyHash {
    size_t operator()(const FlowKey& k) const;
  };
  std::vector<uint64_t> flow_acc_;   // per flow line: bytes since the last sample
  std::vector<uint32_t> host_acc_;   // per host line: CNPs since the last sample
  std::unordered_map<FlowKey, uint32_t, FlowKeyHash> flow_line_;
  std::vector<int32_t> host_line_;  // host node -> index in series_.hosts, or -1
};

}  // namespace rocelab::fabric
