// Micro-benchmarks (Google Benchmark), run by `make bench`: the per-packet
// costs of the wire codec and of the engine on the simulated fabric. Speed is
// measured here, never asserted in tests.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "emu/connect.h"
#include "testbed/testbed.h"
#include "tests/fuzz/victim.h"
#include "wire/frame.h"
#include "wire/icrc.h"
#include "wire/packet.h"

namespace {

using namespace rocelab;

wire::RoceHeaders write_first() {
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcWriteFirst;
  h.bth.dest_qpn = wire::Qpn(0x11);
  h.bth.psn = wire::Psn(1000);
  h.reth = {0x10000, 0x1d3, 4096};
  return h;
}

const wire::IpUdpInfo kIp = [] {
  wire::IpUdpInfo ip;
  ip.src = wire::IpAddr::v4(192, 0, 2, 1);
  ip.dst = wire::IpAddr::v4(192, 0, 2, 2);
  ip.sport = 0xC000;
  return ip;
}();

void BM_EncodeWrite1K(benchmark::State& state) {
  std::vector<std::byte> payload(1024, std::byte{7}), out(wire::kMaxRoceLen);
  const wire::RoceHeaders h = write_first();
  for (auto _ : state) {
    auto n = wire::encode_roce(out, h, payload);
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_EncodeWrite1K);

void BM_ParseWrite1K(benchmark::State& state) {
  std::vector<std::byte> payload(1024, std::byte{7}), out(wire::kMaxRoceLen);
  const size_t n = *wire::encode_roce(out, write_first(), payload);
  const std::span<const std::byte> pkt(out.data(), n);
  for (auto _ : state) {
    auto p = wire::parse_roce(pkt);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseWrite1K);

void BM_Icrc1K(benchmark::State& state) {
  std::vector<std::byte> payload(1024, std::byte{7}), frame(wire::kMaxFrameLen);
  const size_t n = *wire::build_frame(frame, kIp, write_first(), payload, false);
  const std::span<const std::byte> ip(frame.data(), n);
  for (auto _ : state) benchmark::DoNotOptimize(wire::compute_icrc(ip, wire::kIpv4HeaderLen));
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_Icrc1K);

void BM_DecodeFrameWithIcrc1K(benchmark::State& state) {
  std::vector<std::byte> payload(1024, std::byte{7}), frame(wire::kMaxFrameLen);
  const size_t n = *wire::build_frame(frame, kIp, write_first(), payload, true);
  const std::span<const std::byte> f(frame.data(), n);
  for (auto _ : state) {
    auto d = wire::decode_frame(static_cast<int>(wire::LinkType::kEthernet), f);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeFrameWithIcrc1K);

// The engine on the simulated fabric: RC WRITEs of 64 bytes, one at a time,
// each until its completion (a WRITE Only and its ACK: two packets).
void BM_EngineWrite64OnTheFabric(benchmark::State& state) {
  testbed::Testbed bed(testbed::Net::kSim);
  std::string err;
  auto a = bed.make_device(wire::IpAddr::v4(10, 0, 0, 1), 1, {}, nullptr, nullptr, &err);
  auto b = bed.make_device(wire::IpAddr::v4(10, 0, 0, 2), 1, {}, nullptr, nullptr, &err);
  if (!a || !b) {
    state.SkipWithError(err.c_str());
    return;
  }
  std::vector<std::byte> abuf(4096), bbuf(4096);
  const unsigned acc = emu::access::kLocalWrite | emu::access::kRemoteWrite;
  auto side = [&](emu::Device& d, std::vector<std::byte>& buf, emu::Cq** cq, emu::Mr** mr) {
    emu::Pd* pd = *d.alloc_pd();
    *cq = *d.create_cq(256, nullptr, 0);
    *mr = *d.reg_mr(pd, buf.data(), buf.size(), 0x100000, acc);
    emu::QpInitAttr ia;
    ia.send_cq = ia.recv_cq = *cq;
    ia.cap = {64, 64, 1, 1, 64};
    return *d.create_qp(pd, ia);
  };
  emu::Cq *acq, *bcq;
  emu::Mr *amr, *bmr;
  emu::Qp* aq = side(*a, abuf, &acq, &amr);
  emu::Qp* bq = side(*b, bbuf, &bcq, &bmr);
  if (emu::connect_pair(*a, *aq, *b, *bq, {})) {
    state.SkipWithError("connect");
    return;
  }
  emu::Sge sge{amr->iova(), 64, amr->lkey()};
  emu::SendWr wr;
  wr.opcode = emu::WrOpcode::kRdmaWrite;
  wr.sg_list = std::span<const emu::Sge>(&sge, 1);
  wr.send_flags = emu::send_flags::kSignaled;
  wr.rdma = {bmr->iova(), bmr->rkey()};
  const std::vector<emu::Device*> devs{a.get(), b.get()};
  emu::Wc wc;
  for (auto _ : state) {
    size_t n = 0;
    (void)aq->post_send(std::span<const emu::SendWr>(&wr, 1), &n);
    while (acq->poll(std::span<emu::Wc>(&wc, 1)) == 0) bed.step(devs);
  }
  state.SetItemsProcessed(state.iterations() * 2);  // packets: the WRITE and its ACK
  state.counters["packets/s"] = benchmark::Counter(static_cast<double>(state.iterations() * 2),
                                                    benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineWrite64OnTheFabric);

// The engine fuzzer's per-input set-up (tests/fuzz/victim.h): a victim built
// for the input, or one victim reset before it (what fuzz_engine_recv does).
// Each runs the empty input and the memory check, so the difference is the
// set-up alone.
void BM_FuzzVictimBuilt(benchmark::State& state) {
  for (auto _ : state) {
    fuzz::Victim v;
    v.run({});
    v.check_memory();
  }
}
BENCHMARK(BM_FuzzVictimBuilt);

void BM_FuzzVictimReset(benchmark::State& state) {
  fuzz::Victim v;
  for (auto _ : state) {
    v.reset();
    v.run({});
    v.check_memory();
  }
}
BENCHMARK(BM_FuzzVictimReset);

}  // namespace

BENCHMARK_MAIN();
