#include "sim/scenario.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "cc/rate_control.h"
#include "emu/transport/fault_config.h"
#include "emu/verbs_types.h"
#include "sim/fsm.h"
#include "sim/names.h"
#include "sim/topology.h"
#include "wire/ip_udp.h"

namespace rocelab::sim {

namespace pb = google::protobuf;

namespace {

class Collector final : public pb::io::ErrorCollector {
 public:
  explicit Collector(std::string path) : path_(std::move(path)) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty())
      first_ = path_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string path_;
  std::string first_;
};

// The checks, with the location of what they look at.
class Checker {
 public:
  Checker(const LoadedScenario& ls, const pb::TextFormat::ParseInfoTree& tree)
      : ls_(ls), tree_(tree) {}

  bool run(std::string* error);

 private:
  int line_of(const pb::TextFormat::ParseInfoTree* t, const char* field, int index,
              const pb::Descriptor* d) const {
    if (!t) return 0;
    const pb::FieldDescriptor* f = d->FindFieldByName(field);
    if (!f) return 0;
    auto loc = t->GetLocation(f, index);
    return loc.line >= 0 ? loc.line + 1 : 0;
  }
  bool fail(int line, const std::string& msg) {
    if (error_.empty()) error_ = ls_.path + ":" + (line > 0 ? std::to_string(line) : std::string("?")) + ": " + msg;
    return false;
  }
  bool object(const std::string& name, const std::string& kind, int node, int line);
  bool ref(const std::string& name, const std::string& kind, int line, int* node = nullptr,
           bool optional = false);
  bool check_node(int i);
  bool check_topology();
  bool check_ladder();
  bool check_step(int i);
  bool check_sges(const google::protobuf::RepeatedPtrField<scenario::Sge>& sges, int node, int line);

