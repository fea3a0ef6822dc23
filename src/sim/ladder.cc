#include "sim/ladder.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "plot/xml.h"
#include "present/fields.h"
#include "present/headers.h"
#include "wire/aeth.h"
#include "wire/packet.h"

namespace rocelab::sim {

using plot::xml_escape;

namespace {

// Terminal cells: one UTF-8 character each.
using Row = std::vector<std::string>;

void put(Row& row, size_t col, const std::string& utf8) {
  size_t i = 0;
  while (i < utf8.size()) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if (col >= row.size()) row.resize(col + 1, " ");
    row[col++] = utf8.substr(i, n);
    i += n;
  }
}

size_t cells(const std::string& utf8) {
  size_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

std::string join(const Row& row) {
  std::string s;
  for (const auto& c : row) s += c;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string time_text(Nanos t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%12.3f", static_cast<double>(t.count()) / 1000.0);
  return buf;
}

constexpr size_t kTimeCols = 13;  // "%12.3f" and a space
constexpr size_t kMinLaneWidth = 60;

}  // namespace

std::string LadderPacket::label() const {
  const wire::OpInfo& info = wire::op_info(opcode);
  std::string s;
  if (!mad.empty()) {
    s = mad;
  } else {
    s = info.valid ? std::string(info.name) : "opcode " + std::to_string(opcode);
    s += " psn " + std::to_string(psn);
    if (ack_req) s += " AckReq";
    if (payload_len != 0) s += " len " + std::to_string(payload_len);
  }
  if (aeth_syndrome) s += " " + present::aeth_brief(wire::Aeth{*aeth_syndrome, msn});
  if (retransmission) s += " (again)";
  if (delayed) s += " (delayed)";
  if (corrupted) s += " (corrupted)";
  if (bad_icrc) s += " (bad ICRC)";
  if (copies != 0) s += " (x" + std::to_string(copies + 1) + ")";
  return s;
}

void Ladder::note(Nanos t, int lane, std::string text, std::optional<uint32_t> qpn) {
  entries.push_back({t, entries.size(), lane, std::nullopt, std::move(text), qpn});
}

Ladder filter_ladder(const Ladder& l, const LadderFilter& f) {
  Ladder out;
  std::vector<int> lane_map(l.lanes.size(), -1);
  size_t shown = 0;
  for (size_t i = 0; i < l.lanes.size(); ++i) {
    if (i < f.lanes.size() && f.lanes[i]) {
      lane_map[i] = static_cast<int>(out.lanes.size());
      out.lanes.push_back(l.lanes[i]);
      ++shown;
    }
  }
  auto map = [&](int lane) { return lane >= 0 && size_t(lane) < lane_map.size() ? lane_map[size_t(lane)] : -1; };
  auto failure = [](const std::string& t) { return t.rfind("✗", 0) == 0 || t.rfind("✋", 0) == 0; };
  // kept_before[k]: how many of the first k entries (in insertion order) were kept.
  std::vector<size_t> kept_before(l.entries.size() + 1, 0);
  std::vector<size_t> packet_map(l.packets.size(), SIZE_MAX);
  for (size_t k = 0; k < l.entries.size(); ++k) {
    const LadderEntry& e = l.entries[k];
    kept_before[k + 1] = kept_before[k];
    LadderEntry n = e;
    n.seq = out.entries.size();
    n.lane = map(e.lane);
    if (e.packet) {
      const LadderPacket& p = l.packets[*e.packet];
      const int from = map(p.from), to = map(p.to);
      const bool ends = shown == 1 ? (from >= 0 || to >= 0) : (from >= 0 && to >= 0);
      if (!ends || (!f.qps.empty() && !f.qps.contains({p.to, p.dest_qpn}))) continue;
      LadderPacket q = p;
      q.from = from;
      q.to = to;
      if (packet_map[*e.packet] == SIZE_MAX) {
        packet_map[*e.packet] = out.packets.size();
        out.packets.push_back(q);
      }
      n.packet = packet_map[*e.packet];
      n.lane = from >= 0 ? from : to;
    } else if (e.lane >= 0 && n.lane < 0) {
      if (!failure(e.text)) continue;
      const std::string& label = l.lanes[size_t(e.lane)];
      n.text = label.substr(0, label.find(' ')) + ": " + e.text;
    } else if (e.lane >= 0 && e.qpn && !f.qps.empty() && !f.qps.contains({e.lane, *e.qpn}) && !failure(e.text)) {
      continue;
    }
    out.entries.push_back(std::move(n));
    kept_before[k + 1] = kept_before[k] + 1;
  }
  // The page's states: the kept QPs, CQs and nodes' counters.
  std::set<std::string> nodes;
  for (const std::string& label : out.lanes) nodes.insert(label);
  std::set<std::string> node_names;
  for (const std::string& label : out.lanes) node_names.insert(label.substr(0, label.find(' ')));
  for (size_t s = 0; s < l.states.size(); ++s) {
    present::Json j = l.states[s];
    if (j.contains("qps")) {
      present::Json qps = present::Json::array();
      for (const auto& q : j["qps"])
        if (nodes.contains(q.value("node", "")) && (f.qp_names.empty() || f.qp_names.contains(q.value("name", ""))))
          qps.push_back(q);
      j["qps"] = std::move(qps);
    }
    if (j.contains("cqs") && !f.cq_names.empty()) {
      present::Json cqs = present::Json::array();
      for (const auto& c : j["cqs"])
        if (f.cq_names.contains(c.value("name", ""))) cqs.push_back(c);
      j["cqs"] = std::move(cqs);
    }
    if (j.contains("counters") && j["counters"].is_string()) {
      const std::string text = j["counters"].get<std::string>();
      std::string kept;
      for (size_t at = 0; at < text.size();) {
        const size_t nl = text.find('\n', at);
        const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl + 1 - at);
        if (node_names.contains(line.substr(0, line.find(':')))) kept += line;
        at = nl == std::string::npos ? text.size() : nl + 1;
      }
      j["counters"] = kept;
    }
    const size_t at = kept_before[std::min(l.state_at[s], l.entries.size())];
    // A state that changed nothing that is kept adds nothing.
    if (!out.states.empty() && out.states.back() == j) continue;
    out.states.push_back(std::move(j));
    out.state_at.push_back(at);
    out.state_time.push_back(l.state_time[s]);
  }
  return out;
}

std::vector<const LadderEntry*> Ladder::ordered() const {
  std::vector<const LadderEntry*> v;
  v.reserve(entries.size());
  for (const auto& e : entries) v.push_back(&e);
  std::stable_sort(v.begin(), v.end(), [](const LadderEntry* a, const LadderEntry* b) {
    return a->time != b->time ? a->time < b->time : a->seq < b->seq;
  });
  return v;
}

std::string render_text(const Ladder& l) {
  const size_t n = l.lanes.size();
  // Wide enough for the longest arrow label between neighbouring lanes.
  size_t lane_width = kMinLaneWidth;
  for (const auto& p : l.packets) lane_width = std::max(lane_width, cells(p.label()) + 8);
  auto lane_col = [&](int lane) { return kTimeCols + static_cast<size_t>(lane) * lane_width; };
  auto bars = [&]() {
    Row row(kTimeCols, " ");
    for (size_t i = 0; i < n; ++i) put(row, lane_col(static_cast<int>(i)), "│");
    return row;
  };
  std::string out;
  {
    Row head(kTimeCols, " ");
    put(head, 0, "   time (us)");
    for (size_t i = 0; i < n; ++i) put(head, lane_col(static_cast<int>(i)), l.lanes[i]);
    out += join(head) + "\n";
  }
  for (const LadderEntry* e : l.ordered()) {
    Row row = bars();
    put(row, 0, time_text(e->time));
    if (e->packet) {
      const LadderPacket& p = l.packets[*e->packet];
      const std::string label = " " + p.label() + " ";
      if (p.from < 0 || p.to < 0 || p.from == p.to) {
        const int lane = p.from >= 0 ? p.from : p.to;
        put(row, lane_col(std::max(lane, 0)) + 2, (p.from >= 0 ? "sent to elsewhere:" : "from elsewhere:") + label);
      } else {
        const bool right = p.to > p.from;
        const size_t a = lane_col(std::min(p.from, p.to)) + 1, b = lane_col(std::max(p.from, p.to)) - 1;
        const bool lost = p.fate != LadderPacket::Fate::kDelivered;
        const size_t len = b - a + 1;
        const size_t label_cells = cells(label);
        // The arrow: from the sender's lane towards the receiver's; a lost packet
        // stops half way with ✗.
        const size_t drawn = lost ? std::max(len / 2, label_cells + 4) : len;
        for (size_t i = 0; i < std::min(drawn, len); ++i) put(row, right ? a + i : b - i, "─");
        if (lost) {
          put(row, right ? a + std::min(drawn, len) - 1 : b - (std::min(drawn, len) - 1),
              p.fate == LadderPacket::Fate::kDropped ? "✗" : "…");
        } else {
          put(row, right ? b : a, right ? "▶" : "◀");
        }
        const size_t label_at = right ? a + 2 : std::max(a + 1, b - 1 - label_cells);
        put(row, label_at, label);
      }
    } else if (e->lane < 0) {
      put(row, kTimeCols, "── " + e->text + " ──");
    } else {
      put(row, lane_col(e->lane) + 2, e->text);
    }
    out += join(row) + "\n";
  }
  return out;
}

std::string render_svg(const Ladder& l) {
  const auto order = l.ordered();
  const int n = static_cast<int>(l.lanes.size());
  const int row_h = 18, top = 40, left = 110, lane_w = 420;
  const int width = left + std::max(1, n) * lane_w + 200;
  const int height = top + static_cast<int>(order.size()) * row_h + 30;
  auto x = [&](int lane) { return left + lane * lane_w; };
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "font-family=\"monospace\" font-size=\"12\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
                "markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\">"
                "<path d=\"M 0 0 L 10 5 L 0 10 z\"/></marker></defs>\n",
                width, height);
  s += buf;
  s += "<text x=\"4\" y=\"20\" font-weight=\"bold\">time (us)</text>\n";
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%d\" y=\"20\" font-weight=\"bold\">%s</text>\n"
                  "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n",
                  x(i) - 20, xml_escape(l.lanes[static_cast<size_t>(i)]).c_str(), x(i), top - 10, x(i), height - 10);
    s += buf;
  }
  int y = top;
  for (const LadderEntry* e : order) {
    y += row_h;
    std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%d\" fill=\"#555\">%.3f</text>\n", y,
                  static_cast<double>(e->time.count()) / 1000.0);
    s += buf;
    if (e->packet) {
      const LadderPacket& p = l.packets[*e->packet];
      if (p.from >= 0 && p.to >= 0 && p.from != p.to) {
        const bool lost = p.fate != LadderPacket::Fate::kDelivered;
        const int x1 = x(p.from), x2f = x(p.to);
        const int x2 = lost ? (x1 + x2f) / 2 : x2f;
        std::snprintf(buf, sizeof buf,
                      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" %s/>\n", x1, y - 4, x2,
                      y - 4, lost ? "#c00" : "#036", lost ? "" : "marker-end=\"url(#arrow)\"");
        s += buf;
        if (lost) {
          std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" fill=\"#c00\">✗</text>\n", x2 - 4, y);
          s += buf;
        }
        std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" fill=\"%s\"%s>%s</text>\n",
                      std::min(x1, x2f) + 12, y - 7, lost ? "#c00" : "#036",
                      " font-size=\"11\"", xml_escape(p.label()).c_str());
        s += buf;
        continue;
      }
    }
    const int tx = e->lane < 0 ? left - 10 : x(e->lane) + 8;
    std::string text = e->text;
    if (e->packet) text = l.packets[*e->packet].label();
    std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\">%s</text>\n", tx, y - 4,
                  xml_escape(text).c_str());
    s += buf;
  }
  s += "</svg>\n";
  return s;
}

