#include "fabric/network.h"

#include <algorithm>
#include <limits>
#include <map>

#include "wire/frame.h"
#include "wire/opcode_table.h"

namespace rocelab::fabric {

namespace {
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

enum Kind : uint8_t { kTxDone, kArrive, kPauseOn, kPauseOff };

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001B3ull; }

uint64_t hash_addr(uint64_t h, const wire::IpAddr& a) {
  for (size_t i = 0; i < (a.v6 ? 16u : 4u); ++i) h = mix(h, a.b[i]);
  return h;
}
}  // namespace

struct SwitchedNetwork::Port {
  uint32_t node = 0, to_node = 0;
  uint64_t bps = 0;
  Nanos delay{0};
  // The egress queue: packets linked through Packet::next; bytes counts the
  // frames queued and the one on the wire.
  uint32_t head = kNone, tail = kNone, on_wire = kNone;
  uint64_t bytes = 0;
  uint64_t ps_carry = 0;  // serialization time's sub-nanosecond remainder, in ps
  bool paused = false;
  Nanos paused_since{0};
  // PFC, as seen by the node this port sends to: the bytes it holds that came
  // over this port, and whether it has told this port to stop.
  uint64_t held_downstream = 0;
  bool xoff_sent = false;
  PortStats stats;
};

struct SwitchedNetwork::Node {
  bool is_switch = false;
  uint32_t host = kNone;  // host index
  std::vector<uint32_t> ports;
  uint64_t buffer_used = 0;
};

struct SwitchedNetwork::Packet {
  uint32_t next = kNone;
  uint32_t dst_host = 0;
  uint32_t in_port = kNone;  // the port it came over into the switch holding it
  uint32_t frame = 0;        // bytes on the wire
  uint32_t len = 0;          // UDP payload bytes (datagrams_[i].len)
  uint8_t tclass = 0;        // datagrams_[i].ip.tclass as the switches mark it
  bool live = false;
};

struct SwitchedNetwork::Event {
  Nanos t;
  uint64_t seq;
  uint32_t a;
  uint8_t kind;
};

namespace {
// The event heap's order, earliest (then first scheduled) on top; an object
// rather than a function so that the heap's sifts inline it.
struct Later {
  bool operator()(const auto& x, const auto& y) const { return x.t != y.t ? x.t > y.t : x.seq > y.seq; }
};
}  // namespace

size_t SwitchedNetwork::FlowKeyHash::operator()(const FlowKey& k) const {
  return hash_addr(hash_addr(mix(0xCBF29CE484222325ull, k.sport), k.src), k.dst);
}

SwitchedNetwork::SwitchedNetwork(Topology topo, Nanos sample_interval, std::string* error)
    : topo_(std::move(topo)), rng_(topo_.seed) {
  series_.interval = sample_interval;
  std::string why = topo_.check();
  if (!why.empty()) {
    if (error) *error = why;
    topo_ = Topology{};
    return;
  }
  std::map<std::string, uint32_t> index;
  nodes_.resize(topo_.nodes.size());
  for (uint32_t i = 0; i < topo_.nodes.size(); ++i) {
    const NodeSpec& n = topo_.nodes[i];
    index[n.name] = i;
    nodes_[i].is_switch = n.is_switch;
    if (!n.is_switch) {
      const uint32_t h = static_cast<uint32_t>(host_node_.size());
      nodes_[i].host = h;
      host_node_.push_back(i);
      if (n.addr.v6)
        host_by_v6_.push_back({n.addr, h});
      else
        host_by_v4_[n.addr.v4_u32()] = h;
    }
  }
  for (const LinkSpec& l : topo_.links) {
    const uint32_t a = index[l.a], b = index[l.b];
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      Port p;
      p.node = from;
      p.to_node = to;
      p.bps = l.bits_per_sec;
      p.delay = l.delay;
      nodes_[from].ports.push_back(static_cast<uint32_t>(ports_.size()));
      ports_.push_back(p);
    }
  }
  // Shortest paths by hop count from every host; a switch's routes to a host
  // are all its ports one hop closer to it (ECMP). Hosts do not forward.
  const size_t hosts = host_node_.size();
  route_.assign(nodes_.size() * hosts, {0, 0});
  std::vector<uint32_t> dist(nodes_.size());
  for (uint32_t h = 0; h < hosts; ++h) {
    std::fill(dist.begin(), dist.end(), kNone);
    std::vector<uint32_t> frontier{host_node_[h]};
    dist[host_node_[h]] = 0;
    for (size_t i = 0; i < frontier.size(); ++i) {
      const uint32_t n = frontier[i];
      if (n != host_node_[h] && !nodes_[n].is_switch) continue;
      for (uint32_t p : nodes_[n].ports) {
        const uint32_t m = ports_[p].to_node;
        if (dist[m] == kNone) {
          dist[m] = dist[n] + 1;
          frontier.push_back(m);
        }
      }
    }
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      if (n == host_node_[h] || dist[n] == kNone) continue;
      const uint32_t first = static_cast<uint32_t>(route_ports_.size());
      for (uint32_t p : nodes_[n].ports) {
        const uint32_t m = ports_[p].to_node;
        if (dist[m] + 1 == dist[n] && (nodes_[m].is_switch || m == host_node_[h])) route_ports_.push_back(p);
      }
      route_[n * hosts + h] = {first, static_cast<uint32_t>(route_ports_.size()) - first};
    }
  }
  port_line_.assign(ports_.size(), -1);
  paused_at_last_sample_.assign(ports_.size(), 0);
  host_line_.assign(nodes_.size(), -1);
  next_sample_ = series_.interval;
}

