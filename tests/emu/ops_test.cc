// Every operation between two devices, on both transports, data checked byte
// for byte.
#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAllAccess = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                                access::kRemoteAtomic;

struct Param {
  Net net;
  QpType type;
};

class OpsTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    env_ = std::make_unique<Env>(GetParam().net);
    a_ = env_->make_node(1, GetParam().type, kLen, kAllAccess);
    b_ = env_->make_node(2, GetParam().type, kLen, kAllAccess);
    ASSERT_TRUE(a_.qp && b_.qp);
    ConnectOptions o;
    o.psn_a = 0xFFFFF0;  // wraps the 24-bit PSN during the test
    o.psn_b = 100;
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, o));
  }
  std::vector<Wc> wait(Node&, Cq* cq, size_t k) { return env_->wait_wcs(cq, k, {a_.dev.get(), b_.dev.get()}); }
  static constexpr size_t kLen = 1 << 17;
  std::unique_ptr<Env> env_;
  Node a_, b_;
};

TEST_P(OpsTest, SendOfManySizesArrivesIntact) {
  const bool ud = GetParam().type == QpType::kUD;
  const std::vector<uint32_t> sizes = ud ? std::vector<uint32_t>{0, 1, 100, 1024}
                                         : std::vector<uint32_t>{0, 1, 1023, 1024, 1025, 4096, 65536};
  Ah* ah = nullptr;
  if (ud) {
    AhAttr aa;
    ASSERT_FALSE(b_.dev->query_gid(1, 0, &aa.dgid));
    ah = *a_.dev->create_ah(a_.pd, aa);
  }
  const uint32_t grh = ud ? 40 : 0;
  for (uint32_t sz : sizes) {
    fill_pattern(a_.buf, 0, sz, static_cast<uint8_t>(sz));
    std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0});
    ASSERT_FALSE(post_recv(b_.qp, b_.addr(), sz + grh + 16, b_.mr->lkey(), 7));
    Sge s{a_.addr(), sz, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kSendWithImm, &s, 1, sz);
    wr.imm_data = 0x11223344;
    if (ud) {
      wr.ud.ah = ah;
      wr.ud.remote_qpn = b_.qp->qp_num();
      wr.ud.remote_qkey = 0x11111111;
    }
    ASSERT_FALSE(post_send(a_.qp, wr));
    auto sc = wait(a_, a_.scq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
    EXPECT_EQ(sc[0].wr_id, sz);
    auto rc = wait(b_, b_.rcq, 1);
    ASSERT_EQ(rc.size(), 1u) << "size " << sz;
    EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
    EXPECT_EQ(rc[0].byte_len, sz + grh);
    EXPECT_EQ(rc[0].imm_data, 0x11223344u);
    EXPECT_TRUE(rc[0].wc_flags & wc_flags::kWithImm);
    EXPECT_EQ(rc[0].src_qp, a_.qp->qp_num());
    EXPECT_EQ(rc[0].qp_num, b_.qp->qp_num());
    EXPECT_EQ(std::memcmp(b_.buf.data() + grh, a_.buf.data(), sz), 0) << "size " << sz;
    if (ud) {
      EXPECT_TRUE(rc[0].wc_flags & wc_flags::kGrh);
    }
  }
}

TEST_P(OpsTest, RdmaWriteLandsExactly) {
  if (GetParam().type == QpType::kUD) GTEST_SKIP() << "UD has no RDMA";
  for (uint32_t sz : {1u, 1024u, 3000u, 65536u}) {
    fill_pattern(a_.buf, 0, sz, 3);
    std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0xEE});
    Sge s{a_.addr(), sz, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, 1);
    wr.rdma.remote_addr = b_.addr() + 8;
    wr.rdma.rkey = b_.mr->rkey();
    ASSERT_FALSE(post_send(a_.qp, wr));
    auto sc = wait(a_, a_.scq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaWrite);
    if (GetParam().type == QpType::kUC) wait(b_, b_.rcq, 0);
    // UC completes at transmit: drive until the data is there.
    for (int i = 0; i < 100 && std::memcmp(b_.buf.data() + 8, a_.buf.data(), sz) != 0; ++i)
      env_->step({a_.dev.get(), b_.dev.get()});
    EXPECT_EQ(std::memcmp(b_.buf.data() + 8, a_.buf.data(), sz), 0);
    EXPECT_EQ(b_.buf[7], std::byte{0xEE});
    EXPECT_EQ(b_.buf[8 + sz], std::byte{0xEE});
  }
}

TEST_P(OpsTest, RdmaWriteWithImmConsumesAReceive) {
  if (GetParam().type == QpType::kUD) GTEST_SKIP() << "UD has no RDMA";
  fill_pattern(a_.buf, 0, 5000, 9);
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 0, b_.mr->lkey(), 42));
  Sge s{a_.addr(), 5000, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kRdmaWriteWithImm, &s, 1, 1);
  wr.imm_data = 0xA1B2C3D4;
  wr.rdma.remote_addr = b_.addr() + 1000;
  wr.rdma.rkey = b_.mr->rkey();
  ASSERT_FALSE(post_send(a_.qp, wr));
  auto rc = wait(b_, b_.rcq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[0].wr_id, 42u);
  EXPECT_EQ(rc[0].imm_data, 0xA1B2C3D4u);
  EXPECT_EQ(rc[0].byte_len, 5000u);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 1000, a_.buf.data(), 5000), 0);
}