  const LoadedScenario& ls_;
  const pb::TextFormat::ParseInfoTree& tree_;
  std::map<std::string, std::pair<std::string, int>> objects_;  // name -> kind, node
  std::set<std::string> node_names_;
  std::optional<ScenarioTopology> topo_;
  std::string error_;
};

bool Checker::object(const std::string& name, const std::string& kind, int node, int line) {
  if (name.empty()) return fail(line, "a " + kind + " needs a name");
  if (!objects_.emplace(name, std::make_pair(kind, node)).second)
    return fail(line, "the name \"" + name + "\" is used twice");
  return true;
}

bool Checker::ref(const std::string& name, const std::string& kind, int line, int* node, bool optional) {
  if (name.empty()) return optional || fail(line, "which " + kind + "? (the name is missing)");
  auto it = objects_.find(name);
  if (it == objects_.end()) return fail(line, "no " + kind + " is named \"" + name + "\"");
  if (it->second.first != kind)
    return fail(line, "\"" + name + "\" is a " + it->second.first + ", not a " + kind);
  if (node) *node = it->second.second;
  return true;
}

bool Checker::check_node(int i) {
  const auto& n = ls_.s.node(i);
  const pb::Descriptor* sd = scenario::Scenario::descriptor();
  const int line = line_of(&tree_, "node", i, sd);
  const pb::TextFormat::ParseInfoTree* nt = tree_.GetTreeForNested(sd->FindFieldByName("node"), i);
  const pb::Descriptor* nd = scenario::Node::descriptor();
  if (n.name().empty()) return fail(line, "a node needs a name");
  if (!node_names_.insert(n.name()).second) return fail(line, "two nodes are named \"" + n.name() + "\"");
  if (!n.address().empty() && !wire::IpAddr::parse(n.address()))
    return fail(line, "node " + n.name() + ": \"" + n.address() + "\" is not an IPv4 or IPv6 address");
  emu::Mtu m;
  if (n.mtu() != 0 && !emu::mtu_from_bytes(n.mtu(), &m))
    return fail(line, "node " + n.name() + ": mtu must be 256, 512, 1024, 2048 or 4096");
  if (auto r = emu::parse_fault_schedule(n.faults()); !r.ok())
    return fail(line, "node " + n.name() + ": faults: " + r.error);
  if (!n.host().empty() && !ls_.s.fabric().has_topology())
    return fail(line, "node " + n.name() + ": host names a host of the fabric's topology, and there is none");
  if (!n.cc().empty()) {
    std::string why;
    if (!cc::parse_algorithm(n.cc(), &why)) return fail(line, "node " + n.name() + ": cc: " + why);
  }
  if (!n.dcqcn_params().empty() && n.dcqcn_params() != "mlx5" && n.dcqcn_params() != "paper")
    return fail(line, "node " + n.name() + ": dcqcn_params is \"mlx5\" or \"paper\", not \"" + n.dcqcn_params() + "\"");
  for (int k = 0; k < n.cq_size(); ++k)
    if (!object(n.cq(k).name(), "cq", i, line_of(nt, "cq", k, nd))) return false;
  for (int k = 0; k < n.srq_size(); ++k)
    if (!object(n.srq(k).name(), "srq", i, line_of(nt, "srq", k, nd))) return false;
  for (int k = 0; k < n.mr_size(); ++k) {
    const auto& mr = n.mr(k);
    const int l = line_of(nt, "mr", k, nd);
    if (!object(mr.name(), "mr", i, l)) return false;
    if (mr.length() == 0 || mr.length() > (64u << 20)) return fail(l, "mr " + mr.name() + ": length must be 1 .. 64 MiB");
    if (mr.init().size() > mr.length()) return fail(l, "mr " + mr.name() + ": init is longer than the MR");
    if (mr.fill() > 255) return fail(l, "mr " + mr.name() + ": fill is a byte (0..255)");
    for (const auto& a : mr.access())
      if (!parse_access(a)) return fail(l, "mr " + mr.name() + ": unknown access \"" + a + "\"");
  }
  for (int k = 0; k < n.qp_size(); ++k) {
    const auto& qp = n.qp(k);
    const int l = line_of(nt, "qp", k, nd);
    if (!object(qp.name(), "qp", i, l)) return false;
    if (!parse_qp_type(qp.type())) return fail(l, "qp " + qp.name() + ": type must be RC, UC or UD");
    int cn = -1;
    if (!ref(qp.send_cq(), "cq", l, &cn)) return false;
    if (cn != i) return fail(l, "qp " + qp.name() + ": its send_cq is on another node");
    if (!qp.recv_cq().empty()) {
      if (!ref(qp.recv_cq(), "cq", l, &cn)) return false;
      if (cn != i) return fail(l, "qp " + qp.name() + ": its recv_cq is on another node");
    }
    if (!qp.srq().empty()) {
      if (!ref(qp.srq(), "srq", l, &cn)) return false;
      if (cn != i) return fail(l, "qp " + qp.name() + ": its srq is on another node");
    }
  }
  return true;
}

bool Checker::check_topology() {
  TopologyError e;
  topo_ = scenario_topology(ls_.s, &e);
  if (topo_ || e.message.empty()) return true;
  const pb::Descriptor* sd = scenario::Scenario::descriptor();
  const pb::Descriptor* fd = scenario::Fabric::descriptor();
  const pb::Descriptor* td = scenario::Topology::descriptor();
  const int fabric_line = line_of(&tree_, "fabric", -1, sd);
  const pb::TextFormat::ParseInfoTree* ft = tree_.GetTreeForNested(sd->FindFieldByName("fabric"), -1);
  const int topo_line = line_of(ft, "topology", -1, fd);
  const pb::TextFormat::ParseInfoTree* tt = ft ? ft->GetTreeForNested(fd->FindFieldByName("topology"), -1) : nullptr;
  auto or_topo = [&](int l) { return l > 0 ? l : topo_line; };
  int line = topo_line;
  switch (e.at) {
    case TopologyError::At::kFabric: line = fabric_line; break;
    case TopologyError::At::kTopology: break;
    case TopologyError::At::kPreset: line = or_topo(line_of(tt, "preset", -1, td)); break;
    case TopologyError::At::kLink: line = or_topo(line_of(tt, "link", e.index, td)); break;
    case TopologyError::At::kEcn: line = or_topo(line_of(tt, "ecn", -1, td)); break;
    case TopologyError::At::kPfc: line = or_topo(line_of(tt, "pfc", -1, td)); break;
    case TopologyError::At::kNode: line = line_of(&tree_, "node", e.index, sd); break;
  }
  return fail(line, e.message);
}

bool Checker::check_ladder() {
  if (!ls_.s.has_ladder()) return true;
  const pb::Descriptor* sd = scenario::Scenario::descriptor();
  const int line = line_of(&tree_, "ladder", -1, sd);
  for (const std::string& n : ls_.s.ladder().node())
    if (!node_names_.count(n)) return fail(line, "ladder: no node is named \"" + n + "\"");
  for (const std::string& q : ls_.s.ladder().qp())
    if (!ref(q, "qp", line)) return false;
  return true;
}

bool Checker::check_sges(const google::protobuf::RepeatedPtrField<scenario::Sge>& sges, int node, int line) {
  for (const auto& s : sges) {
    int n = -1;
    if (!ref(s.mr(), "mr", line, &n)) return false;
    if (n != node) return fail(line, "sge: mr " + s.mr() + " is on another node");
  }
  return true;
}

bool Checker::check_step(int i) {
  const auto& st = ls_.s.step(i);
  const int line = ls_.step_line[static_cast<size_t>(i)];
  int node = -1;
  using K = scenario::Step::KindCase;
  switch (st.kind_case()) {
    case K::KIND_NOT_SET:
      return fail(line, "an empty step");
    case K::kConnect: {
      const auto& c = st.connect();
      if (!ref(c.qp(), "qp", line)) return false;
      if (!ref(c.peer(), "qp", line, nullptr, true)) return false;
      emu::Mtu m;
      if (c.path_mtu() != 0 && !emu::mtu_from_bytes(c.path_mtu(), &m)) return fail(line, "path_mtu must be 256 .. 4096");
      if (c.traffic_class() > 255) return fail(line, "traffic_class is a byte (DSCP << 2 | ECN, 0..255)");
      return true;
    }
    case K::kModifyQp: {
      const auto& m = st.modify_qp();
      if (!ref(m.qp(), "qp", line)) return false;
      if (!m.state().empty() && !parse_qp_state(m.state())) return fail(line, "unknown state \"" + m.state() + "\"");
      for (const auto& name : m.mask()) {
        std::string err;
        if (!parse_attr_mask(name, &err)) return fail(line, err);
      }
      for (const auto& a : m.access())
        if (!parse_access(a)) return fail(line, "unknown access \"" + a + "\"");
      if (!m.dest_qp().empty() && !ref(m.dest_qp(), "qp", line)) return false;
      if (!m.av_node().empty() && !node_names_.count(m.av_node())) return fail(line, "no node is named \"" + m.av_node() + "\"");
      emu::Mtu mtu;
      if (m.path_mtu() != 0 && !emu::mtu_from_bytes(m.path_mtu(), &mtu)) return fail(line, "path_mtu must be 256 .. 4096");
      if (!m.expect_error().empty() && !parse_errno(m.expect_error())) return fail(line, "unknown errno \"" + m.expect_error() + "\"");
      if (m.traffic_class() > 255) return fail(line, "traffic_class is a byte (DSCP << 2 | ECN, 0..255)");
      return true;
    }
    case K::kPostSend: {
      const auto& p = st.post_send();
      if (!ref(p.qp(), "qp", line, &node)) return false;
      if (!parse_wr_opcode(p.opcode())) return fail(line, "unknown opcode \"" + p.opcode() + "\"");
      if (!check_sges(p.sge(), node, line)) return false;
      if (!ref(p.remote_mr(), "mr", line, nullptr, true)) return false;
      if (!ref(p.dest_qp(), "qp", line, nullptr, true)) return false;
      if (!p.expect_error().empty() && !parse_errno(p.expect_error())) return fail(line, "unknown errno \"" + p.expect_error() + "\"");
      return true;
    }
    case K::kPostRecv: {
      const auto& p = st.post_recv();
      if (p.qp().empty() == p.srq().empty()) return fail(line, "post_recv: give a qp or an srq");
      if (!p.qp().empty() ? !ref(p.qp(), "qp", line, &node) : !ref(p.srq(), "srq", line, &node)) return false;
      if (!check_sges(p.sge(), node, line)) return false;
      if (!p.expect_error().empty() && !parse_errno(p.expect_error())) return fail(line, "unknown errno \"" + p.expect_error() + "\"");
      return true;
    }
    case K::kPollCq: {
      const auto& p = st.poll_cq();
      if (!ref(p.cq(), "cq", line)) return false;
      if (p.count() != 0 && p.expect_size() != 0 && p.count() != static_cast<uint32_t>(p.expect_size()))
        return fail(line, "poll_cq: count and the number of expect entries differ");
      for (const auto& c : p.expect()) {
        if (!c.status().empty() && !parse_wc_status(c.status())) return fail(line, "unknown status \"" + c.status() + "\"");
        if (!c.opcode().empty() && !parse_wc_opcode(c.opcode())) return fail(line, "unknown completion opcode \"" + c.opcode() + "\"");
        if (!ref(c.qp(), "qp", line, nullptr, true)) return false;
      }
      return true;
    }
    case K::kAdvance:
      if (st.advance().us() == 0 && st.advance().ns() == 0) return fail(line, "advance: how long? (us or ns)");
      return true;
    case K::kRun:
      return true;
    case K::kFault: {
      if (!node_names_.count(st.fault().node())) return fail(line, "no node is named \"" + st.fault().node() + "\"");
      if (auto r = emu::parse_fault_schedule(st.fault().rules()); !r.ok()) return fail(line, "fault: " + r.error);
      if (st.fault().rules().empty()) return fail(line, "fault: which rules?");
      return true;
    }
    case K::kExpectQp:
      if (!ref(st.expect_qp().qp(), "qp", line)) return false;
      if (!parse_qp_state(st.expect_qp().state())) return fail(line, "unknown state \"" + st.expect_qp().state() + "\"");
      return true;
    case K::kExpectMem: {
      const auto& m = st.expect_mem();
      if (!ref(m.mr(), "mr", line)) return false;
      if (m.bytes().empty() && m.length() == 0) return fail(line, "expect_mem: give bytes, or fill and length");
      return true;
    }
    case K::kExpectCounter: {
      const auto& c = st.expect_counter();
      if (!node_names_.count(c.node())) return fail(line, "no node is named \"" + c.node() + "\"");
      if (!ref(c.qp(), "qp", line, nullptr, true)) return false;
      if (!counter_known(c.name())) return fail(line, "unknown counter \"" + c.name() + "\"");
      return true;
    }
    case K::kExpectPort: {
      const auto& p = st.expect_port();
      if (!topo_) return fail(line, "expect_port: the fabric has no topology, so no switch ports");
      const size_t arrow = p.port().find("->");
      bool found = false;
      if (arrow != std::string::npos) {
        const std::string a = p.port().substr(0, arrow), b = p.port().substr(arrow + 2);
        for (const auto& l : topo_->topo.links) found = found || (l.a == a && l.b == b) || (l.a == b && l.b == a);
      }
      if (!found) return fail(line, "expect_port: no port \"" + p.port() + "\" (a port is \"from->to\", e.g. \"tor->sink\")");
      if (!port_counter_known(p.name()))
        return fail(line, "expect_port: unknown counter \"" + p.name() + "\" (" + port_counter_names() + ")");
      return true;
    }
    case K::kNote:
      return true;
  }
  return fail(line, "an unknown step");
}

bool Checker::run(std::string* error) {
  bool ok = ls_.s.node_size() > 0 || fail(1, "a scenario needs at least one node");
  for (int i = 0; ok && i < ls_.s.node_size(); ++i) ok = check_node(i);
  ok = ok && check_topology() && check_ladder();
  for (int i = 0; ok && i < ls_.s.step_size(); ++i) ok = check_step(i);
  if (!ok) *error = error_;
  return ok;
}

}  // namespace

