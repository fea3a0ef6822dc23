// A ladder diagram: one lane per node, time down the page, an arrow per
// packet, and beside each lane what happened on that node (verbs, QP state
// changes, completions, timers, drops, refusals). Built from what the devices
// report (a PacketTap and an EventSink per node, see LadderRecorder), drawn
// for a terminal or as SVG. The model knows nothing of scenarios: `rocelab
// sim` fills it from a run, `rocelab ladder` (issue #11 item 4) will fill it
// from a capture.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "emu/records.h"
#include "emu/transport/fault_injector.h"
#include "wire/ip_udp.h"

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
  uint8_t opcode = 0;
  uint32_t psn = 0, dest_qpn = 0, payload_len = 0;
  bool ack_req = false;
  std::optional<uint8_t> aeth_syndrome;
  uint32_t msn = 0;
  std::string label() const;  // "RC SEND First psn 0 AckReq len 1024"
};

struct LadderEntry {
  Nanos time{0};
  uint64_t seq = 0;            // insertion order: ties in time keep it
  int lane = -1;               // node events: the lane; -1: the whole diagram
  std::optional<size_t> packet;  // an arrow: index into Ladder::packets
  std::string text;            // a node event or note
};

struct Ladder {
  std::vector<std::string> lanes;  // "alice 10.0.0.1"
  std::vector<LadderPacket> packets;
  std::vector<LadderEntry> entries;

  // A line of text beside a lane (or across the diagram with lane -1).
  void note(Nanos t, int lane, std::string text);
  // Entries by time (stable).
  std::vector<const LadderEntry*> ordered() const;
};

// The terminal drawing: a time column, one lane per node (box-drawing
// characters, UTF-8), arrows ──▶ and ◀──, ✗ where a packet was lost.
std::string render_text(const Ladder& l);
// The same as a standalone SVG document.
std::string render_svg(const Ladder& l);

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
};

}  // namespace rocelab::sim