SwitchedNetwork::~SwitchedNetwork() = default;

bool SwitchedNetwork::has_host(const wire::IpAddr& addr) const {
  if (!addr.v6) return host_by_v4_.contains(addr.v4_u32());
  for (const auto& [a, h] : host_by_v6_)
    if (a == addr) return true;
  return false;
}

namespace {
template <typename Map, typename Vec>
uint32_t find_host(const Map& v4, const Vec& v6, const wire::IpAddr& addr) {
  if (!addr.v6) {
    auto it = v4.find(addr.v4_u32());
    return it == v4.end() ? kNone : it->second;
  }
  for (const auto& [a, h] : v6)
    if (a == addr) return h;
  return kNone;
}
}  // namespace

bool SwitchedNetwork::send(Nanos now, const wire::IpAddr& from, const emu::SimPacket& p) {
  const uint32_t src = find_host(host_by_v4_, host_by_v6_, from);
  const uint32_t dst = find_host(host_by_v4_, host_by_v6_, p.to);
  if (sink_ == nullptr || src == kNone || dst == kNone) return false;
  run(now);
  if (series_.interval.count() != 0) sample_until(now, false);
  const uint32_t pkt = new_packet(p, dst);
  if (src == dst) {  // to itself (a multicast group it joined): the NIC loops it back
    deliver(pkt, now);
    return true;
  }
  const uint32_t port = nodes_[host_node_[src]].ports[0];
  if (ports_[port].bytes + packets_[pkt].frame > topo_.host_queue_bytes) {
    drop(pkt, port);
    return true;
  }
  enqueue(port, pkt, now);
  return true;
}

uint32_t SwitchedNetwork::new_packet(const emu::SimPacket& p, uint32_t dst_host) {
  uint32_t i;
  if (!free_packets_.empty()) {
    i = free_packets_.back();
    free_packets_.pop_back();
  } else {
    i = static_cast<uint32_t>(packets_.size());
    packets_.emplace_back();
    datagrams_.emplace_back();
  }
  datagrams_[i] = p;
  Packet& k = packets_[i];
  k.len = p.len;
  k.tclass = p.ip.tclass;
  k.next = kNone;
  k.dst_host = dst_host;
  k.in_port = kNone;
  k.frame = p.len + static_cast<uint32_t>(wire::ip_udp_header_len(p.ip.dst.v6)) + wire::kEthernetWireOverhead;
  k.live = true;
  max_live_packets_ = std::max(max_live_packets_, ++live_packets_);
  return i;
}

void SwitchedNetwork::free_packet(uint32_t pkt) {
  packets_[pkt].live = false;
  --live_packets_;
  free_packets_.push_back(pkt);
}

