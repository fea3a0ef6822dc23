#include "sim/fabric_report.h"

#include <algorithm>
#include <cstdio>

#include "wire/bth.h"

namespace rocelab::sim {

namespace {

using present::Json;

// A port's counters (or the network's totals), under their JSON names.
void add_port_stats(Json& j, const fabric::PortStats& s) {
  j["tx_packets"] = s.tx_packets;
  j["tx_bytes"] = s.tx_bytes;
  j["ecn_marked"] = s.ecn_marked;
  j["dropped"] = s.dropped;
  j["max_queue_bytes"] = s.max_queue_bytes;
  j["pauses_received"] = s.pauses_received;
  j["paused_ns"] = s.paused.count();
}

std::string us_text(uint64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(ns) / 1000.0);
  return b;
}

std::string kib_text(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return b;
}

// Terminal cells: one per UTF-8 character.
size_t cells_of(const std::string& utf8) {
  size_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

// Right-aligned columns after a left-aligned first one.
std::string row(const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
  std::string s;
  for (size_t i = 0; i < cells.size(); ++i) {
    const size_t w = widths[i], n = cells_of(cells[i]);
    const std::string pad(w > n ? w - n : 0, ' ');
    s += i == 0 ? cells[i] + pad : "  " + pad + cells[i];
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s + "\n";
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows) {
    w.resize(std::max(w.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], cells_of(r[i]));
  }
  std::string s;
  for (const auto& r : rows) s += row(r, w);
  return s;
}

}  // namespace

// ---- the meter ----------------------------------------------------------

class FlowMeter::Tap final : public emu::PacketTap {
 public:
  Tap(FlowMeter& m, int lane, wire::IpAddr addr, emu::PacketTap* fwd) : m_(m), lane_(lane), addr_(addr), fwd_(fwd) {}
  void on_packet(emu::Direction dir, Nanos time, const emu::Datagram& d) override {
    m_.on_packet(lane_, addr_, dir, time, d);
    if (fwd_) fwd_->on_packet(dir, time, d);
  }
  void on_batch_end() override {
    if (fwd_) fwd_->on_batch_end();
  }

