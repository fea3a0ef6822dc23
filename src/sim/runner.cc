#include "sim/runner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <memory>

#include "capture/pcap_writer.h"
#include "cc/rate_control.h"
#include "emu/connect.h"
#include "emu/records/event_log.h"
#include "emu/records/pcap_tap.h"
#include "sim/fsm.h"
#include "sim/names.h"
#include "sim/topology.h"
#include "testbed/testbed.h"

namespace rocelab::sim {

namespace {

using namespace emu;
using testbed::Net;
using testbed::NodeFaults;
using testbed::Testbed;

constexpr Nanos kDefaultWait = std::chrono::seconds(10);

std::string hex(const std::byte* p, size_t n) {
  std::string s;
  char b[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned>(p[i]));
    if (i) s += ' ';
    s += b;
  }
  return s;
}

std::string errno_text(int e) {
  const char* n = strerrorname_np(e);
  return std::string(n ? n : "errno " + std::to_string(e)) + " (" + std::strerror(e) + ")";
}

// The switched network between the fabric's ports, and the last time it
// had anything to do: where its time series end.
class WatchedNetwork final : public SimNetwork {
 public:
  explicit WatchedNetwork(std::shared_ptr<fabric::SwitchedNetwork> net) : net_(std::move(net)) {}
  void bind(SimNetworkSink* sink) override { net_->bind(sink); }
  bool has_host(const wire::IpAddr& addr) const override { return net_->has_host(addr); }
  bool send(Nanos now, const wire::IpAddr& from, const SimPacket& p) override {
    last_ = std::max(last_, now);
    return net_->send(now, from, p);
  }
  Nanos next_event() const override { return net_->next_event(); }
  void run(Nanos now) override {
    if (net_->next_event() <= now) last_ = std::max(last_, now);
    net_->run(now);
  }
  size_t in_flight() const override { return net_->in_flight(); }
  void reset(Nanos start) override {
    last_ = start;
    net_->reset(start);
  }
  Nanos last() const { return last_; }

 private:
  std::shared_ptr<fabric::SwitchedNetwork> net_;
  Nanos last_{0};
};

class Run {
 public:
  Run(const LoadedScenario& sc, SimResult& out) : sc_(sc), out_(out), rec_(out.ladder) {}
  bool setup(const SimOptions& opt, std::string* error);
  bool steps(std::string* error);
  void finish();
  ~Run() {
    bed_.reset();  // the devices first: they report to the taps and sinks below
    if (pcap_) (void)pcap_->close();
    if (log_) (void)log_->flush();
  }

 private:
  struct MrObj {
    Mr* mr = nullptr;
    std::vector<std::byte> mem;
    int node = 0;
  };
  struct QpObj {
    Qp* qp = nullptr;
    int node = 0;
  };

  Nanos now() const { return bed_->now(); }
  void note(int lane, std::string text, std::optional<uint32_t> qpn = std::nullopt) {
    if (replace_) {  // a verb's note, now its refusal: same place in the ladder
      out_.ladder.entries[*replace_].text = std::move(text);
      replace_.reset();
      return;
    }
    out_.ladder.note(now(), lane, std::move(text), qpn);
  }
  // The counters of every node (those not zero), for the step-through page.
  std::string counters_text() const {
    std::string t;
    for (const auto& n : bed_->nodes()) {
      std::string line;
      n.dev->counters().for_each([&](std::string_view name, uint64_t v) {
        if (v) line += " " + std::string(name) + " " + std::to_string(v);
      });
      t += n.name + ":" + (line.empty() ? " (all zero)" : line) + "\n";
    }
    return t;
  }
  // An expectation: noted on the ladder, and a failure when it does not hold.
  void expect(size_t step, int lane, bool ok, const std::string& what, const std::string& got,
              std::optional<uint32_t> qpn = std::nullopt) {
    ++out_.expectations;
    if (ok) {
      note(lane, "✓ " + what, qpn);
      return;
    }
    note(lane, "✗ expected " + what + ", got " + got, qpn);
    out_.failures.push_back(sc_.where(step) + ": expected " + what + ", got " + got);
  }
  // A verb's result against the step's expect_error.
  void verb_result(size_t step, int lane, const std::string& verb, std::error_code ec,
                   const std::string& expect_error, const std::string& reason = {},
                   std::optional<uint32_t> qpn = std::nullopt);

