// A ladder diagram: one lane per node, time down the page, an arrow per
// packet, and beside each lane what happened on that node (verbs, QP state
// changes, completions, timers, drops, refusals). Built from what the devices
// report (a PacketTap and an EventSink per node, see LadderRecorder), drawn
// for a terminal or as SVG. The model knows nothing of scenarios: `rocelab
// sim` fills it from a run, `rocelab ladder` from a capture
// (capture_ladder.h).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "emu/records.h"
#include "emu/transport/fault_injector.h"
#include "wire/ip_udp.h"
#include "present/json.h"
#include "wire/packet.h"

namespace rocelab::sim {

using Nanos = std::chrono::nanoseconds;

// One packet as the ladder draws it.
struct LadderPacket {
  int from = -1, to = -1;  // lane indices; -1: an address that is no lane
  Nanos sent{0}, arrived{0};
  enum class Fate : uint8_t { kInFlight, kDelivered, kDropped };
  Fate fate = Fate::kInFlight;
  unsigned copies = 0;     // deliveries beyond the first (duplicated on the way)
  bool retransmission = false;
  bool corrupted = false, delayed = false;  // by the fault injector
  bool bad_icrc = false;                     // (captures) the ICRC does not match
  std::string headers;        // every header field, a line per header (present::header_lines)
  uint8_t opcode = 0;
  uint32_t psn = 0, dest_qpn = 0, payload_len = 0;
  bool ack_req = false;
  std::optional<uint8_t> aeth_syndrome;
  uint32_t msn = 0;
  // (captures) a MAD to QP 1: what it says ("CM REQ qpn 0x000011 psn 9026318"),
  // drawn instead of the UD SEND that carries it.
  std::string mad;
  std::string label() const;  // "RC SEND First psn 0 AckReq len 1024"
};

struct LadderEntry {
  Nanos time{0};
  uint64_t seq = 0;            // insertion order: ties in time keep it
  int lane = -1;               // node events: the lane; -1: the whole diagram
  std::optional<size_t> packet;  // an arrow: index into Ladder::packets
  std::string text;            // a node event or note
  std::optional<uint32_t> qpn;   // the QP a node event is about (a verb, the engine's events)
};

struct Ladder {
  std::vector<std::string> lanes;  // "alice 10.0.0.1"
  std::vector<LadderPacket> packets;
  std::vector<LadderEntry> entries;
  // Snapshots of what the nodes hold (QPs with state, PSNs and queues, CQs,
  // counters), as JSON objects, for the step-through page; empty for captures.
  std::vector<present::Json> states;
  std::vector<size_t> state_at;  // entries.size() when each state was taken
  std::vector<Nanos> state_time; // ... and the time it holds for