void SwitchedNetwork::schedule(Nanos t, uint8_t kind, uint32_t a) {
  events_.push_back({t, next_seq_++, a, kind});
  std::push_heap(events_.begin(), events_.end(), Later{});
}

Nanos SwitchedNetwork::next_event() const { return events_.empty() ? Nanos::max() : events_.front().t; }

void SwitchedNetwork::run(Nanos now) {
  const bool sampling = series_.interval.count() != 0;
  while (!events_.empty() && events_.front().t <= now) {
    std::pop_heap(events_.begin(), events_.end(), Later{});
    const Event e = events_.back();
    events_.pop_back();
    if (sampling) sample_until(e.t, false);
    switch (e.kind) {
      case kTxDone: on_tx_done(e.a, e.t); break;
      case kArrive: on_arrive(e.a, e.t); break;
      case kPauseOn: on_pause(e.a, true, e.t); break;
      case kPauseOff: on_pause(e.a, false, e.t); break;
    }
  }
}

void SwitchedNetwork::enqueue(uint32_t port, uint32_t pkt, Nanos now) {
  Port& p = ports_[port];
  Packet& k = packets_[pkt];
  k.next = kNone;
  if (p.tail == kNone)
    p.head = pkt;
  else
    packets_[p.tail].next = pkt;
  p.tail = pkt;
  p.bytes += k.frame;
  p.stats.max_queue_bytes = std::max(p.stats.max_queue_bytes, p.bytes);
  if (series_.interval.count() != 0 && port_line_[port] < 0) {
    port_line_[port] = static_cast<int32_t>(series_.ports.size());
    series_.ports.push_back({port, std::vector<uint64_t>(series_.t.size()), std::vector<uint64_t>(series_.t.size())});
  }
  start_tx(port, now);
}

void SwitchedNetwork::start_tx(uint32_t port, Nanos now) {
  Port& p = ports_[port];
  if (p.on_wire != kNone || p.paused || p.head == kNone) return;
  const uint32_t pkt = p.head;
  p.head = packets_[pkt].next;
  if (p.head == kNone) p.tail = kNone;
  p.on_wire = pkt;
  // Serialization: frame bits at the link's rate, sub-nanosecond remainders
  // carried so that a long run keeps the exact rate.
  p.ps_carry += uint64_t{packets_[pkt].frame} * 8 * 1'000'000'000'000ull / p.bps;
  const Nanos tx(p.ps_carry / 1000);
  p.ps_carry %= 1000;
  schedule(now + tx, kTxDone, port);
}

void SwitchedNetwork::on_tx_done(uint32_t port, Nanos now) {
  Port& p = ports_[port];
  const uint32_t pkt = p.on_wire;
  p.on_wire = kNone;
  Packet& k = packets_[pkt];
  p.bytes -= k.frame;
  ++p.stats.tx_packets;
  p.stats.tx_bytes += k.len;
  Node& n = nodes_[p.node];
  if (n.is_switch) {
    n.buffer_used -= k.frame;
    if (k.in_port != kNone) {
      Port& in = ports_[k.in_port];
      in.held_downstream -= k.frame;
      if (in.xoff_sent && in.held_downstream <= topo_.switches.pfc.xon_bytes) {
        in.xoff_sent = false;
        schedule(now + in.delay, kPauseOff, k.in_port);
      }
    }
  }
  k.in_port = port;
  schedule(now + p.delay, kArrive, pkt);
  start_tx(port, now);
}

void SwitchedNetwork::on_arrive(uint32_t pkt, Nanos now) {
  Packet& k = packets_[pkt];
  const uint32_t via = k.in_port;
  const uint32_t node = ports_[via].to_node;
  Node& n = nodes_[node];
  if (!n.is_switch) {
    deliver(pkt, now);
    return;
  }
  const uint32_t out = pick_egress(node, pkt);
  if (n.buffer_used + k.frame > topo_.switches.buffer_bytes) {
    drop(pkt, out);
    return;
  }
  const uint8_t ecn = k.tclass & 3;
  if (topo_.switches.ecn.enabled && (ecn == 1 || ecn == 2) && mark(out)) {
    k.tclass |= 3;  // CE
    ++ports_[out].stats.ecn_marked;
  }
  n.buffer_used += k.frame;
  Port& in = ports_[via];
  in.held_downstream += k.frame;
  const PfcParams& pfc = topo_.switches.pfc;
  if (pfc.enabled && !in.xoff_sent && in.held_downstream >= pfc.xoff_bytes) {
    in.xoff_sent = true;
    schedule(now + in.delay, kPauseOn, via);
  }
  enqueue(out, pkt, now);
}