  bool connect(size_t i, const scenario::Connect& c);
  void modify(size_t i, const scenario::ModifyQp& m);
  void post_send(size_t i, const scenario::PostSend& p);
  void post_recv(size_t i, const scenario::PostRecv& p);
  void poll_cq(size_t i, const scenario::PollCq& p);
  bool run_idle(size_t i, const scenario::Run& r, std::string* error);
  void advance(Nanos d);
  void expect_mem(size_t i, const scenario::ExpectMem& m);
  void expect_counter(size_t i, const scenario::ExpectCounter& c);
  void expect_port(size_t i, const scenario::ExpectPort& p);
  void fabric_report();
  void filter_ladder();
  std::vector<Sge> sges(const google::protobuf::RepeatedPtrField<scenario::Sge>& in, uint32_t* total);
  // Whether the scenario's ladder draws QP qp of node `node` (scenario.proto, Ladder).
  bool drawn(int node, const std::string& qp) const {
    const auto& l = sc_.s.ladder();
    auto has = [](const auto& list, const std::string& x) { return std::find(list.begin(), list.end(), x) != list.end(); };
    return (l.node_size() == 0 || has(l.node(), sc_.s.node(node).name())) && (l.qp_size() == 0 || has(l.qp(), qp));
  }
  int node_index(const std::string& name) const {
    for (size_t k = 0; k < bed_->nodes().size(); ++k)
      if (bed_->nodes()[k].name == name) return static_cast<int>(k);
    return -1;
  }
  Gid gid_of(int node) const {
    Gid g{};
    (void)bed_->nodes()[static_cast<size_t>(node)].dev->query_gid(kPortNum, 0, &g);
    return g;
  }