std::string LoadedScenario::where(size_t step) const {
  const int line = step < step_line.size() ? step_line[step] : 0;
  return path + ":" + (line > 0 ? std::to_string(line) : std::string("?"));
}

std::optional<LoadedScenario> parse_scenario(std::string_view text, const std::string& path,
                                             std::string* error) {
  LoadedScenario ls;
  ls.path = path;
  pb::TextFormat::Parser parser;
  Collector errors(path);
  parser.RecordErrorsTo(&errors);
  pb::TextFormat::ParseInfoTree tree;
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &ls.s)) {
    *error = errors.first().empty() ? path + ": not a scenario" : errors.first();
    return std::nullopt;
  }
  const pb::FieldDescriptor* steps = scenario::Scenario::descriptor()->FindFieldByName("step");
  for (int i = 0; i < ls.s.step_size(); ++i) {
    auto loc = tree.GetLocation(steps, i);
    ls.step_line.push_back(loc.line >= 0 ? loc.line + 1 : 0);
  }
  Checker c(ls, tree);
  if (!c.run(error)) return std::nullopt;
  return ls;
}

std::optional<LoadedScenario> load_scenario(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = path + ": read error";
    return std::nullopt;
  }
  return parse_scenario(ss.str(), path, error);
}

}  // namespace rocelab::sim
