#include "fabric/incast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "emu/connect.h"
#include "testbed/endpoint.h"
#include "testbed/testbed.h"

namespace rocelab::fabric {

IncastResult run_incast(const IncastOptions& o) {
  constexpr size_t kMessage = 64 * 1024;
  IncastResult r;
  std::string err;
  auto net = std::make_shared<SwitchedNetwork>(o.topology, o.sample_interval, &err);
  EXPECT_EQ(err, "");
  emu::SimFabricConfig cfg;
  cfg.network = net;
  testbed::Testbed bed(testbed::Net::kSim, cfg);
  auto device = [&](const wire::IpAddr& a, emu::DeviceConfig dc) {
    dc.active_mtu = emu::Mtu::k1024;
    auto d = bed.make_device(a, 1, dc, nullptr, nullptr, &err);
    EXPECT_TRUE(d) << err;
    return d;
  };
  // The sink: one MR with a slice per sender, a QP per sender.
  testbed::Endpoint sink;
  sink.dev = device(preset_address(0), o.sink_device);
  if (o.sink_tap) sink.dev->set_tap(o.sink_tap);
  EXPECT_EQ(sink.open({emu::QpType::kRC, o.senders * o.bytes, emu::access::kLocalWrite | emu::access::kRemoteWrite,
                       256, {64, 64, 4, 4, 64}, false, std::nullopt, false}),
            "");
  std::vector<testbed::Endpoint> senders(o.senders);
  emu::ConnectOptions co;
  co.path_mtu = emu::Mtu::k1024;
  co.timeout = 8;  // 1 ms: losses recover quickly in virtual time
  co.traffic_class = o.traffic_class;
  for (size_t i = 0; i < o.senders; ++i) {
    testbed::Endpoint& s = senders[i];
    s.dev = device(preset_address(uint32_t(i + 1)), o.sender_device);
    EXPECT_EQ(s.open({emu::QpType::kRC, o.bytes, emu::access::kLocalWrite}), "");
    for (size_t k = 0; k < o.bytes; ++k) s.buf[k] = std::byte(uint8_t(i * 31 + k * 7 + (k >> 10)));
    emu::QpInitAttr ia;
    ia.send_cq = ia.recv_cq = sink.rcq;
    ia.qp_type = emu::QpType::kRC;
    ia.cap = {64, 64, 4, 4, 64};
    auto q = sink.dev->create_qp(sink.pd, ia);
    EXPECT_TRUE(q);
    EXPECT_FALSE(emu::connect_pair(*s.dev, *s.qp, *sink.dev, **q, co));
    r.sender_qpns.push_back(s.qp->qp_num());
  }
  for (size_t i = 0; i < o.senders; ++i) {
    testbed::Endpoint& s = senders[i];
    for (size_t off = 0; off < o.bytes; off += kMessage) {
      emu::Sge sge{reinterpret_cast<uint64_t>(s.buf.data() + off), kMessage, s.mr->lkey()};
      emu::SendWr wr;
      wr.wr_id = off;
      wr.opcode = emu::WrOpcode::kRdmaWrite;
      wr.sg_list = {&sge, 1};
      wr.send_flags = emu::send_flags::kSignaled;
      wr.rdma.remote_addr = sink.iova + i * o.bytes + off;
      wr.rdma.rkey = sink.mr->rkey();
      size_t n = 0;
      EXPECT_FALSE(s.qp->post_send({&wr, 1}, &n));
    }
  }
  std::vector<size_t> done(o.senders);
  std::vector<emu::Device*> devs{sink.dev.get()};
  for (auto& s : senders) devs.push_back(s.dev.get());
  bool failed = false;
  const size_t messages = o.bytes / kMessage;
  r.all_done = bed.fabric()->run_until(
      [&] { return std::all_of(done.begin(), done.end(), [&](size_t d) { return d >= messages; }); },
      Nanos(std::chrono::seconds(10)), [&] {
        for (emu::Device* d : devs) d->progress();
        for (size_t i = 0; i < o.senders; ++i) {
          emu::Wc wc[8];
          const int n = senders[i].scq->poll(wc);
          for (int k = 0; k < n; ++k) {
            failed |= wc[k].status != emu::WcStatus::kSuccess;
            ++done[i];
          }
        }
      });
  r.all_done &= !failed;
  r.finish = bed.fabric()->now();
  r.memory_ok = true;
  for (size_t i = 0; i < o.senders; ++i)
    r.memory_ok &= std::equal(senders[i].buf.begin(), senders[i].buf.end(), sink.buf.begin() + i * o.bytes);
  r.sink = sink.dev->counters();
  for (auto& s : senders) r.senders += s.dev->counters();
  r.totals = net->totals();
  const int to_sink = net->port_between("tor", "sink");
  if (to_sink < 0) return r;
  r.to_sink = net->port_stats(uint32_t(to_sink));
  const Series& series = net->series(r.finish);
  for (const Series::PortLine& line : series.ports) {
    if (line.port != uint32_t(to_sink) || line.queue_bytes.empty()) continue;
    double sum = 0;
    for (uint64_t q : line.queue_bytes) sum += double(q);
    r.mean_queue_to_sink = sum / double(line.queue_bytes.size());
  }
  return r;
}

}  // namespace rocelab::fabric