  const LoadedScenario& sc_;
  SimResult& out_;
  LadderRecorder rec_;
  std::unique_ptr<capture::PcapWriter> pcap_;
  std::vector<std::unique_ptr<PcapTap>> pcap_taps_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<Testbed> bed_;  // after what its devices report to
  std::vector<Pd*> pds_;
  std::vector<Mtu> mtus_;
  std::map<std::string, Cq*> cqs_;
  std::map<std::string, Srq*> srqs_;
  std::map<std::string, std::unique_ptr<MrObj>> mrs_;
  std::map<std::string, QpObj> qps_;
  std::map<std::string, int> cq_node_, srq_node_;
  std::map<std::string, std::string> peer_;  // QP name -> the QP it was connected to
  std::optional<size_t> replace_;  // note() rewrites this entry instead of adding one
  // With a topology: the network, and what the flows carried.
  std::optional<ScenarioTopology> topo_;
  std::shared_ptr<fabric::SwitchedNetwork> net_;
  std::shared_ptr<WatchedNetwork> watch_;
  std::unique_ptr<FlowMeter> meter_;
};

bool Run::setup(const SimOptions& opt, std::string* error) {
  const auto& s = sc_.s;
  SimFabricConfig fc;
  fc.latency = Nanos(s.fabric().latency_ns() ? s.fabric().latency_ns() : 1000);
  fc.link_bits_per_sec = s.fabric().link_bits_per_sec();
  TopologyError terr;
  topo_ = scenario_topology(s, &terr);
  if (!terr.message.empty()) {  // not reached: the checker built it first
    *error = sc_.path + ": " + terr.message;
    return false;
  }
  if (topo_) {
    std::string why;
    net_ = std::make_shared<fabric::SwitchedNetwork>(topo_->topo, topo_->sample_interval, &why);
    if (!why.empty()) {
      *error = sc_.path + ": " + why;
      return false;
    }
    watch_ = std::make_shared<WatchedNetwork>(net_);
    fc.network = watch_;
    meter_ = std::make_unique<FlowMeter>(topo_->sample_interval);
  }
  bed_ = std::make_unique<Testbed>(Net::kSim, fc);
  if (!opt.pcap_path.empty()) {
    auto w = capture::PcapWriter::open(opt.pcap_path);
    if (!w) {
      *error = opt.pcap_path + ": " + w.error().message();
      return false;
    }
    pcap_ = std::make_unique<capture::PcapWriter>(std::move(*w));
  }
  if (!opt.events_path.empty()) {
    auto l = EventLog::open(opt.events_path);
    if (!l) {
      *error = opt.events_path + ": " + l.error().message();
      return false;
    }
    log_ = std::move(*l);
  }
  for (int i = 0; i < s.node_size(); ++i) {
    const auto& n = s.node(i);
    wire::IpAddr addr = default_node_address(i);
    if (!n.address().empty()) addr = *wire::IpAddr::parse(n.address());
    if (topo_) addr = topo_->node_addr[static_cast<size_t>(i)];
    DeviceConfig cfg;
    cfg.name = n.name();
    if (!n.cc().empty()) cfg.cc = *cc::parse_algorithm(n.cc(), nullptr);
    if (n.dcqcn_params() == "paper") {
      cfg.dcqcn = cc::kDcqcnPaperDefaults;
      cfg.min_time_between_cnps = cc::kMinTimeBetweenCnpsPaper;
    }
    // DCQCN starts at, and never exceeds, the rate of the node's own link.
    if (topo_)
      cfg.line_rate_bps = topo_->node_line_rate[static_cast<size_t>(i)];
    else if (s.fabric().link_bits_per_sec())
      cfg.line_rate_bps = s.fabric().link_bits_per_sec();
    Mtu mtu = Mtu::k1024;
    if (n.mtu()) mtu_from_bytes(n.mtu(), &mtu);
    cfg.active_mtu = mtu;
    cfg.retry_forever = n.retry_forever();
    FaultRules rules = parse_fault_schedule(n.faults());
    if (!rules.ok()) {
      *error = sc_.path + ": node " + n.name() + ": faults: " + rules.error;
      return false;
    }
    // Every node has an injector (a `fault` step may add rules to it later).
    const NodeFaults faults{n.fault_seed() ? n.fault_seed() : static_cast<uint64_t>(i + 1), rules.rules};
    const int idx = bed_->add_node(n.name(), addr, cfg, &faults, error);
    if (idx < 0) return false;
    mtus_.push_back(mtu);
    rec_.add_lane(n.name() + " " + addr.to_string(), addr);
    Device& dev = *bed_->nodes()[static_cast<size_t>(idx)].dev;
    bed_->nodes()[static_cast<size_t>(idx)].faults->set_observer(
        [this, idx](const FaultRecord& r) { rec_.on_fault(idx, r); });
    PacketTap* fwd = nullptr;
    if (pcap_) {
      pcap_taps_.push_back(std::make_unique<PcapTap>(*pcap_, PcapTap::Dirs::kTx));
      fwd = pcap_taps_.back().get();
    }
    if (meter_) fwd = meter_->tap(idx, addr, fwd);
    dev.set_tap(rec_.tap(idx, fwd));
    dev.set_event_sink(rec_.sink(idx, log_ ? log_->sink_for(n.name()) : nullptr));
    Pd* pd = *dev.alloc_pd();
    pds_.push_back(pd);
    for (const auto& c : n.cq()) {
      auto cq = dev.create_cq(c.cqe() ? static_cast<int>(c.cqe()) : 64, nullptr, 0);
      if (!cq) {
        *error = sc_.path + ": cq " + c.name() + ": " + cq.error().message();
        return false;
      }
      cqs_[c.name()] = *cq;
      cq_node_[c.name()] = idx;
    }
    for (const auto& q : n.srq()) {
      SrqAttr a;
      a.max_wr = q.max_wr() ? q.max_wr() : 16;
      a.max_sge = q.max_sge() ? q.max_sge() : 1;
      a.srq_limit = q.limit();
      auto srq = dev.create_srq(pd, a);
      if (!srq) {
        *error = sc_.path + ": srq " + q.name() + ": " + srq.error().message();
        return false;
      }
      srqs_[q.name()] = *srq;
      srq_node_[q.name()] = idx;
    }
    for (const auto& m : n.mr()) {
      auto o = std::make_unique<MrObj>();
      o->node = idx;
      o->mem.assign(m.length(), std::byte(m.fill()));
      if (!m.init().empty()) std::memcpy(o->mem.data(), m.init().data(), m.init().size());
      unsigned access = 0;
      for (const auto& a : m.access()) access |= *parse_access(a);
      // A fixed virtual address per MR: the ladder and the goldens never
      // depend on where the heap put the buffer.
      const uint64_t iova = 0x10000000ull * (mrs_.size() + 1);
      auto mr = dev.reg_mr(pd, o->mem.data(), o->mem.size(), iova, access);
      if (!mr) {
        *error = sc_.path + ": mr " + m.name() + ": " + mr.error().message();
        return false;
      }
      o->mr = *mr;
      mrs_[m.name()] = std::move(o);
    }
    for (const auto& q : n.qp()) {
      QpInitAttr ia;
      ia.qp_type = *parse_qp_type(q.type());
      ia.send_cq = cqs_[q.send_cq()];
      ia.recv_cq = q.recv_cq().empty() ? ia.send_cq : cqs_[q.recv_cq()];
      if (!q.srq().empty()) ia.srq = srqs_[q.srq()];
      ia.cap.max_send_wr = q.max_send_wr() ? q.max_send_wr() : 16;
      ia.cap.max_recv_wr = q.max_recv_wr() ? q.max_recv_wr() : 16;
      ia.cap.max_send_sge = q.max_send_sge() ? q.max_send_sge() : 1;
      ia.cap.max_recv_sge = q.max_recv_sge() ? q.max_recv_sge() : 1;
      ia.cap.max_inline_data = q.max_inline_data();
      ia.sq_sig_all = q.sq_sig_all();
      auto qp = dev.create_qp(pd, ia);
      if (!qp) {
        *error = sc_.path + ": qp " + q.name() + ": " + qp.error().message();
        return false;
      }
      qps_[q.name()] = {*qp, idx};
      // The page follows only the QPs the ladder draws (a snapshot holds
      // every followed QP, and one is taken per packet of each).
      if (drawn(i, q.name()))
        rec_.add_qp_view(idx, (*qp)->qp_num(), q.name(), q.send_cq(), q.recv_cq().empty() ? q.send_cq() : q.recv_cq());
      else
        rec_.name_qp(idx, (*qp)->qp_num(), q.name());
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s: %s QP, qpn 0x%06x", q.name().c_str(),
                    std::string(to_string(ia.qp_type)).c_str(), (*qp)->qp_num());
      note(idx, buf, (*qp)->qp_num());
    }
  }
  return true;
}