// ---- recording ------------------------------------------------------------

class LadderRecorder::Tap final : public emu::PacketTap {
 public:
  Tap(LadderRecorder& r, int lane, emu::PacketTap* fwd) : r_(r), lane_(lane), fwd_(fwd) {}
  void on_packet(emu::Direction dir, Nanos time, const emu::Datagram& d) override {
    r_.on_packet(lane_, dir, time, d);
    if (fwd_) fwd_->on_packet(dir, time, d);
  }
  void on_batch_end() override {
    if (fwd_) fwd_->on_batch_end();
  }

 private:
  LadderRecorder& r_;
  int lane_;
  emu::PacketTap* fwd_;
};

class LadderRecorder::Sink final : public emu::EventSink {
 public:
  Sink(LadderRecorder& r, int lane, emu::EventSink* fwd) : r_(r), lane_(lane), fwd_(fwd) {}
  void on_event(const emu::EngineEvent& e) override {
    r_.on_event(lane_, e);
    if (fwd_) fwd_->on_event(e);
  }
  void on_batch_end() override {
    if (fwd_) fwd_->on_batch_end();
  }

 private:
  LadderRecorder& r_;
  int lane_;
  emu::EventSink* fwd_;
};

LadderRecorder::LadderRecorder(Ladder& ladder) : l_(ladder) {}
LadderRecorder::~LadderRecorder() = default;

