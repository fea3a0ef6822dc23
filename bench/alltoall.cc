#include "bench/alltoall.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "emu/connect.h"
#include "emu/device.h"
#include "fabric/topology.h"
#include "testbed/testbed.h"

namespace rocelab::bench {

namespace {

// Where the QP towards host d reads in its host's source buffer: d * kStride.
constexpr size_t kStride = 64;

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Host {
  std::unique_ptr<emu::Device> dev;
  emu::Pd* pd = nullptr;
  emu::Cq* cq = nullptr;
  std::vector<std::byte> src;  // message + hosts * kStride: what its QPs send
  emu::Mr* src_mr = nullptr;
  // Destinations: slot 0 the shared sink, slot 1 + k the verified sender k's.
  std::vector<std::byte> dst;
  emu::Mr* dst_mr = nullptr;
  std::vector<emu::Qp*> qp;       // towards each host (nullptr: itself)
  std::vector<uint32_t> slot_of;  // sender -> its slot here
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

AlltoallResult run_alltoall(const AlltoallOptions& o) {
  AlltoallResult r;
  const auto setup_start = std::chrono::steady_clock::now();
  const uint32_t n = o.leaves * o.hosts_per_leaf;
  const size_t mtu = emu::mtu_bytes(o.mtu);
  r.hosts = n;
  if (n < 2 || o.message == 0 || o.message % mtu != 0) {
    r.error = "need two hosts or more and a message that is a non-zero multiple of the MTU";
    return r;
  }
  const uint32_t verified = std::min(o.verified, n - 1);

  fabric::Topology topo =
      fabric::leaf_spine(o.leaves, o.spines, o.hosts_per_leaf, o.host_bps, o.fabric_bps, o.link_delay);
  topo.seed = o.seed;
  topo.switches.pfc.enabled = o.pfc;
  topo.switches.ecn.enabled = o.ecn;
  std::string err;
  auto net = std::make_shared<fabric::SwitchedNetwork>(topo, Nanos(0), &err);
  if (!err.empty()) {
    r.error = "topology: " + err;
    return r;
  }
  emu::SimFabricConfig cfg;
  cfg.network = net;
  testbed::Testbed bed(testbed::Net::kSim, cfg);

  // Sender s's verified destinations are the hosts s + offset(k), offsets
  // spread over the ring of hosts so that they cross the spines as well as
  // stay on a leaf; with verified = n - 1 they are every other host.
  std::vector<uint32_t> offsets(verified);
  for (uint32_t k = 0; k < verified; ++k) offsets[k] = 1 + k * (n - 1) / verified;

  const unsigned dst_access = emu::access::kLocalWrite | emu::access::kRemoteWrite;
  std::vector<Host> hosts(n);
  for (uint32_t i = 0; i < n; ++i) {
    Host& h = hosts[i];
    emu::DeviceConfig dc;
    dc.active_mtu = o.mtu;
    dc.line_rate_bps = o.host_bps;
    dc.cc = o.cc;
    h.dev = bed.make_device(fabric::preset_address(i), 1, dc, nullptr, nullptr, &err);
    if (!h.dev) {
      r.error = "device " + std::to_string(i) + ": " + err;
      return r;
    }
    auto pd = h.dev->alloc_pd();
    auto cq = pd ? h.dev->create_cq(int(2 * n), nullptr, 0) : emu::Result<emu::Cq*>(pd.error());
    if (!cq) {
      r.error = "pd/cq on host " + std::to_string(i) + ": " + cq.error().message();
      return r;
    }
    h.pd = *pd;
    h.cq = *cq;
    h.src.resize(o.message + n * kStride);
    for (size_t w = 0; w < h.src.size() / 8; ++w) {
      const uint64_t v = splitmix(o.seed ^ (uint64_t(i) << 40) ^ w);
      std::memcpy(h.src.data() + 8 * w, &v, 8);
    }
    h.dst.resize((1 + verified) * o.message);
    auto sm = h.dev->reg_mr(h.pd, h.src.data(), h.src.size(), reinterpret_cast<uint64_t>(h.src.data()),
                            emu::access::kLocalWrite);
    auto dm = sm ? h.dev->reg_mr(h.pd, h.dst.data(), h.dst.size(), reinterpret_cast<uint64_t>(h.dst.data()),
                                 dst_access)
                 : sm;
    if (!dm) {
      r.error = "reg_mr on host " + std::to_string(i) + ": " + dm.error().message();
      return r;
    }
    h.src_mr = *sm;
    h.dst_mr = *dm;
    r.buffer_bytes += h.src.size() + h.dst.size();
    h.slot_of.assign(n, 0);
    for (uint32_t k = 0; k < verified; ++k) h.slot_of[(i + n - offsets[k]) % n] = 1 + k;
    h.qp.assign(n, nullptr);
    for (uint32_t j = 0; j < n; ++j) {
      if (j == i) continue;
      emu::QpInitAttr ia;
      ia.send_cq = ia.recv_cq = h.cq;
      ia.qp_type = emu::QpType::kRC;
      ia.cap = {4, 1, 1, 1, 0};
      auto q = h.dev->create_qp(h.pd, ia);
      if (!q) {
        r.error = "create_qp on host " + std::to_string(i) + ": " + q.error().message();
        return r;
      }
      h.qp[j] = *q;
    }
  }
  emu::ConnectOptions co;
  co.path_mtu = o.mtu;
  co.traffic_class = o.traffic_class;
  for (uint32_t a = 0; a < n; ++a) {
    for (uint32_t b = a + 1; b < n; ++b) {
      if (std::error_code ec = emu::connect_pair(*hosts[a].dev, *hosts[a].qp[b], *hosts[b].dev, *hosts[b].qp[a], co)) {
        r.error = "connect " + std::to_string(a) + "-" + std::to_string(b) + ": " + ec.message();
        return r;
      }
    }
  }
  r.qps = size_t(n) * (n - 1);
  r.data_packets = r.qps * (o.message / mtu);
  r.setup_wall_s = seconds_since(setup_start);

  // Every host posts its WRITEs in the order s + 1, s + 2, ... so that the
  // hosts do not all start on the same destination.
  const auto run_start = std::chrono::steady_clock::now();
  const Nanos t0 = bed.fabric()->now();
  for (uint32_t s = 0; s < n; ++s) {
    Host& h = hosts[s];
    for (uint32_t k = 1; k < n; ++k) {
      const uint32_t d = (s + k) % n;
      const Host& t = hosts[d];
      emu::Sge sge{reinterpret_cast<uint64_t>(h.src.data() + d * kStride), uint32_t(o.message), h.src_mr->lkey()};
      emu::SendWr wr;
      wr.wr_id = d;
      wr.opcode = emu::WrOpcode::kRdmaWrite;
      wr.sg_list = {&sge, 1};
      wr.send_flags = emu::send_flags::kSignaled;
      wr.rdma.remote_addr = reinterpret_cast<uint64_t>(t.dst.data()) + t.slot_of[s] * o.message;
      wr.rdma.rkey = t.dst_mr->rkey();
      size_t posted = 0;
      if (std::error_code ec = h.qp[d]->post_send({&wr, 1}, &posted)) {
        r.error = "post_send " + std::to_string(s) + "->" + std::to_string(d) + ": " + ec.message();
        return r;
      }
    }
  }
  std::string first_failure;
  std::vector<emu::Wc> wc(64);
  auto poll = [&](uint32_t s) {
    Host& h = hosts[s];
    ++r.device_polls;
    const int got = h.cq->poll(wc);
    for (int k = 0; k < got; ++k) {
      const emu::Wc& c = wc[size_t(k)];
      ++r.completions;
      const bool ok = c.status == emu::WcStatus::kSuccess && c.opcode == emu::WcOpcode::kRdmaWrite && c.wr_id < n &&
                      c.wr_id != s && c.qp_num == h.qp[c.wr_id]->qp_num();
      if (!ok) {
        ++r.failed;
        if (first_failure.empty())
          first_failure = "host " + std::to_string(s) + ": completion of wr_id " + std::to_string(c.wr_id) +
                          " with status " + std::string(emu::to_string(c.status));
      }
    }
  };
  // kDueDevices: the fabric lists the ports with work; the hosts were
  // attached in host order, so the list is in the order kEveryDevice polls.
  std::unordered_map<const emu::Transport*, uint32_t> host_of;
  for (uint32_t s = 0; s < n; ++s) host_of[&hosts[s].dev->transport()] = s;
  std::vector<emu::Transport*> due;
  auto step = [&] {
    ++r.rounds;
    if (o.driver == Driver::kEveryDevice) {
      for (uint32_t s = 0; s < n; ++s) poll(s);
      return;
    }
    due.clear();
    bed.fabric()->ports_with_work(&due);
    for (const emu::Transport* t : due) poll(host_of.at(t));
  };
  const double cpu_start = thread_cpu_s();
  const bool finished =
      bed.fabric()->run_until([&] { return r.completions >= r.qps; }, t0 + o.deadline, step);
  r.run_cpu_s = thread_cpu_s() - cpu_start;
  r.sim_time = bed.fabric()->now() - t0;
  r.run_wall_s = seconds_since(run_start);

  const auto check_start = std::chrono::steady_clock::now();
  for (uint32_t d = 0; d < n; ++d) {
    const Host& t = hosts[d];
    // The verified destinations: exactly what their sender sent.
    for (uint32_t k = 0; k < verified; ++k) {
      const uint32_t s = (d + n - offsets[k]) % n;
      const std::byte* want = hosts[s].src.data() + d * kStride;
      ++r.verified_writes;
      if (std::memcmp(t.dst.data() + (1 + k) * o.message, want, o.message) != 0) ++r.verified_bad;
    }
    // The shared sink: each chunk one sender's chunk (found by its first word).
    if (verified == n - 1) continue;
    for (size_t c = 0; c < o.message; c += mtu) {
      const std::byte* got = t.dst.data() + c;
      bool found = false;
      for (uint32_t s = 0; s < n && !found; ++s) {
        if (s == d || t.slot_of[s] != 0) continue;
        const std::byte* want = hosts[s].src.data() + d * kStride + c;
        found = std::memcmp(got, want, 8) == 0 && std::memcmp(got, want, mtu) == 0;
      }
      ++r.sink_chunks;
      if (!found) ++r.sink_chunks_bad;
    }
  }
  r.check_wall_s = seconds_since(check_start);

  for (const Host& h : hosts) r.counters += h.dev->counters();
  r.packets = r.counters.sent_pkts;
  r.delivered = bed.fabric()->stats().delivered;
  r.totals = net->totals();
  r.max_in_flight = net->max_in_flight();

  if (!finished && r.completions < r.qps)
    r.error = std::to_string(r.completions) + " of " + std::to_string(r.qps) + " WRITEs completed within " +
              std::to_string(std::chrono::duration<double, std::milli>(o.deadline).count()) + " ms of virtual time";
  else if (r.failed != 0)
    r.error = std::to_string(r.failed) + " completions failed; first: " + first_failure;
  else if (r.verified_bad != 0)
    r.error = std::to_string(r.verified_bad) + " of " + std::to_string(r.verified_writes) +
              " verified destinations differ from what their sender sent";
  else if (r.sink_chunks_bad != 0)
    r.error = std::to_string(r.sink_chunks_bad) + " of " + std::to_string(r.sink_chunks) +
              " chunks of the shared sinks are no sender's chunk";
  return r;
}

}  // namespace rocelab::bench