void Run::verb_result(size_t step, int lane, const std::string& verb, std::error_code ec,
                      const std::string& expect_error, const std::string& reason, std::optional<uint32_t> qpn) {
  if (!ec) {
    if (!expect_error.empty()) {
      ++out_.expectations;
      note(lane, "✗ " + verb + " succeeded; expected " + expect_error, qpn);
      out_.failures.push_back(sc_.where(step) + ": expected " + verb + " to fail with " + expect_error +
                              ", got success");
    }
    return;
  }
  const char* name = strerrorname_np(ec.value());
  std::string text = "✋ " + verb + " refused: " + (name ? name : errno_text(ec.value()));
  if (!reason.empty()) text += "; " + reason;
  if (expect_error.empty()) {
    note(lane, text, qpn);
    out_.failures.push_back(sc_.where(step) + ": " + verb + " failed: " + errno_text(ec.value()) +
                            (reason.empty() ? "" : "; " + reason));
    return;
  }
  ++out_.expectations;
  const int want = *parse_errno(expect_error);
  if (want == ec.value()) {
    note(lane, text + " ✓", qpn);
    return;
  }
  note(lane, text + " ✗ expected " + expect_error, qpn);
  out_.failures.push_back(sc_.where(step) + ": expected " + verb + " to fail with " + expect_error + ", got " +
                          errno_text(ec.value()));
}

bool Run::connect(size_t i, const scenario::Connect& c) {
  const QpObj& a = qps_[c.qp()];
  ConnectOptions o;
  o.timeout = static_cast<uint8_t>(c.has_timeout() ? c.timeout() : 14);
  o.retry_cnt = static_cast<uint8_t>(c.has_retry_cnt() ? c.retry_cnt() : 7);
  o.rnr_retry = static_cast<uint8_t>(c.has_rnr_retry() ? c.rnr_retry() : 7);
  o.min_rnr_timer = static_cast<uint8_t>(c.has_min_rnr_timer() ? c.min_rnr_timer() : 12);
  o.psn_a = c.sq_psn();
  o.psn_b = c.peer_sq_psn();
  o.traffic_class = static_cast<uint8_t>(c.traffic_class());
  Device& da = *bed_->nodes()[static_cast<size_t>(a.node)].dev;
  std::error_code ec;
  if (c.peer().empty()) {
    if (!(ec = qp_to_init(*a.qp, o)) && !(ec = qp_to_rtr(*a.qp, {}, 0, 0, o))) ec = qp_to_rts(*a.qp, o.psn_a, o);
    verb_result(i, a.node, "connect " + c.qp(), ec, {}, ec ? a.qp->last_refusal() : "", a.qp->qp_num());
    return !ec;
  }
  const QpObj& b = qps_[c.peer()];
  Mtu mtu = std::min(mtus_[static_cast<size_t>(a.node)], mtus_[static_cast<size_t>(b.node)]);
  if (c.path_mtu()) mtu_from_bytes(c.path_mtu(), &mtu);
  o.path_mtu = mtu;
  Device& db = *bed_->nodes()[static_cast<size_t>(b.node)].dev;
  ec = connect_pair(da, *a.qp, db, *b.qp, o);
  verb_result(i, a.node, "connect " + c.qp() + " with " + c.peer(), ec, {},
              ec ? a.qp->last_refusal() + " " + b.qp->last_refusal() : "", a.qp->qp_num());
  if (!ec) {
    peer_[c.qp()] = c.peer();
    peer_[c.peer()] = c.qp();
  }
  return !ec;
}

