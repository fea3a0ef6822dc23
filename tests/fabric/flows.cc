#include "fabric/flows.h"

#include <gtest/gtest.h>

#include <map>

#include "emu/connect.h"
#include "testbed/testbed.h"

namespace rocelab::fabric {

double FlowsResult::rate_bps(size_t f, Nanos from, Nanos to) const {
  uint64_t bytes = 0;
  for (const auto& [t, b] : completions[f])
    if (t >= from && t < to) bytes += b;
  return double(bytes) * 8e9 / double((to - from).count());
}

double FlowsResult::mean_queue(const std::string& a, const std::string& b, Nanos from, Nanos to) {
  const int port = net->port_between(a, b);
  if (port < 0) return -1;
  const Series& s = net->series(end);
  for (const Series::PortLine& line : s.ports) {
    if (line.port != uint32_t(port)) continue;
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < s.t.size(); ++i) {
      if (s.t[i] < from || s.t[i] >= to) continue;
      sum += double(line.queue_bytes[i]);
      ++n;
    }
    return n ? sum / double(n) : 0;
  }
  return 0;  // the port never queued
}

FlowsResult run_flows(const FlowsOptions& o) {
  FlowsResult r;
  std::string err;
  r.net = std::make_shared<SwitchedNetwork>(o.topology, o.sample_interval, &err);
  EXPECT_EQ(err, "");
  emu::SimFabricConfig cfg;
  cfg.network = r.net;
  testbed::Testbed bed(testbed::Net::kSim, cfg);
  // One device (and PD) per host that a flow names, its line rate its link's.
  struct Host {
    std::unique_ptr<emu::Device> dev;
    emu::Pd* pd = nullptr;
  };
  std::map<std::string, Host> hosts;
  auto host = [&](const std::string& name) -> Host& {
    Host& h = hosts[name];
    if (h.dev) return h;
    emu::DeviceConfig dc = o.device;
    dc.active_mtu = emu::Mtu::k1024;
    wire::IpAddr addr;
    for (const NodeSpec& n : o.topology.nodes)
      if (n.name == name) addr = n.addr;
    for (const LinkSpec& l : o.topology.links)
      if (l.a == name || l.b == name) dc.line_rate_bps = l.bits_per_sec;
    h.dev = bed.make_device(addr, 1, dc, nullptr, nullptr, &err);
    EXPECT_TRUE(h.dev) << err;
    h.pd = *h.dev->alloc_pd();
    return h;
  };
  // A flow's side: a buffer of `outstanding` messages, its MR, a CQ and the QP.
  struct Side {
    std::vector<std::byte> buf;
    emu::Mr* mr = nullptr;
    emu::Cq* cq = nullptr;
    emu::Qp* qp = nullptr;
  };
  auto side = [&](Host& h, unsigned access) {
    Side s;
    s.buf.resize(size_t{o.message} * o.outstanding);
    s.mr = *h.dev->reg_mr(h.pd, s.buf.data(), s.buf.size(), reinterpret_cast<uint64_t>(s.buf.data()), access);
    s.cq = *h.dev->create_cq(int(o.outstanding) * 2, nullptr, 0);
    emu::QpInitAttr ia;
    ia.send_cq = ia.recv_cq = s.cq;
    ia.qp_type = emu::QpType::kRC;
    ia.cap = {o.outstanding * 2, 4, 1, 1, 0};
    s.qp = *h.dev->create_qp(h.pd, ia);
    return s;
  };
  struct Flow {
    Side src, dst;
    uint32_t posted = 0;
    uint64_t next_slot = 0;
  };
  std::vector<Flow> flows(o.flows.size());
  r.completions.resize(o.flows.size());
  emu::ConnectOptions co;
  co.path_mtu = emu::Mtu::k1024;
  co.traffic_class = o.traffic_class;
  for (size_t i = 0; i < flows.size(); ++i) {
    Host& s = host(o.flows[i].src);
    Host& d = host(o.flows[i].dst);
    flows[i].src = side(s, emu::access::kLocalWrite);
    flows[i].dst = side(d, emu::access::kLocalWrite | emu::access::kRemoteWrite);
    EXPECT_FALSE(emu::connect_pair(*s.dev, *flows[i].src.qp, *d.dev, *flows[i].dst.qp, co));
  }
  auto post = [&](Flow& f) {
    const uint64_t off = (f.next_slot++ % o.outstanding) * o.message;
    emu::Sge sge{reinterpret_cast<uint64_t>(f.src.buf.data() + off), o.message, f.src.mr->lkey()};
    emu::SendWr wr;
    wr.opcode = emu::WrOpcode::kRdmaWrite;
    wr.sg_list = {&sge, 1};
    wr.send_flags = emu::send_flags::kSignaled;
    wr.rdma.remote_addr = reinterpret_cast<uint64_t>(f.dst.buf.data()) + off;
    wr.rdma.rkey = f.dst.mr->rkey();
    size_t n = 0;
    EXPECT_FALSE(f.src.qp->post_send({&wr, 1}, &n));
    ++f.posted;
  };
  bool failed = false;
  emu::SimFabric& fabric = *bed.fabric();
  fabric.run_until([&] { return failed || fabric.now() >= o.run_for; }, o.run_for, [&] {
    const Nanos now = fabric.now();
    for (auto& [name, h] : hosts) h.dev->progress();
    for (size_t i = 0; i < flows.size(); ++i) {
      Flow& f = flows[i];
      emu::Wc wc[16];
      const int n = f.src.cq->poll(wc);
      for (int k = 0; k < n; ++k) {
        failed |= wc[k].status != emu::WcStatus::kSuccess;
        r.completions[i].emplace_back(now, o.message);
        --f.posted;
      }
      const bool on = now >= o.flows[i].start && now < o.flows[i].stop;
      while (on && f.posted < o.outstanding) post(f);
    }
  });
  r.end = fabric.now();
  r.ok = !failed && r.end >= o.run_for;
  for (auto& [name, h] : hosts) r.counters += h.dev->counters();
  return r;
}

}  // namespace rocelab::fabric