void LadderRecorder::add_lane(const std::string& label, const wire::IpAddr& addr) {
  l_.lanes.push_back(label);
  addrs_.push_back(addr);
}

void LadderRecorder::name_qp(int lane, uint32_t qpn, std::string name) {
  qp_names_[{lane, qpn}] = std::move(name);
}

std::string LadderRecorder::qp_name(int lane, uint32_t qpn) const {
  auto it = qp_names_.find({lane, qpn});
  if (it != qp_names_.end()) return it->second;
  char buf[32];
  std::snprintf(buf, sizeof buf, "qp 0x%06x", qpn);
  return buf;
}

emu::PacketTap* LadderRecorder::tap(int lane, emu::PacketTap* forward) {
  taps_.push_back(std::make_unique<Tap>(*this, lane, forward));
  return taps_.back().get();
}

emu::EventSink* LadderRecorder::sink(int lane, emu::EventSink* forward) {
  sinks_.push_back(std::make_unique<Sink>(*this, lane, forward));
  return sinks_.back().get();
}

int LadderRecorder::lane_of(const wire::IpAddr& a) const {
  for (size_t i = 0; i < addrs_.size(); ++i)
    if (addrs_[i] == a) return static_cast<int>(i);
  return -1;
}

void LadderRecorder::on_packet(int lane, emu::Direction dir, Nanos t, const emu::Datagram& d) {
  auto pkt = wire::parse_roce(d.payload);
  if (!pkt) {
    l_.note(t, lane, std::string(dir == emu::Direction::kTx ? "sent" : "received") +
                         " an undecodable datagram (" + std::to_string(d.payload.size()) + " bytes)");
    return;
  }
  const wire::RoceHeaders& h = pkt->hdr;
  const uint32_t len = static_cast<uint32_t>(pkt->payload.size());
  if (dir == emu::Direction::kTx) {
    const int to = lane_of(d.ip.dst);
    LadderPacket p;
    p.from = lane;
    p.to = to;
    p.sent = t;
    p.opcode = h.bth.opcode;
    p.psn = h.bth.psn.value();
    p.dest_qpn = h.bth.dest_qpn.value();
    p.payload_len = len;
    p.ack_req = h.bth.ack_req;
    p.headers = present::header_lines(*pkt);
    if (h.info().carries(wire::Hdr::kAeth)) {
      p.aeth_syndrome = h.aeth.syndrome;
      p.msn = h.aeth.msn;
    }
    if (h.info().is(wire::OpClass::kRequest)) {
      bool& seen = sent_requests_[{lane, p.dest_qpn, p.psn}];
      p.retransmission = seen;
      seen = true;
    }
    const size_t idx = l_.packets.size();
    l_.packets.push_back(p);
    l_.entries.push_back({t, l_.entries.size(), lane, idx, {}, std::nullopt});
    pending_[{lane, to, p.opcode, p.psn, p.dest_qpn, len}].push_back(idx);
    return;
  }
  const int from = lane_of(d.ip.src);
  const Key key{from, lane, h.bth.opcode, h.bth.psn.value(), h.bth.dest_qpn.value(), len};
  auto it = pending_.find(key);
  if (it != pending_.end() && !it->second.empty()) {
    const size_t idx = it->second.front();
    it->second.erase(it->second.begin());
    l_.packets[idx].fate = LadderPacket::Fate::kDelivered;
    l_.packets[idx].arrived = t;
    last_delivered_[key] = idx;
    return;
  }
  auto last = last_delivered_.find(key);
  if (last != last_delivered_.end()) {
    ++l_.packets[last->second].copies;  // a duplicate made on the way
    return;
  }
  const wire::OpInfo& info = h.info();
  l_.note(t, lane, "received " + std::string(info.valid ? info.name : "?") + " psn " +
                       std::to_string(h.bth.psn.value()) + " nobody here sent (altered on the way?)");
}