void Run::modify(size_t i, const scenario::ModifyQp& m) {
  const QpObj& q = qps_[m.qp()];
  QpAttr a;
  uint32_t mask = 0;
  for (const auto& name : m.mask()) mask |= *parse_attr_mask(name, nullptr);
  if (!m.state().empty()) a.qp_state = *parse_qp_state(m.state());
  for (const auto& acc : m.access()) a.qp_access_flags |= *parse_access(acc);
  if (m.path_mtu()) mtu_from_bytes(m.path_mtu(), &a.path_mtu);
  a.dest_qp_num = m.dest_qp().empty() ? m.dest_qp_num() : qps_[m.dest_qp()].qp->qp_num();
  if (!m.av_node().empty()) {
    a.ah_attr.dgid = gid_of(node_index(m.av_node()));
    a.ah_attr.is_global = true;
    a.ah_attr.hop_limit = 64;
    a.ah_attr.port_num = kPortNum;
    a.ah_attr.traffic_class = static_cast<uint8_t>(m.traffic_class());
  }
  a.rq_psn = m.rq_psn();
  a.sq_psn = m.sq_psn();
  a.qkey = m.qkey();
  a.timeout = static_cast<uint8_t>(m.timeout());
  a.retry_cnt = static_cast<uint8_t>(m.retry_cnt());
  a.rnr_retry = static_cast<uint8_t>(m.rnr_retry());
  a.min_rnr_timer = static_cast<uint8_t>(m.min_rnr_timer());
  a.max_rd_atomic = static_cast<uint8_t>(m.max_rd_atomic());
  a.max_dest_rd_atomic = static_cast<uint8_t>(m.max_dest_rd_atomic());
  a.pkey_index = static_cast<uint16_t>(m.pkey_index());
  a.port_num = static_cast<uint8_t>(m.port() ? m.port() : kPortNum);
  std::string masks;
  for (const auto& name : m.mask()) masks += (masks.empty() ? "" : ",") + name;
  const std::string verb = "modify_qp " + m.qp() + " to " + (m.state().empty() ? "?" : m.state()) + " [" + masks + "]";
  const std::error_code ec = q.qp->modify(a, mask);
  verb_result(i, q.node, verb, ec, m.expect_error(), ec ? q.qp->last_refusal() : "", q.qp->qp_num());
}

std::vector<Sge> Run::sges(const google::protobuf::RepeatedPtrField<scenario::Sge>& in, uint32_t* total) {
  std::vector<Sge> v;
  *total = 0;
  for (const auto& s : in) {
    const MrObj& m = *mrs_[s.mr()];
    const uint32_t len = s.length() ? s.length() : static_cast<uint32_t>(m.mem.size() - std::min<uint64_t>(s.offset(), m.mem.size()));
    v.push_back({m.mr->iova() + s.offset(), len, m.mr->lkey()});
    *total += len;
  }
  return v;
}

void Run::post_send(size_t i, const scenario::PostSend& p) {
  const QpObj& q = qps_[p.qp()];
  uint32_t total = 0;
  const std::vector<Sge> sg = sges(p.sge(), &total);
  SendWr wr;
  wr.wr_id = p.wr_id();
  wr.opcode = *parse_wr_opcode(p.opcode());
  wr.sg_list = sg;
  wr.send_flags = (p.unsignaled() ? 0 : send_flags::kSignaled) | (p.solicited() ? send_flags::kSolicited : 0) |
                  (p.fence() ? send_flags::kFence : 0) | (p.inline_() ? send_flags::kInline : 0);
  const uint32_t imm_be = __builtin_bswap32(p.imm());
  wr.imm_data = imm_be;
  wr.invalidate_rkey = p.invalidate_rkey();
  uint64_t raddr = 0;
  uint32_t rkey = p.rkey();
  if (!p.remote_mr().empty()) {
    const MrObj& r = *mrs_[p.remote_mr()];
    raddr = r.mr->iova() + p.remote_offset();
    if (!rkey) rkey = r.mr->rkey();
  }
  wr.rdma.remote_addr = raddr;
  wr.rdma.rkey = rkey;
  wr.atomic.remote_addr = raddr;
  wr.atomic.rkey = rkey;
  wr.atomic.compare_add = p.compare_add();
  wr.atomic.swap = p.swap();
  Ah* ah = nullptr;
  if (!p.dest_qp().empty()) {
    const QpObj& d = qps_[p.dest_qp()];
    AhAttr aa;
    aa.dgid = gid_of(d.node);
    aa.is_global = true;
    aa.port_num = kPortNum;
    auto made = bed_->nodes()[static_cast<size_t>(q.node)].dev->create_ah(pds_[static_cast<size_t>(q.node)], aa);
    if (made) ah = *made;
    wr.ud.ah = ah;
    wr.ud.remote_qpn = d.qp->qp_num();
    wr.ud.remote_qkey = p.qkey() ? p.qkey() : 0x11111111;
  }
  std::string verb = "post_send wr " + std::to_string(p.wr_id()) + " " + std::string(to_string(wr.opcode)) + " " +
                     std::to_string(total) + " B";
  if (!p.remote_mr().empty()) verb += " to " + p.remote_mr() + "+" + std::to_string(p.remote_offset());
  if (!p.dest_qp().empty()) verb += " to " + p.dest_qp();
  // Noted before posting (the packets it sends follow it); a refusal replaces the note.
  const size_t at = out_.ladder.entries.size();
  note(q.node, p.qp() + ": " + verb, q.qp->qp_num());
  size_t n = 0;
  const std::error_code ec = q.qp->post_send(std::span<const SendWr>(&wr, 1), &n);
  if (ec) replace_ = at;
  if (!ec) rec_.posted(now(), q.node, q.qp->qp_num(), true, p.wr_id());
  verb_result(i, q.node, p.qp() + ": " + verb, ec, p.expect_error(), ec ? q.qp->last_refusal() : "",
              q.qp->qp_num());
  // The AH lives as long as the run: a UD send may still be queued.
}