void SwitchedNetwork::on_pause(uint32_t port, bool on, Nanos now) {
  Port& p = ports_[port];
  if (on == p.paused) return;
  p.paused = on;
  if (on) {
    p.paused_since = now;
    ++p.stats.pauses_received;
    if (series_.interval.count() != 0 && port_line_[port] < 0) {
      port_line_[port] = static_cast<int32_t>(series_.ports.size());
      series_.ports.push_back({port, std::vector<uint64_t>(series_.t.size()), std::vector<uint64_t>(series_.t.size())});
    }
    return;
  }
  p.stats.paused += now - p.paused_since;
  start_tx(port, now);
}

uint32_t SwitchedNetwork::pick_egress(uint32_t node, uint32_t pkt) {
  const auto [first, count] = route_[node * host_node_.size() + packets_[pkt].dst_host];
  if (count == 1) return route_ports_[first];
  // ECMP on the five-tuple (the protocol is always UDP), salted per switch so
  // that the tiers do not all choose alike.
  const emu::SimPacket& d = datagrams_[pkt];
  uint64_t h = mix(mix(topo_.seed * 0x9E3779B97F4A7C15ull, node), d.ip.sport);
  h = mix(h, d.ip.dport);
  h = hash_addr(hash_addr(h, d.ip.src), d.to);
  h ^= h >> 29;
  return route_ports_[first + h % count];
}

bool SwitchedNetwork::mark(uint32_t port) {
  const EcnParams& e = topo_.switches.ecn;
  const uint64_t q = ports_[port].bytes;
  if (q <= e.kmin_bytes) return false;
  if (q > e.kmax_bytes) return true;
  const double p = e.pmax * double(q - e.kmin_bytes) / double(e.kmax_bytes - e.kmin_bytes);
  return double(splitmix(rng_) >> 11) * 0x1.0p-53 < p;
}

void SwitchedNetwork::deliver(uint32_t pkt, Nanos now) {
  const Packet& k = packets_[pkt];
  emu::SimPacket sp = datagrams_[pkt];
  sp.ip.tclass = k.tclass;
  const bool cnp = sp.opcode == wire::op::kCnp;
  if (cnp) ++cnps_;
  if (series_.interval.count() != 0) {
    if (cnp) {
      const uint32_t node = host_node_[k.dst_host];
      if (host_line_[node] < 0) {
        host_line_[node] = static_cast<int32_t>(series_.hosts.size());
        series_.hosts.push_back({node, std::vector<uint32_t>(series_.t.size())});
        host_acc_.push_back(0);
      }
      ++host_acc_[host_line_[node]];
    }
    account_flow(sp);
  }
  free_packet(pkt);
  sink_->deliver(now, sp);
}

void SwitchedNetwork::account_flow(const emu::SimPacket& p) {
  const FlowKey key{p.ip.src, p.to, p.ip.sport};
  auto [it, fresh] = flow_line_.try_emplace(key, static_cast<uint32_t>(series_.flows.size()));
  if (fresh) {
    series_.flows.push_back({key.src, key.dst, key.sport, std::vector<uint64_t>(series_.t.size())});
    flow_acc_.push_back(0);
  }
  flow_acc_[it->second] += p.len;
}

void SwitchedNetwork::drop(uint32_t pkt, uint32_t at_port) {
  ++ports_[at_port].stats.dropped;
  emu::SimPacket sp = datagrams_[pkt];
  sp.ip.tclass = packets_[pkt].tclass;
  free_packet(pkt);
  sink_->discard(sp);
}