void LadderRecorder::on_event(int lane, const emu::EngineEvent& e) {
  using emu::EventKind;
  const std::string qp = qp_name(lane, e.qpn);
  auto view = qp_view_.find({lane, e.qpn});
  QpView* v = view == qp_view_.end() ? nullptr : &qps_[view->second];
  switch (e.kind) {
    case EventKind::kWrPosted:
    case EventKind::kRecvPosted:
      return;  // the runner notes verbs by name; packets come from the tap
    case EventKind::kPacketSent:
    case EventKind::kPacketReceived:
      // Packets are drawn from the tap; here only the PSNs of the page's QP view.
      if (v && wire::op_info(e.bth_opcode).is(wire::OpClass::kRequest)) {
        (e.kind == EventKind::kPacketSent ? v->sent_psn : v->rcvd_psn) = e.psn;
        snapshot(e.time);
      }
      return;
    case EventKind::kPacketDropped: {
      const wire::OpInfo& info = wire::op_info(e.bth_opcode);
      l_.note(e.time, lane, qp + ": ignored " + std::string(info.valid ? info.name : "packet") + " psn " +
                                std::to_string(e.psn) + ": " + std::string(e.reason), e.qpn);
      return;
    }
    case EventKind::kTimer:
      l_.note(e.time, lane, qp + ": " + std::string(e.reason) + " timer expired (oldest psn " +
                                std::to_string(e.psn) + ")", e.qpn);
      return;
    case EventKind::kCompletion: {
      std::string t = "wr " + std::to_string(e.wr_id) + " " + std::string(emu::to_string(e.wc_opcode)) + " " +
                      std::string(emu::to_string(e.status));
      if (e.status == emu::WcStatus::kSuccess) t += " " + std::to_string(e.length) + " B";
      l_.note(e.time, lane, qp + ": CQE " + t, e.qpn);
      if (v) {
        const bool recv = e.wc_opcode == emu::WcOpcode::kRecv || e.wc_opcode == emu::WcOpcode::kRecvRdmaWithImm;
        auto& q = recv ? v->rq : v->sq;
        for (auto it = q.begin(); it != q.end(); ++it) {
          if (*it == e.wr_id) {
            q.erase(it);
            break;
          }
        }
        const std::string& cq = recv ? v->recv_cq : v->send_cq;
        for (auto& [name, cqes] : cqs_)
          if (name == cq) cqes.push_back(v->name + ": " + t);
        snapshot(e.time);
      }
      return;
    }
    case EventKind::kQpStateChange:
      l_.note(e.time, lane, qp + ": " + std::string(emu::to_string(e.from)) + " → " + std::string(emu::to_string(e.to)),
              e.qpn);
      if (v) {
        v->state = std::string(emu::to_string(e.to));
        snapshot(e.time);
      }
      return;
    case EventKind::kAsyncEvent:
      l_.note(e.time, lane, qp + ": async event " + std::string(emu::to_string(e.async)), e.qpn);
      return;
    case EventKind::kRoleSteps:
      return;  // the role's path is for the event log; the ladder shows its packets
  }
}