void Run::post_recv(size_t i, const scenario::PostRecv& p) {
  uint32_t total = 0;
  const std::vector<Sge> sg = sges(p.sge(), &total);
  RecvWr wr;
  wr.wr_id = p.wr_id();
  wr.sg_list = sg;
  size_t n = 0;
  const std::string who = p.qp().empty() ? p.srq() : p.qp();
  const int lane = p.qp().empty() ? srq_node_[p.srq()] : qps_[p.qp()].node;
  const std::string verb = who + ": post_recv wr " + std::to_string(p.wr_id()) + " " + std::to_string(total) + " B";
  const size_t at = out_.ladder.entries.size();
  const std::optional<uint32_t> qpn =
      p.qp().empty() ? std::nullopt : std::optional<uint32_t>(qps_[p.qp()].qp->qp_num());
  note(lane, verb, qpn);
  const std::error_code ec = p.qp().empty() ? srqs_[p.srq()]->post_recv(std::span<const RecvWr>(&wr, 1), &n)
                                            : qps_[p.qp()].qp->post_recv(std::span<const RecvWr>(&wr, 1), &n);
  if (ec) replace_ = at;
  if (!ec && !p.qp().empty()) rec_.posted(now(), lane, qps_[p.qp()].qp->qp_num(), false, p.wr_id());
  verb_result(i, lane, verb, ec, p.expect_error(), ec && !p.qp().empty() ? qps_[p.qp()].qp->last_refusal() : "",
              qpn);
}

void Run::poll_cq(size_t i, const scenario::PollCq& p) {
  Cq* cq = cqs_[p.cq()];
  const int lane = cq_node_[p.cq()];
  const size_t want = p.expect_size() ? static_cast<size_t>(p.expect_size()) : p.count();
  std::vector<Wc> got;
  auto take = [&] {
    Wc wc[16];
    const size_t room = want ? want - got.size() : 16;
    const int n = cq->poll(std::span<Wc>(wc, std::min<size_t>(16, room)));
    for (int k = 0; k < n; ++k) got.push_back(wc[k]);
    return n;
  };
  if (want == 0) {
    while (take() > 0) {}
  } else {
    const Nanos deadline = now() + (p.wait_us() ? Nanos(p.wait_us() * 1000) : kDefaultWait);
    bed_->run_until([&] { take(); return got.size() >= want; }, deadline);
  }
  rec_.polled(now(), p.cq(), got.size());
  if (want && got.size() < want) {
    expect(i, lane, false, std::to_string(want) + " completions on " + p.cq(), std::to_string(got.size()));
  }
  for (size_t k = 0; k < got.size() && k < static_cast<size_t>(p.expect_size()); ++k) {
    const auto& e = p.expect(static_cast<int>(k));
    const Wc& w = got[k];
    std::string what = p.cq() + " CQE wr " + std::to_string(e.wr_id());
    std::string gots = "wr " + std::to_string(w.wr_id);
    bool ok = w.wr_id == e.wr_id();
    if (!e.status().empty()) {
      what += " " + e.status();
      ok = ok && w.status == *parse_wc_status(e.status());
    }
    gots += " " + std::string(to_string(w.status));
    if (!e.opcode().empty()) {
      what += " " + e.opcode();
      ok = ok && w.opcode == *parse_wc_opcode(e.opcode());
    }
    gots += " " + std::string(to_string(w.opcode));
    if (e.has_byte_len()) {
      what += " " + std::to_string(e.byte_len()) + " B";
      ok = ok && w.byte_len == e.byte_len();
    }
    gots += " " + std::to_string(w.byte_len) + " B";
    if (!e.qp().empty()) {
      what += " on " + e.qp();
      ok = ok && w.qp_num == qps_[e.qp()].qp->qp_num();
      gots += " on " + rec_.qp_name(lane, w.qp_num);
    }
    expect(i, lane, ok, what, gots);
  }
}