void SwitchedNetwork::sample_until(Nanos t, bool inclusive) {
  while (inclusive ? next_sample_ <= t : next_sample_ < t) {
    const Nanos at = next_sample_;
    series_.t.push_back(at);
    for (Series::PortLine& line : series_.ports) {
      const Port& p = ports_[line.port];
      const uint64_t paused_total = uint64_t(p.stats.paused.count()) + (p.paused ? uint64_t((at - p.paused_since).count()) : 0);
      line.queue_bytes.push_back(p.bytes);
      line.paused_ns.push_back(paused_total - paused_at_last_sample_[line.port]);
      paused_at_last_sample_[line.port] = paused_total;
    }
    for (size_t i = 0; i < series_.flows.size(); ++i) {
      series_.flows[i].bytes.push_back(flow_acc_[i]);
      flow_acc_[i] = 0;
    }
    for (size_t i = 0; i < series_.hosts.size(); ++i) {
      series_.hosts[i].cnps.push_back(host_acc_[i]);
      host_acc_[i] = 0;
    }
    next_sample_ += series_.interval;
  }
}

const Series& SwitchedNetwork::series(Nanos now) {
  run(now);
  if (series_.interval.count() != 0) sample_until(now, true);
  return series_;
}

void SwitchedNetwork::forget() {
  for (Port& p : ports_) {
    p.head = p.tail = p.on_wire = kNone;
    p.bytes = p.held_downstream = p.ps_carry = 0;
    p.paused = p.xoff_sent = false;
  }
  for (Node& n : nodes_) n.buffer_used = 0;
  packets_.clear();
  datagrams_.clear();
  free_packets_.clear();
  live_packets_ = 0;
  events_.clear();
}

void SwitchedNetwork::reset(Nanos start) {
  for (uint32_t i = 0; i < packets_.size(); ++i) {
    if (packets_[i].live && sink_ != nullptr) sink_->discard(datagrams_[i]);
  }
  forget();
  max_live_packets_ = 0;
  for (Port& p : ports_) p.stats = PortStats{};
  next_seq_ = 0;
  rng_ = topo_.seed;
  cnps_ = 0;
  const Nanos interval = series_.interval;
  series_ = Series{};
  series_.interval = interval;
  next_sample_ = start + interval;
  std::fill(port_line_.begin(), port_line_.end(), -1);
  std::fill(paused_at_last_sample_.begin(), paused_at_last_sample_.end(), 0);
  std::fill(host_line_.begin(), host_line_.end(), -1);
  flow_line_.clear();
  flow_acc_.clear();
  host_acc_.clear();
}

size_t SwitchedNetwork::port_count() const { return ports_.size(); }
const PortStats& SwitchedNetwork::port_stats(uint32_t port) const { return ports_[port].stats; }
uint64_t SwitchedNetwork::queue_bytes(uint32_t port) const { return ports_[port].bytes; }
bool SwitchedNetwork::paused(uint32_t port) const { return ports_[port].paused; }

std::string SwitchedNetwork::port_name(uint32_t port) const {
  const Port& p = ports_[port];
  return topo_.nodes[p.node].name + "->" + topo_.nodes[p.to_node].name;
}

int SwitchedNetwork::node_index(const std::string& name) const {
  for (size_t i = 0; i < topo_.nodes.size(); ++i)
    if (topo_.nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

int SwitchedNetwork::port_between(const std::string& a, const std::string& b) const {
  const int na = node_index(a), nb = node_index(b);
  if (na < 0 || nb < 0) return -1;
  for (uint32_t p : nodes_[na].ports)
    if (ports_[p].to_node == uint32_t(nb)) return static_cast<int>(p);
  return -1;
}

PortStats SwitchedNetwork::totals() const {
  PortStats t;
  for (const Port& p : ports_) {
    t.tx_packets += p.stats.tx_packets;
    t.tx_bytes += p.stats.tx_bytes;
    t.ecn_marked += p.stats.ecn_marked;
    t.dropped += p.stats.dropped;
    t.max_queue_bytes = std::max(t.max_queue_bytes, p.stats.max_queue_bytes);
    t.pauses_received += p.stats.pauses_received;
    t.paused += p.stats.paused;
  }
  return t;
}

}  // namespace rocelab::fabric