void LadderRecorder::add_qp_view(int lane, uint32_t qpn, const std::string& name, const std::string& send_cq,
                                 const std::string& recv_cq) {
  name_qp(lane, qpn, name);
  QpView v;
  v.lane = lane;
  v.name = name;
  v.send_cq = send_cq;
  v.recv_cq = recv_cq;
  qp_view_[{lane, qpn}] = qps_.size();
  qps_.push_back(std::move(v));
  for (const std::string& cq : {send_cq, recv_cq}) {
    bool known = false;
    for (const auto& c : cqs_) known = known || c.first == cq;
    if (!known) cqs_.push_back({cq, {}});
  }
  snapshot(Nanos(0));
}

void LadderRecorder::posted(Nanos t, int lane, uint32_t qpn, bool send, uint64_t wr_id) {
  auto it = qp_view_.find({lane, qpn});
  if (it == qp_view_.end()) return;
  (send ? qps_[it->second].sq : qps_[it->second].rq).push_back(wr_id);
  snapshot(t);
}

void LadderRecorder::polled(Nanos t, const std::string& cq, size_t n) {
  if (n == 0) return;
  for (auto& [name, cqes] : cqs_)
    if (name == cq) cqes.erase(cqes.begin(), cqes.begin() + static_cast<std::ptrdiff_t>(std::min(n, cqes.size())));
  snapshot(t);
}