bool Run::run_idle(size_t i, const scenario::Run& r, std::string*) {
  const uint64_t limit_us = r.limit_us() ? r.limit_us() : (sc_.s.run_limit_us() ? sc_.s.run_limit_us() : 10'000'000);
  const Nanos deadline = now() + Nanos(limit_us * 1000);
  const bool idle = bed_->run_until([&] { return bed_->idle(); }, deadline);
  if (!idle) {
    ++out_.expectations;
    note(-1, "✗ still busy after " + std::to_string(limit_us) + " us");
    out_.failures.push_back(sc_.where(i) + ": run: the fabric was still busy after " + std::to_string(limit_us) + " us");
  }
  return true;
}

void Run::advance(Nanos d) {
  const Nanos deadline = now() + d;
  bed_->run_until([] { return false; }, deadline);
}

void Run::expect_mem(size_t i, const scenario::ExpectMem& m) {
  const MrObj& o = *mrs_[m.mr()];
  std::vector<std::byte> want(m.bytes().size());
  if (!want.empty()) std::memcpy(want.data(), m.bytes().data(), want.size());  // (memcpy of null is UB)
  else want.assign(m.length(), std::byte(m.fill()));
  std::string what = m.mr() + "[" + std::to_string(m.offset()) + ", +" + std::to_string(want.size()) + ")";
  if (m.offset() > o.mem.size() || want.size() > o.mem.size() - m.offset()) {
    expect(i, o.node, false, what + " inside the MR", "an MR of " + std::to_string(o.mem.size()) + " bytes");
    return;
  }
  const std::byte* at = o.mem.data() + m.offset();
  size_t k = 0;
  while (k < want.size() && at[k] == want[k]) ++k;
  if (k == want.size()) {
    expect(i, o.node, true, what + " holds the expected bytes", "");
    return;
  }
  const size_t n = std::min<size_t>(16, want.size() - k);
  expect(i, o.node, false,
         what + " at +" + std::to_string(k) + ": " + hex(want.data() + k, n), hex(at + k, n));
}

void Run::expect_counter(size_t i, const scenario::ExpectCounter& c) {
  const int node = node_index(c.node());
  const Counters cs = c.qp().empty() ? bed_->nodes()[static_cast<size_t>(node)].dev->counters()
                                     : qps_[c.qp()].qp->counters();
  uint64_t v = 0;
  cs.for_each([&](std::string_view n, uint64_t x) { if (n == c.name()) v = x; });
  const std::string who = c.qp().empty() ? c.node() : c.qp();
  expect(i, node, c.at_least() ? v >= c.value() : v == c.value(),
         who + " " + c.name() + (c.at_least() ? " >= " : " = ") + std::to_string(c.value()), std::to_string(v),
         c.qp().empty() ? std::nullopt : std::optional<uint32_t>(qps_[c.qp()].qp->qp_num()));
}

void Run::expect_port(size_t i, const scenario::ExpectPort& p) {
  const size_t arrow = p.port().find("->");
  const int port = net_->port_between(p.port().substr(0, arrow), p.port().substr(arrow + 2));
  const uint64_t v = *port_counter(net_->port_stats(static_cast<uint32_t>(port)), p.name());
  expect(i, -1, p.at_least() ? v >= p.value() : v == p.value(),
         "port " + p.port() + " " + p.name() + (p.at_least() ? " >= " : " = ") + std::to_string(p.value()),
         std::to_string(v));
}

void Run::fabric_report() {
  // The series end at the sample after the network's last event, so that
  // what every sample adds up to equals the ports' totals. An idle fabric's
  // clock moves there (nothing is due on the way); a busy one ends now.
  const Nanos interval = topo_->sample_interval;
  Nanos end = (watch_->last() + interval - Nanos(1)) / interval * interval;
  if (end == Nanos(0)) end = interval;
  if (end > now()) {
    if (bed_->idle())
      bed_->fabric()->advance(end);
    else
      end = now();
  }
  FabricNames names;
  names.shape = topo_->shape;
  for (size_t k = 0; k < bed_->nodes().size(); ++k) {
    const auto& n = bed_->nodes()[k];
    names.nodes.push_back({n.name, topo_->node_host[k], n.addr, n.dev->counters()});
  }
  for (const auto& [name, q] : qps_) {
    auto peer = peer_.find(name);
    names.qps[{q.node, q.qp->qp_num()}] = {name, peer == peer_.end() ? std::string() : peer->second};
  }
  out_.fabric = make_fabric_report(*net_, end, *meter_, names);
}