TEST_P(OpsTest, RdmaReadFetchesExactly) {
  if (GetParam().type != QpType::kRC) GTEST_SKIP() << "READ is RC only";
  for (uint32_t sz : {0u, 8u, 1024u, 4097u, 65536u}) {
    fill_pattern(b_.buf, 0, sz, 77);
    std::fill(a_.buf.begin(), a_.buf.end(), std::byte{0});
    Sge s{a_.addr() + 16, sz, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaRead, &s, 1, sz);
    wr.rdma.remote_addr = b_.addr();
    wr.rdma.rkey = b_.mr->rkey();
    ASSERT_FALSE(post_send(a_.qp, wr));
    auto sc = wait(a_, a_.scq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaRead);
    EXPECT_EQ(sc[0].byte_len, sz);
    EXPECT_EQ(std::memcmp(a_.buf.data() + 16, b_.buf.data(), sz), 0);
    EXPECT_EQ(a_.buf[16 + sz], std::byte{0});
  }
}

TEST_P(OpsTest, AtomicsReturnTheOriginalAndUpdate) {
  if (GetParam().type != QpType::kRC) GTEST_SKIP() << "atomics are RC only";
  uint64_t v = 1000;
  std::memcpy(b_.buf.data() + 64, &v, 8);
  Sge s{a_.addr(), 8, a_.mr->lkey()};
  SendWr fa = make_wr(WrOpcode::kAtomicFetchAndAdd, &s, 1, 1);
  fa.atomic.remote_addr = b_.addr() + 64;
  fa.atomic.rkey = b_.mr->rkey();
  fa.atomic.compare_add = 5;
  ASSERT_FALSE(post_send(a_.qp, fa));
  auto sc = wait(a_, a_.scq, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kFetchAdd);
  uint64_t got = 0;
  std::memcpy(&got, a_.buf.data(), 8);
  EXPECT_EQ(got, 1000u);
  std::memcpy(&got, b_.buf.data() + 64, 8);
  EXPECT_EQ(got, 1005u);

  SendWr cs = make_wr(WrOpcode::kAtomicCmpAndSwp, &s, 1, 2);
  cs.atomic.remote_addr = b_.addr() + 64;
  cs.atomic.rkey = b_.mr->rkey();
  cs.atomic.compare_add = 1005;
  cs.atomic.swap = 0xDEADBEEFCAFEull;
  ASSERT_FALSE(post_send(a_.qp, cs));
  sc = wait(a_, a_.scq, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kCompSwap);
  std::memcpy(&got, a_.buf.data(), 8);
  EXPECT_EQ(got, 1005u);
  std::memcpy(&got, b_.buf.data() + 64, 8);
  EXPECT_EQ(got, 0xDEADBEEFCAFEull);
  // A failing compare leaves memory alone and still returns the original.
  ASSERT_FALSE(post_send(a_.qp, cs));
  sc = wait(a_, a_.scq, 1);
  std::memcpy(&got, a_.buf.data(), 8);
  EXPECT_EQ(got, 0xDEADBEEFCAFEull);
  std::memcpy(&got, b_.buf.data() + 64, 8);
  EXPECT_EQ(got, 0xDEADBEEFCAFEull);
}

TEST_P(OpsTest, ScatterGatherAndInline) {
  if (GetParam().type == QpType::kUD) GTEST_SKIP();
  fill_pattern(a_.buf, 0, 3000, 1);
  Sge sg[3] = {{a_.addr() + 0, 100, a_.mr->lkey()},
               {a_.addr() + 1000, 2000, a_.mr->lkey()},
               {a_.addr() + 200, 50, a_.mr->lkey()}};
  Sge rsg[2] = {{b_.addr() + 10, 1000, b_.mr->lkey()}, {b_.addr() + 5000, 2000, b_.mr->lkey()}};
  RecvWr r;
  r.wr_id = 5;
  r.sg_list = std::span<const Sge>(rsg, 2);
  size_t n = 0;
  ASSERT_FALSE(b_.qp->post_recv(std::span<const RecvWr>(&r, 1), &n));
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, sg, 3, 1)));
  auto rc = wait(b_, b_.rcq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 2150u);
  std::vector<std::byte> expect;
  for (const Sge& s : sg) {
    auto* p = reinterpret_cast<const std::byte*>(s.addr);
    expect.insert(expect.end(), p, p + s.length);
  }
  EXPECT_EQ(std::memcmp(b_.buf.data() + 10, expect.data(), 1000), 0);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 5000, expect.data() + 1000, 1150), 0);

  // Inline: the source buffer may change right after post_send returns.
  std::vector<std::byte> tmp(40, std::byte{0x5A});
  Sge is{reinterpret_cast<uint64_t>(tmp.data()), 40, 0};
  SendWr iw = make_wr(WrOpcode::kRdmaWrite, &is, 1, 2);
  iw.send_flags |= send_flags::kInline;
  iw.rdma.remote_addr = b_.addr() + 20000;
  iw.rdma.rkey = b_.mr->rkey();
  ASSERT_FALSE(post_send(a_.qp, iw));
  std::fill(tmp.begin(), tmp.end(), std::byte{0});
  wait(a_, a_.scq, 2);
  for (int i = 0; i < 100 && b_.buf[20000] != std::byte{0x5A}; ++i) env_->step({a_.dev.get(), b_.dev.get()});
  for (int i = 0; i < 40; ++i) EXPECT_EQ(b_.buf[20000 + i], std::byte{0x5A});
}

INSTANTIATE_TEST_SUITE_P(All, OpsTest,
                         ::testing::Values(Param{Net::kSim, QpType::kRC}, Param{Net::kSim, QpType::kUC},
                                           Param{Net::kSim, QpType::kUD}, Param{Net::kUdp, QpType::kRC},
                                           Param{Net::kUdp, QpType::kUC}, Param{Net::kUdp, QpType::kUD}),
                         [](const auto& p) {
                           return std::string(to_string(p.param.net)) + "_" +
                                  std::string(to_string(p.param.type));
                         });

}  // namespace
}  // namespace rocelab::emu::test