  // A line of text beside a lane (or across the diagram with lane -1),
  // about QP qpn of that lane when given.
  void note(Nanos t, int lane, std::string text, std::optional<uint32_t> qpn = std::nullopt);
  // Entries by time (stable).
  std::vector<const LadderEntry*> ordered() const;
};

// What a ladder keeps of a run with many nodes (a switched fabric): the
// lanes drawn and, when qps is not empty, only the packets to those QPs and
// the events of those QPs. The step-through page's state keeps the QPs named
// in qp_names and the CQs in cq_names (each: all when empty) of drawn lanes.
struct LadderFilter {
  std::vector<bool> lanes;                 // per lane: drawn
  std::set<std::pair<int, uint32_t>> qps;  // (lane, QPN)
  std::set<std::string> qp_names, cq_names;
};

// The ladder of only what f keeps, its lanes renumbered. A packet is kept when
// both its ends are drawn (with one lane drawn: when it is one end) and, with
// qps, when it goes to one of them. Failures (✗, ✋) are always kept: on a lane
// not drawn they go across the diagram, named by their node.
Ladder filter_ladder(const Ladder& l, const LadderFilter& f);

// What the step-through page shows beside the ladder, under the nodes' state:
// a heading, text (a <pre>) and figures, each an SVG element; a figure's <svg> with data-x0,
// data-x1 (px), data-t0, data-t1 (µs) and a <line class="cursor"> gets a
// cursor at the current step's time (plot/line_chart.h draws them so).
struct HtmlExtras {
  std::string heading;
  std::string text;
  std::vector<std::pair<std::string, std::string>> figures;  // id, SVG
};

// The terminal drawing: a time column, one lane per node (box-drawing
// characters, UTF-8), arrows ──▶ and ◀──, ✗ where a packet was lost.
std::string render_text(const Ladder& l);
// The same as a standalone SVG document.
std::string render_svg(const Ladder& l);
// A self-contained step-through page (no server, nothing fetched): previous /
// next / a slider over the entries; at each step the ladder so far, the
// packet's headers, each QP's state, PSNs and queues, the CQs and the
// counters. `#step=N` (1-based) in the URL opens step N.
std::string render_html(const Ladder& l, const std::string& title, const HtmlExtras* extras = nullptr);

// Records a simulation into a Ladder: install tap(i)/sink(i) on node i's
// device. Packets sent are matched to packets received (by source, destination,
// opcode, PSN, QPN and length, in order): what never arrives is drawn lost.
// Both may forward to another tap/sink (a pcap writer, the event log).
class LadderRecorder {
 public:
  explicit LadderRecorder(Ladder& ladder);
  ~LadderRecorder();
  // Node i receives on addr; qp names by QPN for the lane's notes.
  void add_lane(const std::string& label, const wire::IpAddr& addr);
  void name_qp(int lane, uint32_t qpn, std::string name);
  // For the step-through page: a QP's queues and CQs, WRs posted and
  // completions polled (the runner tells; the engine's events tell the rest),
  // and the counters after a script step (text, a line per counter).
  void add_qp_view(int lane, uint32_t qpn, const std::string& name, const std::string& send_cq,
                   const std::string& recv_cq);
  void posted(Nanos t, int lane, uint32_t qpn, bool send, uint64_t wr_id);
  void polled(Nanos t, const std::string& cq, size_t n);
  void set_counters(Nanos t, std::string text);
  emu::PacketTap* tap(int lane, emu::PacketTap* forward);
  emu::EventSink* sink(int lane, emu::EventSink* forward);
  // What node `lane`'s fault injector did (FaultInjector::set_observer): a
  // drop is known exactly, not only inferred at the end.
  void on_fault(int lane, const emu::FaultRecord& r);
  // Call when the run is over: what is still unmatched was lost.
  void finish(bool fabric_idle);
  std::string qp_name(int lane, uint32_t qpn) const;

 private:
  class Tap;
  class Sink;
  // from lane, to lane, BTH opcode, PSN, destination QPN, payload length
  using Key = std::tuple<int, int, uint8_t, uint32_t, uint32_t, uint32_t>;
  int lane_of(const wire::IpAddr& a) const;
  void on_packet(int lane, emu::Direction dir, Nanos t, const emu::Datagram& d);
  std::optional<Key> key_of(int from, int to, const emu::Datagram& d) const;
  void on_event(int lane, const emu::EngineEvent& e);

  Ladder& l_;
  std::vector<wire::IpAddr> addrs_;
  std::vector<std::unique_ptr<Tap>> taps_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  std::map<std::pair<int, uint32_t>, std::string> qp_names_;
  std::map<Key, std::vector<size_t>> pending_;  // sent, not yet received (FIFO)
  std::map<Key, size_t> last_delivered_;
  std::map<std::tuple<int, uint32_t, uint32_t>, bool> sent_requests_;  // (from, qpn, psn)

  // The step-through page's view of the nodes.
  struct QpView {
    int lane = 0;
    std::string name, state = "RESET", send_cq, recv_cq;
    std::optional<uint32_t> sent_psn, rcvd_psn;  // last request PSN sent / received
    std::vector<uint64_t> sq, rq;               // WR ids not yet completed
  };
  void snapshot(Nanos t);  // pushes the view to l_.states
  std::vector<QpView> qps_;
  std::map<std::pair<int, uint32_t>, size_t> qp_view_;  // (lane, qpn) -> qps_ index
  std::vector<std::pair<std::string, std::vector<std::string>>> cqs_;  // name, CQEs waiting
  std::string counters_;
};

}  // namespace rocelab::sim
