// What a scenario's switched network did (topology.h): per port and per flow
// totals, per host CNPs and congestion counters, and the time series, named
// by the scenario's nodes and QPs. Written as JSON lines (`rocelab sim
// --json`), as a text table (after the ladder), and as line charts (`--plots`,
// the `--html` page).
//
// The network's own series (fabric::Series) give queue depths, pause time,
// delivered bytes per flow and CNPs per host. A FlowMeter, a PacketTap on
// every node, adds what the network does not count per flow: packets sent,
// packets delivered, and those delivered marked CE, per sample interval on
// the network's grid (sample k covers ((k) * interval, (k + 1) * interval]).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "emu/records.h"
#include "fabric/network.h"
#include "plot/line_chart.h"
#include "present/json.h"
#include "wire/ip_udp.h"

namespace rocelab::sim {

using Nanos = std::chrono::nanoseconds;

class FlowMeter {
 public:
  struct Flow {
    wire::IpAddr src, dst;
    uint16_t sport = 0;
    int src_lane = -1, dst_lane = -1;
    uint32_t dest_qpn = 0;  // the BTH's of its first packet: the QP it goes to
    uint64_t packets_sent = 0, bytes_sent = 0;            // UDP payload bytes
    uint64_t packets_delivered = 0, bytes_delivered = 0;
    uint64_t ce_marked = 0;     // delivered with ECN CE
    std::vector<uint64_t> ce;   // ... per sample
  };

  explicit FlowMeter(Nanos interval);
  ~FlowMeter();
  // The tap of node `lane` (at addr), forwarding to `forward` (may be null).
  emu::PacketTap* tap(int lane, const wire::IpAddr& addr, emu::PacketTap* forward);
  const std::vector<Flow>& flows() const { return flows_; }

 private:
  class Tap;
  void on_packet(int lane, const wire::IpAddr& addr, emu::Direction dir, Nanos t, const emu::Datagram& d);
  using Key = std::tuple<std::array<uint8_t, 16>, std::array<uint8_t, 16>, uint16_t>;  // GIDs, UDP source port
  int lane_of(const wire::IpAddr& a) const;
  Nanos interval_;
  std::vector<std::unique_ptr<Tap>> taps_;
  std::vector<wire::IpAddr> lane_addr_;
  std::vector<Flow> flows_;
  std::map<Key, size_t> index_;
};

struct FabricReport {
  std::string shape;  // the preset, or "topology"
  Nanos interval{0};
  std::vector<Nanos> t;  // sample times
  struct Port {
    std::string name, from, to;  // "tor->sink"
    fabric::PortStats stats;
    bool sampled = false;                       // has series below
    std::vector<uint64_t> queue_bytes, paused_ns;  // per sample
  };
  std::vector<Port> ports;  // every port, in the network's order
  struct Flow {
    std::string src, dst;       // node names (an address when it is no node)
    wire::IpAddr src_addr, dst_addr;
    uint16_t sport = 0;
    std::string qp, dest_qp;    // the sending and the receiving QP ("" unknown)
    uint64_t packets_sent = 0, bytes_sent = 0, packets_delivered = 0, bytes_delivered = 0, ce_marked = 0;
    std::vector<uint64_t> bytes;  // UDP payload bytes delivered, per sample (the network's count)
    std::vector<uint64_t> ce;     // CE-marked packets delivered, per sample
    std::string label() const;    // "s0 → sink (a0)"
  };
  std::vector<Flow> flows;
  struct Host {
    std::string node, host;
    wire::IpAddr addr;
    uint64_t cnps_received = 0;
    std::vector<uint32_t> cnps;  // per sample
    std::vector<std::pair<std::string, uint64_t>> counters;  // the device's np_* and rp_* counters
  };
  std::vector<Host> hosts;  // every node
  fabric::PortStats totals;
  size_t switches = 0;
};

// The scenario's names for what the network and the meter saw.
struct FabricNames {
  std::string shape;
  struct Node {
    std::string name, host;
    wire::IpAddr addr;
    emu::Counters counters;
  };
  std::vector<Node> nodes;  // by lane
  // QPs by (lane, QPN): its name and the name of the QP it is connected to.
  std::map<std::pair<int, uint32_t>, std::pair<std::string, std::string>> qps;
};

// The report of net, its series completed up to `end` (a sample time, when
// the caller has made it one: see runner.cc).
FabricReport make_fabric_report(fabric::SwitchedNetwork& net, Nanos end, const FlowMeter& meter,
                                const FabricNames& names);

// The JSON lines: one {"type":"port"} per port, {"type":"flow"} per flow,
// {"type":"host"} per node, one {"type":"network"} with the totals and one
// {"type":"series"}.
std::vector<present::Json> fabric_json(const FabricReport& r);
// The totals as a table, for the terminal and the page.
std::string fabric_text(const FabricReport& r);
// One chart per series kind: delivered rate per flow, queue depth per port,
// pause time per port, CNPs per host, CE-marked packets per flow.
std::vector<plot::Chart> fabric_charts(const FabricReport& r);
// The ids of those charts on the page: "plot-rate", "plot-queue", ...
std::vector<std::string> fabric_chart_ids();

}  // namespace rocelab::sim