void Run::filter_ladder() {
  const auto& want = sc_.s.ladder();
  LadderFilter f;
  f.lanes.assign(bed_->nodes().size(), want.node_size() == 0 && want.qp_size() == 0);
  for (const std::string& n : want.node()) f.lanes[static_cast<size_t>(node_index(n))] = true;
  for (const std::string& q : want.qp()) {
    const QpObj& o = qps_[q];
    if (want.node_size() == 0) f.lanes[static_cast<size_t>(o.node)] = true;
    f.qps.insert({o.node, o.qp->qp_num()});
    f.qp_names.insert(q);
  }
  // The CQs of what is drawn: the QPs' own, or every CQ of a drawn node.
  for (const auto& [name, q] : qps_) {
    if (!f.lanes[static_cast<size_t>(q.node)] || (!f.qp_names.empty() && !f.qp_names.contains(name))) continue;
    for (const auto& nd : sc_.s.node())
      for (const auto& qp : nd.qp())
        if (qp.name() == name) {
          f.cq_names.insert(qp.send_cq());
          f.cq_names.insert(qp.recv_cq().empty() ? qp.send_cq() : qp.recv_cq());
        }
  }
  for (const auto& [name, node] : cq_node_)
    if (f.lanes[static_cast<size_t>(node)] && f.qp_names.empty()) f.cq_names.insert(name);
  out_.ladder = sim::filter_ladder(out_.ladder, f);
}

void Run::finish() {
  if (net_) fabric_report();
  rec_.finish(bed_->idle());
  if (sc_.s.has_ladder()) filter_ladder();
}

bool Run::steps(std::string* error) {
  using K = scenario::Step::KindCase;
  for (size_t i = 0; i < static_cast<size_t>(sc_.s.step_size()); ++i) {
    const auto& st = sc_.s.step(static_cast<int>(i));
    switch (st.kind_case()) {
      case K::kConnect: connect(i, st.connect()); break;
      case K::kModifyQp: modify(i, st.modify_qp()); break;
      case K::kPostSend: post_send(i, st.post_send()); break;
      case K::kPostRecv: post_recv(i, st.post_recv()); break;
      case K::kPollCq: poll_cq(i, st.poll_cq()); break;
      case K::kAdvance: advance(Nanos(st.advance().us() * 1000 + st.advance().ns())); break;
      case K::kRun:
        if (!run_idle(i, st.run(), error)) return false;
        break;
      case K::kFault: {
        const int n = node_index(st.fault().node());
        FaultRules rules = parse_fault_schedule(st.fault().rules());
        if (!rules.ok()) {
          *error = sc_.where(i) + ": fault: " + rules.error;
          return false;
        }
        bed_->nodes()[static_cast<size_t>(n)].faults->add_rules(rules.rules);
        note(n, "fault: " + st.fault().rules());
        break;
      }
      case K::kExpectQp: {
        const QpObj& q = qps_[st.expect_qp().qp()];
        const QpState want = *parse_qp_state(st.expect_qp().state());
        expect(i, q.node, q.qp->state() == want, st.expect_qp().qp() + " in " + std::string(to_string(want)),
               std::string(to_string(q.qp->state())), q.qp->qp_num());
        break;
      }
      case K::kExpectMem: expect_mem(i, st.expect_mem()); break;
      case K::kExpectCounter: expect_counter(i, st.expect_counter()); break;
      case K::kExpectPort: expect_port(i, st.expect_port()); break;
      case K::kNote: note(-1, st.note().text()); break;
      case K::KIND_NOT_SET: break;
    }
    rec_.set_counters(now(), counters_text());
  }
  // Whatever is still on its way arrives (or is lost) before the ladder ends.
  bed_->run_until([&] { return bed_->idle(); }, now() + std::chrono::seconds(1));
  return true;
}

}  // namespace

bool run_scenario(const LoadedScenario& sc, const SimOptions& opt, SimResult* out, std::string* error) {
  Run run(sc, *out);
  if (!run.setup(opt, error)) return false;
  const bool ok = run.steps(error);
  run.finish();
  return ok;
}

}  // namespace rocelab::sim
