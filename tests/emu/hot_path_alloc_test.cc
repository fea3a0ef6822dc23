// The engine's hot path allocates nothing in steady state: posting, building
// and sending packets, receiving, executing, acknowledging and completing
// (simulated fabric, RC SEND / WRITE / READ / atomic of 64 KiB).
#include <gtest/gtest.h>

#include "tests/emu/pair.h"
#include "tests/emu/transport/alloc_counter.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic;

// Polls cq until one completion arrived, driving the fabric; no allocation here.
bool wait_one(SimFabric& f, Device& a, Device& b, Cq* cq, Wc* wc) {
  for (int i = 0; i < 100000; ++i) {
    if (cq->poll(std::span<Wc>(wc, 1)) == 1) return true;
    if (a.progress() + b.progress() == 0) f.advance(Nanos::max());
  }
  return false;
}

TEST(HotPath, SteadyStateTrafficAllocatesNothing) {
  Env env(Net::kSim);
  Node a = env.make_node(1, QpType::kRC, 1 << 17, kAll);
  Node b = env.make_node(2, QpType::kRC, 1 << 17, kAll);
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
  SimFabric& f = *env.fabric();
  Sge s{a.addr(), 65536, a.mr->lkey()};
  Sge s8{a.addr(), 8, a.mr->lkey()};
  Sge r{b.addr(), 65536, b.mr->lkey()};
  RecvWr rw;
  rw.sg_list = std::span<const Sge>(&r, 1);
  SendWr send = make_wr(WrOpcode::kSend, &s, 1, 1);
  SendWr write = make_wr(WrOpcode::kRdmaWrite, &s, 1, 2);
  write.rdma = {b.addr(), b.mr->rkey()};
  SendWr read = make_wr(WrOpcode::kRdmaRead, &s, 1, 3);
  read.rdma = {b.addr(), b.mr->rkey()};
  SendWr fadd = make_wr(WrOpcode::kAtomicFetchAndAdd, &s8, 1, 4);
  fadd.atomic.remote_addr = b.addr();
  fadd.atomic.rkey = b.mr->rkey();
  fadd.atomic.compare_add = 1;
  auto round = [&] {
    Wc wc;
    bool ok = !b.qp->post_recv(std::span<const RecvWr>(&rw, 1), nullptr);
    for (const SendWr* wr : {&send, &write, &read, &fadd}) {
      ok = ok && !a.qp->post_send(std::span<const SendWr>(wr, 1), nullptr);
      ok = ok && wait_one(f, *a.dev, *b.dev, a.scq, &wc) && wc.status == WcStatus::kSuccess;
    }
    return ok && wait_one(f, *a.dev, *b.dev, b.rcq, &wc) && wc.status == WcStatus::kSuccess;
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(round());  // warm up
  const long before = rocelab::test::g_allocations.load();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(round());
  EXPECT_EQ(rocelab::test::g_allocations.load() - before, 0);
}

}  // namespace
}  // namespace rocelab::emu::test
