#include "stat/report.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>

#include "present/fields.h"

namespace rocelab::stat {
namespace {

// One formatted line of bounded fields (names, numbers, addresses).
std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// name=value for each non-zero counter, space-separated; "-" when all are zero.
std::string nonzero(const google::protobuf::RepeatedPtrField<Counter>& cs) {
  std::string s;
  for (const Counter& c : cs)
    if (c.value() != 0) s += (s.empty() ? "" : " ") + c.name() + "=" + std::to_string(c.value());
  return s.empty() ? "-" : s;
}

uint64_t counter(const google::protobuf::RepeatedPtrField<Counter>& cs, const std::string& name) {
  for (const Counter& c : cs)
    if (c.name() == name) return c.value();
  return 0;
}

std::string peer_of(const Qp& q) {
  return q.connected() ? q.peer() + "/" + present::qpn_text(q.dest_qpn()) : "-";
}

}  // namespace

Host host_of(const std::vector<Entry>& entries) {
  Host h;
  for (const Entry& e : entries) {
    if (e.status == Entry::Status::kLive)
      *h.add_processes() = e.process;
    else if (e.status != Entry::Status::kStale)
      h.add_problems(e.message);
  }
  return h;
}

std::string host_json(const Host& h) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(h, &out, o);
  return out;
}

std::string host_table(const Host& h) {
  std::string s = fmt("%-8s %-16s %-10s %-16s %5s %4s %4s %4s %5s  %s\n", "PID", "COMMAND", "DEVICE", "ADDRESS",
                      "QPS", "CQS", "MRS", "SRQS", "MCAST", "COUNTERS");
  size_t nqps = 0;
  for (const Process& p : h.processes()) {
    if (p.devices().empty())
      s += fmt("%-8u %-16s %-10s\n", p.pid(), p.comm().c_str(), "(none open)");
    for (const Device& d : p.devices()) {
      s += fmt("%-8u %-16s %-10s %-16s %5d %4d %4d %4d %5d  ", p.pid(), p.comm().c_str(), d.name().c_str(),
               d.address().c_str(), d.qps_size(), d.cqs_size(), d.mrs_size(), d.srqs_size(), d.mcast_size());
      s += nonzero(d.counters()) + "\n";  // any length: not through fmt's buffer
      nqps += static_cast<size_t>(d.qps_size());
    }
  }
  if (nqps == 0) return s;
  s += "\n" + fmt("%-8s %-10s %-8s %-7s %-5s %-27s %8s %8s %8s %5s %5s %5s %10s %10s\n", "PID", "DEVICE", "QPN",
                  "TYPE", "STATE", "PEER/QPN", "SQ_PSN", "UNACKED", "EPSN", "RETRY", "RNR", "OUTST", "SENT",
                  "RCVD");
  for (const Process& p : h.processes())
    for (const Device& d : p.devices())
      for (const Qp& q : d.qps())
        s += fmt("%-8u %-10s %-8s %-7s %-5s %-27s %8u %8u %8u %2u/%-2u %2u/%-2u %5u %10llu %10llu\n", p.pid(),
                 d.name().c_str(), present::qpn_text(q.qpn()).c_str(), q.type().c_str(), q.state().c_str(),
                 peer_of(q).c_str(), q.sq_psn(), q.unacked_psn(), q.epsn(), q.retry_left(), q.retry_cnt(),
                 q.rnr_retry_left(), q.rnr_retry(), q.sq_outstanding(),
                 static_cast<unsigned long long>(counter(q.counters(), "sent_pkts")),
                 static_cast<unsigned long long>(counter(q.counters(), "rcvd_pkts")));
  return s;
}

std::string qp_detail(const Host& h, uint32_t qpn) {
  std::string s;
  for (const Process& p : h.processes())
    for (const Device& d : p.devices())
      for (const Qp& q : d.qps()) {
        if (q.qpn() != qpn) continue;
        if (!s.empty()) s += "\n";
        s += fmt("QP %s on %s (%s), pid %u (%s)\n", present::qpn_text(q.qpn()).c_str(), d.name().c_str(),
                 d.address().c_str(), p.pid(), p.comm().c_str());
        s += fmt("  type %s  state %s  path_mtu %u  pd %u  send_cq %u  recv_cq %u  srq %u\n", q.type().c_str(),
                 q.state().c_str(), q.path_mtu(), q.pd(), q.send_cq(), q.recv_cq(), q.srq());
        s += fmt("  peer %s\n", peer_of(q).c_str());
        s += fmt("  sq_psn %u  unacked_psn %u  epsn %u\n", q.sq_psn(), q.unacked_psn(), q.epsn());
        s += fmt("  retry_cnt %u (left %u)  rnr_retry %u (left %u)  timeout %u\n", q.retry_cnt(), q.retry_left(),
                 q.rnr_retry(), q.rnr_retry_left(), q.timeout());
        s += fmt("  send WRs outstanding %u of %u  receive WRs posted %u of %u\n", q.sq_outstanding(),
                 q.max_send_wr(), q.rq_posted(), q.max_recv_wr());
        s += "  counters: " + nonzero(q.counters()) + "\n";
      }
  return s;
}

}  // namespace rocelab::stat