void LadderRecorder::set_counters(Nanos t, std::string text) {
  if (text == counters_) return;
  counters_ = std::move(text);
  snapshot(t);
}

void LadderRecorder::snapshot(Nanos t) {
  auto psn = [](const std::optional<uint32_t>& p) { return p ? present::Json(*p) : present::Json(nullptr); };
  present::Json qps = present::Json::array();
  for (const QpView& q : qps_) {
    qps.push_back({{"name", q.name},
                   {"node", l_.lanes[static_cast<size_t>(q.lane)]},
                   {"state", q.state},
                   {"sent_psn", psn(q.sent_psn)},
                   {"rcvd_psn", psn(q.rcvd_psn)},
                   {"sq", q.sq},
                   {"rq", q.rq}});
  }
  present::Json cqs = present::Json::array();
  for (const auto& [name, cqes] : cqs_) cqs.push_back({{"name", name}, {"cqes", cqes}});
  present::Json j = {{"qps", std::move(qps)}, {"cqs", std::move(cqs)}, {"counters", counters_}};
  if (!l_.state_at.empty() && l_.state_at.back() == l_.entries.size() && l_.state_time.back() == t) {
    l_.states.back() = std::move(j);  // nothing drawn since the last one: replace it
  } else {
    l_.states.push_back(std::move(j));
    l_.state_at.push_back(l_.entries.size());
    l_.state_time.push_back(t);
  }
}

std::optional<LadderRecorder::Key> LadderRecorder::key_of(int from, int to, const emu::Datagram& d) const {
  auto pkt = wire::parse_roce(d.payload);
  if (!pkt) return std::nullopt;
  return Key{from, to, pkt->hdr.bth.opcode, pkt->hdr.bth.psn.value(), pkt->hdr.bth.dest_qpn.value(),
             static_cast<uint32_t>(pkt->payload.size())};
}

void LadderRecorder::on_fault(int lane, const emu::FaultRecord& r) {
  const bool tx = r.dir == emu::FaultDir::kTx;
  const auto key = tx ? key_of(lane, lane_of(r.datagram->ip.dst), *r.datagram)
                      : key_of(lane_of(r.datagram->ip.src), lane, *r.datagram);
  if (!key) return;
  auto it = pending_.find(*key);
  if (it == pending_.end() || it->second.empty()) return;
  // On the way out it is the packet just sent; on the way in, the oldest one.
  auto at = tx ? it->second.end() - 1 : it->second.begin();
  LadderPacket& p = l_.packets[*at];
  p.corrupted = p.corrupted || r.corrupted;
  p.delayed = p.delayed || r.delayed || r.reordered;
  if (r.dropped) {
    p.fate = LadderPacket::Fate::kDropped;
    it->second.erase(at);
  }
}

void LadderRecorder::finish(bool fabric_idle) {
  for (auto& [key, v] : pending_) {
    for (size_t idx : v)
      l_.packets[idx].fate = fabric_idle ? LadderPacket::Fate::kDropped : LadderPacket::Fate::kInFlight;
  }
}

}  // namespace rocelab::sim