 private:
  FlowMeter& m_;
  int lane_;
  wire::IpAddr addr_;
  emu::PacketTap* fwd_;
};

FlowMeter::FlowMeter(Nanos interval) : interval_(interval) {}
FlowMeter::~FlowMeter() = default;

emu::PacketTap* FlowMeter::tap(int lane, const wire::IpAddr& addr, emu::PacketTap* forward) {
  if (lane_addr_.size() <= size_t(lane)) lane_addr_.resize(size_t(lane) + 1);
  lane_addr_[size_t(lane)] = addr;
  taps_.push_back(std::make_unique<Tap>(*this, lane, addr, forward));
  return taps_.back().get();
}

int FlowMeter::lane_of(const wire::IpAddr& a) const {
  for (size_t i = 0; i < lane_addr_.size(); ++i)
    if (lane_addr_[i] == a) return static_cast<int>(i);
  return -1;
}

void FlowMeter::on_packet(int lane, const wire::IpAddr& addr, emu::Direction dir, Nanos t, const emu::Datagram& d) {
  const bool tx = dir == emu::Direction::kTx;
  const wire::IpAddr src = tx ? addr : d.ip.src, dst = tx ? d.ip.dst : addr;
  auto [it, fresh] = index_.try_emplace(Key{src.gid(), dst.gid(), d.ip.sport}, flows_.size());
  if (fresh) {
    Flow f;
    f.src = src;
    f.dst = dst;
    f.sport = d.ip.sport;
    f.src_lane = tx ? lane : lane_of(src);
    f.dst_lane = tx ? lane_of(dst) : lane;
    if (d.payload.size() >= 12) f.dest_qpn = wire::BthView(d.payload.data()).dest_qpn().value();
    flows_.push_back(std::move(f));
  }
  Flow& f = flows_[it->second];
  const uint64_t len = d.payload.size();
  if (tx) {
    ++f.packets_sent;
    f.bytes_sent += len;
    return;
  }
  ++f.packets_delivered;
  f.bytes_delivered += len;
  if ((d.ip.tclass & 3) == 3) {
    ++f.ce_marked;
    // The network's grid: sample k holds what happened in (k, k + 1] intervals.
    const int64_t k = t.count() <= 0 ? 0 : (t.count() - 1) / interval_.count();
    if (f.ce.size() <= size_t(k)) f.ce.resize(size_t(k) + 1);
    ++f.ce[size_t(k)];
  }
}

// ---- the report ---------------------------------------------------------

std::string FabricReport::Flow::label() const {
  return src + " → " + dst + (qp.empty() ? "" : " (" + qp + ")");
}

FabricReport make_fabric_report(fabric::SwitchedNetwork& net, Nanos end, const FlowMeter& meter,
                                const FabricNames& names) {
  FabricReport r;
  r.shape = names.shape;
  const fabric::Series& series = net.series(end);
  r.interval = series.interval;
  r.t = series.t;
  const size_t samples = r.t.size();
  const fabric::Topology& topo = net.topology();
  for (const auto& n : topo.nodes) r.switches += n.is_switch;
  for (uint32_t p = 0; p < net.port_count(); ++p) {
    FabricReport::Port port;
    port.name = net.port_name(p);
    const auto& link = topo.links[p / 2];
    port.from = p % 2 == 0 ? link.a : link.b;
    port.to = p % 2 == 0 ? link.b : link.a;
    port.stats = net.port_stats(p);
    r.ports.push_back(std::move(port));
  }
  for (const fabric::Series::PortLine& line : series.ports) {
    FabricReport::Port& port = r.ports[line.port];
    port.sampled = true;
    port.queue_bytes = line.queue_bytes;
    port.paused_ns = line.paused_ns;
  }
  r.totals = net.totals();

  auto node_name = [&](const wire::IpAddr& a) {
    for (const auto& n : names.nodes)
      if (n.addr == a) return n.name;
    for (const auto& n : topo.nodes)
      if (!n.is_switch && n.addr == a) return n.name;
    return a.to_string();
  };
  auto lane_of = [&](const wire::IpAddr& a) {
    for (size_t i = 0; i < names.nodes.size(); ++i)
      if (names.nodes[i].addr == a) return static_cast<int>(i);
    return -1;
  };
  // The network's flows (its delivered bytes), then the meter's (what it sent,
  // delivered, marked); a flow whose every packet was lost is only the meter's.
  std::map<std::tuple<std::array<uint8_t, 16>, std::array<uint8_t, 16>, uint16_t>, size_t> index;
  auto flow = [&](const wire::IpAddr& src, const wire::IpAddr& dst, uint16_t sport) -> FabricReport::Flow& {
    auto [it, fresh] = index.try_emplace({src.gid(), dst.gid(), sport}, r.flows.size());
    if (fresh) {
      FabricReport::Flow f;
      f.src = node_name(src);
      f.dst = node_name(dst);
      f.src_addr = src;
      f.dst_addr = dst;
      f.sport = sport;
      f.bytes.assign(samples, 0);
      f.ce.assign(samples, 0);
      r.flows.push_back(std::move(f));
    }
    return r.flows[it->second];
  };
  for (const fabric::Series::FlowLine& line : series.flows) {
    FabricReport::Flow& f = flow(line.src, line.dst, line.sport);
    for (size_t k = 0; k < line.bytes.size() && k < samples; ++k) f.bytes[k] = line.bytes[k];
  }
  for (const FlowMeter::Flow& m : meter.flows()) {
    FabricReport::Flow& f = flow(m.src, m.dst, m.sport);
    f.packets_sent = m.packets_sent;
    f.bytes_sent = m.bytes_sent;
    f.packets_delivered = m.packets_delivered;
    f.bytes_delivered = m.bytes_delivered;
    f.ce_marked = m.ce_marked;
    for (size_t k = 0; k < m.ce.size(); ++k) {
      if (k >= f.ce.size()) f.ce.resize(k + 1, 0);
      f.ce[k] += m.ce[k];
    }
    const int dst_lane = lane_of(m.dst);
    auto q = names.qps.find({dst_lane, m.dest_qpn});
    if (q != names.qps.end()) {
      f.dest_qp = q->second.first;
      f.qp = q->second.second;
    }
  }
  for (const auto& n : names.nodes) {
    FabricReport::Host h;
    h.node = n.name;
    h.host = n.host;
    h.addr = n.addr;
    h.cnps.assign(samples, 0);
    n.counters.for_each([&](std::string_view name, uint64_t v) {
      if (name.rfind("np_", 0) == 0 || name.rfind("rp_", 0) == 0) h.counters.push_back({std::string(name), v});
    });
    r.hosts.push_back(std::move(h));
  }
  for (const fabric::Series::HostLine& line : series.hosts) {
    const wire::IpAddr& a = topo.nodes[line.host].addr;
    for (FabricReport::Host& h : r.hosts) {
      if (!(h.addr == a)) continue;
      for (size_t k = 0; k < line.cnps.size() && k < samples; ++k) {
        h.cnps[k] = line.cnps[k];
        h.cnps_received += line.cnps[k];
      }
    }
  }
  return r;
}

std::vector<present::Json> fabric_json(const FabricReport& r) {
  std::vector<Json> out;
  for (const auto& p : r.ports) {
    Json port = {{"type", "port"}, {"port", p.name}, {"from", p.from}, {"to", p.to}};
    add_port_stats(port, p.stats);
    out.push_back(std::move(port));
  }
  for (const auto& f : r.flows) {
    out.push_back({{"type", "flow"},
                   {"src", f.src},
                   {"dst", f.dst},
                   {"src_addr", f.src_addr.to_string()},
                   {"dst_addr", f.dst_addr.to_string()},
                   {"sport", f.sport},
                   {"qp", f.qp},
                   {"dest_qp", f.dest_qp},
                   {"packets_sent", f.packets_sent},
                   {"bytes_sent", f.bytes_sent},
                   {"packets_delivered", f.packets_delivered},
                   {"bytes_delivered", f.bytes_delivered},
                   {"ce_marked", f.ce_marked},
                   {"lost", f.packets_sent > f.packets_delivered ? f.packets_sent - f.packets_delivered : 0}});
  }
  for (const auto& h : r.hosts) {
    Json counters = Json::object();
    for (const auto& [name, v] : h.counters) counters[name] = v;
    out.push_back({{"type", "host"},
                   {"node", h.node},
                   {"host", h.host},
                   {"addr", h.addr.to_string()},
                   {"cnps_received", h.cnps_received},
                   {"counters", std::move(counters)}});
  }
  Json network = {{"type", "network"}, {"shape", r.shape}, {"switches", r.switches}, {"ports", r.ports.size()}};
  add_port_stats(network, r.totals);
  out.push_back(std::move(network));
  Json t = Json::array(), ports = Json::array(), flows = Json::array(), hosts = Json::array();
  for (Nanos x : r.t) t.push_back(x.count());
  for (const auto& p : r.ports)
    if (p.sampled) ports.push_back({{"port", p.name}, {"queue_bytes", p.queue_bytes}, {"paused_ns", p.paused_ns}});
  const uint64_t interval_ns = static_cast<uint64_t>(r.interval.count());
  for (const auto& f : r.flows) {
    Json rate = Json::array();  // bits/s, rounded down
    for (uint64_t b : f.bytes) rate.push_back(interval_ns ? b * 8 * 1'000'000'000 / interval_ns : 0);
    flows.push_back({{"src", f.src},
                     {"dst", f.dst},
                     {"sport", f.sport},
                     {"qp", f.qp},
                     {"bytes", f.bytes},
                     {"rate_bps", std::move(rate)},
                     {"ce_marked", f.ce}});
  }
  for (const auto& h : r.hosts)
    if (h.cnps_received) hosts.push_back({{"node", h.node}, {"cnps", h.cnps}});
  out.push_back({{"type", "series"},
                 {"interval_ns", r.interval.count()},
                 {"t_ns", std::move(t)},
                 {"ports", std::move(ports)},
                 {"flows", std::move(flows)},
                 {"hosts", std::move(hosts)}});
  return out;
}

std::string fabric_text(const FabricReport& r) {
  std::string s = "network: " + r.shape + ", " + std::to_string(r.hosts.size()) + " nodes, " +
                  std::to_string(r.switches) + (r.switches == 1 ? " switch" : " switches") + ", sampled every " +
                  plot::tick_text(static_cast<double>(r.interval.count()) / 1000.0) + " us\n\n";
  std::vector<std::vector<std::string>> ports{
      {"port", "packets", "bytes", "ECN marks", "drops", "max queue", "pauses", "paused (us)"}};
  for (const auto& p : r.ports) {
    const auto& st = p.stats;
    if (st.tx_packets == 0 && st.dropped == 0 && st.pauses_received == 0) continue;
    ports.push_back({p.name, std::to_string(st.tx_packets), std::to_string(st.tx_bytes), std::to_string(st.ecn_marked),
                     std::to_string(st.dropped), kib_text(st.max_queue_bytes), std::to_string(st.pauses_received),
                     us_text(uint64_t(st.paused.count()))});
  }
  s += table(ports) + "\n";
  std::vector<std::vector<std::string>> flows{{"flow", "sent", "delivered", "CE marked", "lost"}};
  for (const auto& f : r.flows) {
    flows.push_back({f.label(), std::to_string(f.packets_sent), std::to_string(f.packets_delivered),
                     std::to_string(f.ce_marked),
                     std::to_string(f.packets_sent > f.packets_delivered ? f.packets_sent - f.packets_delivered : 0)});
  }
  s += table(flows) + "\n";
  std::vector<std::vector<std::string>> hosts{{"node", "CNPs received"}};
  std::vector<std::string> counter_names;
  for (const auto& h : r.hosts)
    for (const auto& [name, v] : h.counters)
      if (v && std::find(counter_names.begin(), counter_names.end(), name) == counter_names.end())
        counter_names.push_back(name);
  for (const auto& n : counter_names) hosts[0].push_back(n);
  for (const auto& h : r.hosts) {
    std::vector<std::string> line{h.node, std::to_string(h.cnps_received)};
    for (const auto& n : counter_names) {
      uint64_t v = 0;
      for (const auto& [name, x] : h.counters)
        if (name == n) v = x;
      line.push_back(std::to_string(v));
    }
    hosts.push_back(std::move(line));
  }
  s += table(hosts);
  return s;
}

std::vector<std::string> fabric_chart_ids() { return {"plot-rate", "plot-queue", "plot-pause", "plot-cnp", "plot-ecn"}; }

std::vector<plot::Chart> fabric_charts(const FabricReport& r) {
  std::vector<double> x;
  for (Nanos t : r.t) x.push_back(static_cast<double>(t.count()) / 1000.0);
  const std::string per = "per " + plot::tick_text(static_cast<double>(r.interval.count()) / 1000.0) + " µs";
  auto chart = [&](std::string title, std::string y_label, std::string empty) {
    plot::Chart c;
    c.title = std::move(title);
    c.x_label = "time (µs)";
    c.y_label = std::move(y_label);
    c.x = x;
    c.empty_text = std::move(empty);
    return c;
  };
  plot::Chart rate = chart("Delivered rate per flow", "Gb/s (UDP payload)", "no packet was delivered");
  plot::Chart marks = chart("ECN-marked packets delivered per flow", "packets " + per, "no ECN mark in this run");
  const double gbps = r.interval.count() > 0 ? 8.0 / static_cast<double>(r.interval.count()) : 0;  // bytes/ns*8 = Gb/s
  for (const auto& f : r.flows) {
    plot::Line l{f.label(), {}};
    for (uint64_t b : f.bytes) l.y.push_back(static_cast<double>(b) * gbps);
    rate.lines.push_back(std::move(l));
    if (f.ce_marked == 0) continue;
    plot::Line m{f.label(), {}};
    for (size_t k = 0; k < x.size(); ++k) m.y.push_back(k < f.ce.size() ? static_cast<double>(f.ce[k]) : 0);
    marks.lines.push_back(std::move(m));
  }
  plot::Chart queue = chart("Queue depth per egress port", "queue (KiB)", "no queue in this run");
  plot::Chart pause = chart("Time paused by PFC per egress port", "µs paused " + per, "no PFC pause in this run");
  for (const auto& p : r.ports) {
    if (!p.sampled) continue;
    plot::Line q{p.name, {}}, z{p.name, {}};
    for (uint64_t b : p.queue_bytes) q.y.push_back(static_cast<double>(b) / 1024.0);
    // A port whose queue no sample caught (a frame at a time, between
    // samples) would be a flat line at 0.
    if (std::any_of(p.queue_bytes.begin(), p.queue_bytes.end(), [](uint64_t b) { return b != 0; }))
      queue.lines.push_back(std::move(q));
    if (p.stats.pauses_received == 0) continue;
    for (uint64_t ns : p.paused_ns) z.y.push_back(static_cast<double>(ns) / 1000.0);
    pause.lines.push_back(std::move(z));
  }
  plot::Chart cnp = chart("CNPs received per host", "CNPs " + per, "no CNP in this run");
  for (const auto& h : r.hosts) {
    if (h.cnps_received == 0) continue;
    plot::Line l{h.node, {}};
    for (uint32_t c : h.cnps) l.y.push_back(c);
    cnp.lines.push_back(std::move(l));
  }
  return {rate, queue, pause, cnp, marks};
}

}  // namespace rocelab::sim