namespace rocelab::sim {

namespace {

// The page's script and style: plain DOM, no library, nothing fetched.
constexpr const char* kHtmlHead = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rocelab ladder</title>
<style>
body { font-family: sans-serif; margin: 1em; color: #222; }
h1 { font-size: 1.2em; margin: 0 0 .5em 0; }
h2 { font-size: 1em; margin: 1em 0 .3em 0; }
#controls { position: sticky; top: 0; background: #fff; padding: .4em 0; border-bottom: 1px solid #ccc; }
#slider { width: 40%; vertical-align: middle; }
#main { display: flex; gap: 1.5em; align-items: flex-start; }
#ladder { flex: 3; overflow-x: auto; font-size: 12px; line-height: 1.35; margin: 0; }
#ladder mark { background: #ffe58a; }
#side { flex: 2; min-width: 26em; font-size: 13px; }
#side pre { background: #f6f6f6; padding: .5em; white-space: pre-wrap; margin: 0; }
table { border-collapse: collapse; }
td, th { border: 1px solid #ccc; padding: 2px 6px; font-family: monospace; text-align: left; }
.ERR, .SQE { color: #b00; font-weight: bold; }
.RTS { color: #060; font-weight: bold; }
#extras figure { margin: .5em 0; }
#extras svg { width: 100%; height: auto; }
#extras pre { white-space: pre; overflow-x: auto; font-size: 11px; }
</style></head>
<body>
<h1 id="title"></h1>
<div id="controls">
  <button id="first" title="first step (Home)">|◀</button>
  <button id="prev" title="previous step (←)">◀ previous</button>
  <input type="range" id="slider" min="1" value="1">
  <button id="next" title="next step (→)">next ▶</button>
  <button id="last" title="last step (End)">▶|</button>
  <span>step <b id="step">1</b> of <span id="total"></span> · <span id="time"></span> µs</span>
</div>
<div id="main">
<pre id="ladder"></pre>
<div id="side">
  <h2>This step</h2><pre id="now"></pre>
  <h2>Packet headers</h2><pre id="headers">(not a packet)</pre>
  <h2>Queue pairs</h2>
  <table><thead><tr><th>QP</th><th>node</th><th>state</th><th>last PSN sent</th><th>last PSN received</th>
  <th>send queue (wr_id)</th><th>receive queue (wr_id)</th></tr></thead><tbody id="qps"></tbody></table>
  <h2>Completion queues</h2><div id="cqs"></div>
  <h2>Counters (after the script step)</h2><pre id="counters"></pre>
</div></div>
<script>const DATA = )HTML";

constexpr const char* kHtmlTail = R"HTML(;</script>
<script>
(function () {
  const $ = (id) => document.getElementById(id);
  const n = DATA.steps.length;
  let cur = 1;
  $("title").textContent = DATA.title;
  $("total").textContent = n;
  $("slider").max = Math.max(n, 1);
  function text(el, t) { el.textContent = t; }
  function show(k) {
    if (n === 0) { text($("now"), "(nothing happened)"); return; }
    cur = Math.min(Math.max(k, 1), n);
    const st = DATA.steps[cur - 1];
    $("slider").value = cur;
    text($("step"), cur);
    text($("time"), st.time);
    // The ladder so far, the current row marked.
    const lad = $("ladder");
    lad.textContent = DATA.header + "\n" + DATA.rows.slice(0, cur - 1).join("\n") + (cur > 1 ? "\n" : "");
    const m = document.createElement("mark");
    m.id = "current";
    m.textContent = DATA.rows[cur - 1];
    lad.appendChild(m);
    text($("now"), st.text);
    text($("headers"), st.headers || "(not a packet)");
    const s = st.state >= 0 ? DATA.states[st.state] : null;
    const tb = $("qps");
    tb.textContent = "";
    const cqs = $("cqs");
    cqs.textContent = "";
    if (s) {
      for (const q of s.qps) {
        const tr = document.createElement("tr");
        const cells = [q.name, q.node, q.state, q.sent_psn === null ? "–" : q.sent_psn,
                       q.rcvd_psn === null ? "–" : q.rcvd_psn, q.sq.join(" "), q.rq.join(" ")];
        const keys = ["name", "node", "state", "sent", "rcvd", "sq", "rq"];
        cells.forEach((c, i) => {
          const td = document.createElement("td");
          td.textContent = c;
          td.id = "qp-" + q.name + "-" + keys[i];
          if (keys[i] === "state") td.className = q.state;
          tr.appendChild(td);
        });
        tb.appendChild(tr);
      }
      for (const c of s.cqs) {
        const p = document.createElement("pre");
        p.id = "cq-" + c.name;
        p.textContent = c.name + ": " + (c.cqes.length ? "\n  " + c.cqes.join("\n  ") : "(empty)");
        cqs.appendChild(p);
      }
      text($("counters"), s.counters || "(none yet)");
    } else {
      text($("counters"), "(a capture: the nodes' state is not known)");
    }
    // The plots' cursors at this step's time.
    for (const svg of document.querySelectorAll("svg.plot")) {
      const c = svg.querySelector("line.cursor");
      if (!c) continue;
      const g = (k) => parseFloat(svg.getAttribute("data-" + k));
      const f = Math.min(Math.max((parseFloat(st.time) - g("t0")) / (g("t1") - g("t0")), 0), 1);
      const x = (g("x0") + (g("x1") - g("x0")) * f).toFixed(1);
      c.setAttribute("x1", x);
      c.setAttribute("x2", x);
      c.setAttribute("visibility", "visible");
    }
    history.replaceState(null, "", "#step=" + cur);
  }
  function fromHash() {
    const m = /step=(\d+)/.exec(location.hash);
    return m ? parseInt(m[1], 10) : 1;
  }
  $("prev").onclick = () => show(cur - 1);
  $("next").onclick = () => show(cur + 1);
  $("first").onclick = () => show(1);
  $("last").onclick = () => show(n);
  $("slider").oninput = (e) => show(parseInt(e.target.value, 10));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowRight") show(cur + 1);
    else if (e.key === "ArrowLeft") show(cur - 1);
    else if (e.key === "Home") show(1);
    else if (e.key === "End") show(n);
  });
  window.addEventListener("hashchange", () => show(fromHash()));
  show(fromHash());
})();
</script>
</body></html>
)HTML";

}  // namespace

std::string render_html(const Ladder& l, const std::string& title, const HtmlExtras* extras) {
  // The rows of the terminal drawing, the same characters: line 0 is the header.
  const std::string text = render_text(l);
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    lines.push_back(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  const auto order = l.ordered();
  present::Json rows = present::Json::array(), steps = present::Json::array();
  for (size_t i = 1; i < lines.size(); ++i) rows.push_back(lines[i]);
  // An entry shows the latest state taken before the next entry was drawn, and
  // not later than its own time (packets arrive between entries: a state taken
  // at their arrival belongs to the entries at that time).
  size_t s = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const LadderEntry& e = *order[i];
    while (s < l.state_at.size() && l.state_at[s] <= e.seq + 1 && l.state_time[s] <= e.time) ++s;
    const long state = s == 0 ? -1 : static_cast<long>(s - 1);
    std::string what = e.text, headers;
    if (e.packet) {
      const LadderPacket& p = l.packets[*e.packet];
      what = p.label();
      if (p.from >= 0 && p.to >= 0)
        what = l.lanes[static_cast<size_t>(p.from)] + " → " + l.lanes[static_cast<size_t>(p.to)] + ": " + what;
      if (p.fate == LadderPacket::Fate::kDropped) what += "\n(lost: it never arrived)";
      headers = p.headers;
    } else if (e.lane >= 0) {
      what = l.lanes[static_cast<size_t>(e.lane)] + ": " + what;
    }
    char t[32];
    std::snprintf(t, sizeof t, "%.3f", static_cast<double>(e.time.count()) / 1000.0);
    steps.push_back({{"time", t}, {"text", what}, {"headers", headers}, {"state", state}});
  }
  const present::Json j = {{"title", title},
                           {"header", lines.empty() ? "" : lines[0]},
                           {"rows", std::move(rows)},
                           {"steps", std::move(steps)},
                           {"states", l.states}};
  std::string page = kHtmlHead;
  const std::string t = xml_escape(title.empty() ? "rocelab ladder" : title);
  page.replace(page.find("<title>rocelab ladder</title>"), 29, "<title>" + t + "</title>");
  if (extras) {
    std::string x = "<div id=\"extras\">\n<h2>" + xml_escape(extras->heading) + "</h2>\n";
    if (!extras->text.empty()) x += "<pre id=\"extras-text\">" + xml_escape(extras->text) + "</pre>\n";
    for (const auto& [id, svg] : extras->figures)
      x += "<figure id=\"" + xml_escape(id) + "\">\n" + svg + "</figure>\n";
    x += "</div>\n";
    // In the side column, under the nodes' state: beside the ladder while it is stepped through.
    page.insert(page.rfind("</div></div>\n<script>const DATA = "), x);
  }
  return page + present::json_for_script(j) + kHtmlTail;
}

}  // namespace rocelab::sim
