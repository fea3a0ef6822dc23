// Memory windows (types 1 and 2: BIND_MW, LOCAL_INV, SEND_WITH_INV) and the
// SQE state of UC and UD QPs, on the simulated fabric. Every rejected remote
// access leaves the target bytes as they were.
#include <algorithm>
#include <cerrno>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic | access::kMwBind;
constexpr size_t kLen = 1 << 16;
std::error_code errc(int e) { return {e, std::generic_category()}; }

class MwTest : public ::testing::Test {
 protected:
  void connect(unsigned b_access = kAll) {
    a_ = env_.make_node(1, QpType::kRC, kLen, kAll);
    b_ = env_.make_node(2, QpType::kRC, kLen, b_access);
    ASSERT_TRUE(a_.qp && b_.qp);
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, {}));
    std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0xCC});
  }
  std::vector<Wc> wait(Cq* cq, size_t n) { return env_.wait_wcs(cq, n, {a_.dev.get(), b_.dev.get()}); }
  Wc one(Cq* cq) {
    auto v = wait(cq, 1);
    EXPECT_EQ(v.size(), 1u);
    return v.empty() ? Wc{} : v[0];
  }
  // Posts BIND_MW on n's QP and returns its completion. The new R_Key keeps the
  // window's index and takes key byte `key`.
  Wc bind(Node& n, Mw* mw, uint8_t key, Mr* mr, uint64_t addr, uint64_t len, unsigned acc) {
    SendWr wr = make_wr(WrOpcode::kBindMw, nullptr, 0, 900);
    wr.bind_mw = {mw, (mw->rkey() & ~0xFFu) | key, mr, addr, len, acc};
    EXPECT_FALSE(post_send(n.qp, wr));
    return one(n.scq);
  }
  // a writes len bytes of a pattern to raddr through rkey; its completion.
  Wc write(uint64_t raddr, uint32_t rkey, uint32_t len) {
    fill_pattern(a_.buf, 0, len, 9);
    Sge s{a_.addr(), len, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, 77);
    wr.rdma.remote_addr = raddr;
    wr.rdma.rkey = rkey;
    EXPECT_FALSE(post_send(a_.qp, wr));
    return one(a_.scq);
  }
  void expect_untouched() {
    EXPECT_EQ(std::count(b_.buf.begin(), b_.buf.end(), std::byte{0xCC}), static_cast<ptrdiff_t>(kLen))
        << "target bytes changed";
  }
  void expect_written(size_t off, size_t len) {
    EXPECT_TRUE(std::equal(b_.buf.begin() + off, b_.buf.begin() + off + len, a_.buf.begin()));
    const auto cc = [](std::byte x) { return x == std::byte{0xCC}; };
    EXPECT_TRUE(std::all_of(b_.buf.begin(), b_.buf.begin() + off, cc));
    EXPECT_TRUE(std::all_of(b_.buf.begin() + off + len, b_.buf.end(), cc));
  }

  Env env_{Net::kSim};
  Node a_, b_;
};

TEST_F(MwTest, DeviceAdvertisesWindows) {
  connect();
  const DeviceAttr& d = b_.dev->query_device();
  EXPECT_GT(d.max_mw, 0);
  EXPECT_TRUE(d.device_cap_flags & device_cap::kMemWindow);
  EXPECT_TRUE(d.device_cap_flags & device_cap::kMemWindowType2B);
}

TEST_F(MwTest, Type1BindThenWriteInsideAndOutsideTheWindow) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType1);
  const uint32_t old_rkey = mw->rkey();
  Wc wc = bind(b_, mw, static_cast<uint8_t>(old_rkey + 1), b_.mr, b_.addr() + 4096, 8192, access::kRemoteWrite);
  EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  EXPECT_EQ(wc.opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wc.wr_id, 900u);
  const uint32_t rkey = mw->rkey();
  EXPECT_EQ(rkey, (old_rkey & ~0xFFu) | ((old_rkey + 1) & 0xFF));
  EXPECT_NE(rkey, b_.mr->rkey());
  EXPECT_EQ(write(b_.addr() + 4096, rkey, 8192).status, WcStatus::kSuccess);
  expect_written(4096, 8192);
  // The old key is gone with the rebind.
  std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0xCC});
  EXPECT_EQ(write(b_.addr() + 4096, old_rkey, 16).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

TEST_F(MwTest, Type1WindowRangeIsChecked) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType1);
  ASSERT_EQ(bind(b_, mw, 7, b_.mr, b_.addr() + 4096, 8192, access::kRemoteWrite).status, WcStatus::kSuccess);
  // Inside the MR, one byte past the window.
  EXPECT_EQ(write(b_.addr() + 4096 + 8192 - 100, mw->rkey(), 101).status, WcStatus::kRemAccessErr);
  expect_untouched();
  EXPECT_EQ(b_.qp->state(), QpState::kErr);
}

TEST_F(MwTest, WindowAccessIsChecked) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType1);
  ASSERT_EQ(bind(b_, mw, 7, b_.mr, b_.addr(), kLen, access::kRemoteRead).status, WcStatus::kSuccess);
  // The MR grants remote write; the window does not.
  EXPECT_EQ(write(b_.addr(), mw->rkey(), 64).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

TEST_F(MwTest, ReadThroughAType1Window) {
  connect();
  fill_pattern(b_.buf, 0, kLen, 3);
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType1);
  ASSERT_EQ(bind(b_, mw, 7, b_.mr, b_.addr() + 100, 3000, access::kRemoteRead).status, WcStatus::kSuccess);
  Sge s{a_.addr(), 3000, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kRdmaRead, &s, 1, 5);
  wr.rdma.remote_addr = b_.addr() + 100;
  wr.rdma.rkey = mw->rkey();
  ASSERT_FALSE(post_send(a_.qp, wr));
  Wc wc = one(a_.scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  EXPECT_TRUE(std::equal(a_.buf.begin(), a_.buf.begin() + 3000, b_.buf.begin() + 100));
}

TEST_F(MwTest, Type1UnbindWithZeroLength) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType1);
  ASSERT_EQ(bind(b_, mw, 7, b_.mr, b_.addr(), kLen, access::kRemoteWrite).status, WcStatus::kSuccess);
  EXPECT_EQ(b_.dev->dereg_mr(b_.mr), errc(EBUSY));  // a window is bound to it
  ASSERT_EQ(bind(b_, mw, 8, nullptr, 0, 0, 0).status, WcStatus::kSuccess);
  EXPECT_EQ(write(b_.addr(), mw->rkey(), 64).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

TEST_F(MwTest, Type2BindSendWithInvThenAccessFails) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType2);
  ASSERT_EQ(bind(b_, mw, 0x42, b_.mr, b_.addr(), 4096, access::kRemoteWrite).status, WcStatus::kSuccess);
  const uint32_t rkey = mw->rkey();
  EXPECT_EQ(rkey & 0xFF, 0x42u);
  EXPECT_EQ(write(b_.addr(), rkey, 4096).status, WcStatus::kSuccess);
  expect_written(0, 4096);
  EXPECT_EQ(b_.dev->dealloc_pd(b_.pd), errc(EBUSY));

  // SEND_WITH_INV: the receive reports the R_Key, and the window is free after it.
  ASSERT_FALSE(post_recv(b_.qp, b_.addr() + 8192, 256, b_.mr->lkey(), 31));
  Sge s{a_.addr(), 32, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kSendWithInv, &s, 1, 32);
  wr.invalidate_rkey = rkey;
  ASSERT_FALSE(post_send(a_.qp, wr));
  Wc sw = one(a_.scq);
  EXPECT_EQ(sw.status, WcStatus::kSuccess);
  EXPECT_EQ(sw.opcode, WcOpcode::kSend);
  Wc rw = one(b_.rcq);
  EXPECT_EQ(rw.status, WcStatus::kSuccess);
  EXPECT_EQ(rw.opcode, WcOpcode::kRecv);
  EXPECT_EQ(rw.wc_flags & wc_flags::kWithInv, wc_flags::kWithInv);
  EXPECT_EQ(rw.imm_data, rkey);  // ibv_wc.invalidated_rkey
  EXPECT_EQ(rw.byte_len, 32u);

  std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0xCC});
  EXPECT_EQ(write(b_.addr(), rkey, 64).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

TEST_F(MwTest, Type2LocalInvalidate) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType2);
  ASSERT_EQ(bind(b_, mw, 1, b_.mr, b_.addr(), kLen, access::kRemoteWrite).status, WcStatus::kSuccess);
  SendWr inv = make_wr(WrOpcode::kLocalInv, nullptr, 0, 44);
  inv.invalidate_rkey = mw->rkey();
  ASSERT_FALSE(post_send(b_.qp, inv));
  Wc wc = one(b_.scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kLocalInv);
  EXPECT_EQ(b_.dev->dereg_mr(b_.mr), std::error_code());  // nothing bound any more
  b_.mr = nullptr;
  EXPECT_EQ(write(b_.addr(), mw->rkey(), 64).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

TEST_F(MwTest, Type2ZeroBased) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType2);
  ASSERT_EQ(bind(b_, mw, 1, b_.mr, b_.addr() + 1000, 2000, access::kRemoteWrite | access::kZeroBased).status,
            WcStatus::kSuccess);
  EXPECT_EQ(write(16, mw->rkey(), 100).status, WcStatus::kSuccess);  // offset 16 in the window
  expect_written(1016, 100);
}

TEST_F(MwTest, Type2OnAnotherQpIsRemoteAccessError) {
  connect();
  // A second QP of b, same PD: the window is bound to it, not to the connected one.
  QpInitAttr ia;
  ia.send_cq = b_.scq;
  ia.recv_cq = b_.rcq;
  ia.qp_type = QpType::kRC;
  ia.cap = {16, 16, 1, 1, 0};
  Qp* other = *b_.dev->create_qp(b_.pd, ia);
  Node c;
  c.qp = other;
  c.scq = b_.scq;
  // Bring it to RTS looking at a (it never talks): enough to post a bind.
  ConnectOptions o;
  Gid g{};
  ASSERT_FALSE(a_.dev->query_gid(kPortNum, 0, &g));
  ASSERT_FALSE(qp_to_init(*other, o));
  ASSERT_FALSE(qp_to_rtr(*other, g, 0x999, 0, o));
  ASSERT_FALSE(qp_to_rts(*other, 0, o));
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType2);
  ASSERT_EQ(bind(c, mw, 1, b_.mr, b_.addr(), kLen, access::kRemoteWrite).status, WcStatus::kSuccess);
  EXPECT_EQ(write(b_.addr(), mw->rkey(), 64).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

TEST_F(MwTest, DestroyingItsQpFreesAType2Window) {
  connect();
  QpInitAttr ia;
  ia.send_cq = b_.scq;
  ia.recv_cq = b_.rcq;
  ia.qp_type = QpType::kRC;
  ia.cap = {16, 16, 1, 1, 0};
  Qp* other = *b_.dev->create_qp(b_.pd, ia);
  ConnectOptions o;
  Gid g{};
  ASSERT_FALSE(a_.dev->query_gid(kPortNum, 0, &g));
  ASSERT_FALSE(qp_to_init(*other, o));
  ASSERT_FALSE(qp_to_rtr(*other, g, 0x999, 0, o));
  ASSERT_FALSE(qp_to_rts(*other, 0, o));
  Node c;
  c.qp = other;
  c.scq = b_.scq;
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType2);
  ASSERT_EQ(bind(c, mw, 1, b_.mr, b_.addr(), kLen, access::kRemoteWrite).status, WcStatus::kSuccess);
  EXPECT_EQ(b_.dev->dereg_mr(b_.mr), errc(EBUSY));
  ASSERT_FALSE(b_.dev->destroy_qp(other));
  // Free again: bindable by the connected QP.
  EXPECT_EQ(bind(b_, mw, 2, b_.mr, b_.addr(), kLen, access::kRemoteWrite).status, WcStatus::kSuccess);
  EXPECT_EQ(write(b_.addr(), mw->rkey(), 64).status, WcStatus::kSuccess);
  expect_written(0, 64);
}

// A failed bind on UC is a local send error: SQE, not ERR.
TEST(MwUc, FailedBindMovesAUcQpToSqe) {
  Env env{Net::kSim};
  Node a = env.make_node(1, QpType::kUC, 4096, kAll), b = env.make_node(2, QpType::kUC, 4096, kAll);
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, {}));
  Mw* mw = *a.dev->alloc_mw(a.pd, MwType::kType2);
  SendWr wr = make_wr(WrOpcode::kBindMw, nullptr, 0, 5);
  wr.bind_mw = {mw, mw->rkey(), a.mr, a.addr(), 8192, access::kRemoteWrite};  // past the MR
  ASSERT_FALSE(post_send(a.qp, wr));
  auto w = env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].status, WcStatus::kMwBindErr);
  EXPECT_EQ(w[0].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(a.qp->state(), QpState::kSqe);
  // UD has no memory-window operations.
  Node u = env.make_node(3, QpType::kUD, 4096, kAll);
  ConnectOptions o;
  Gid g{};
  ASSERT_FALSE(b.dev->query_gid(kPortNum, 0, &g));
  ASSERT_FALSE(qp_to_init(*u.qp, o));
  ASSERT_FALSE(qp_to_rtr(*u.qp, g, 0, 0, o));
  ASSERT_FALSE(qp_to_rts(*u.qp, 0, o));
  ASSERT_EQ(u.qp->state(), QpState::kRts);
  SendWr inv = make_wr(WrOpcode::kLocalInv, nullptr, 0, 6);
  EXPECT_EQ(post_send(u.qp, inv), errc(EINVAL));
}

TEST_F(MwTest, SendWithInvOfAnMrKeyIsInvalidRequest) {
  connect();
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 256, b_.mr->lkey(), 31));
  Sge s{a_.addr(), 32, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kSendWithInv, &s, 1, 32);
  wr.invalidate_rkey = b_.mr->rkey();  // an MR: nothing to invalidate
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRemInvReqErr);
  Wc rw = one(b_.rcq);
  EXPECT_EQ(rw.status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(rw.wr_id, 31u);
  EXPECT_EQ(b_.qp->state(), QpState::kErr);
}

// Each bind that IBTA / rxe refuse: MW_BIND_ERR, the QP in ERR, the window unbound.
struct BadBind {
  const char* name;
  MwType type;
  unsigned mr_access;      // b's MR
  bool other_pd;           // the window on another PD than the QP
  uint64_t off, len;       // the window within the MR
  unsigned acc;
};

class MwBadBindTest : public MwTest, public ::testing::WithParamInterface<BadBind> {};

TEST_P(MwBadBindTest, BindFails) {
  const BadBind& p = GetParam();
  connect(p.mr_access);
  Pd* pd = b_.pd;
  if (p.other_pd) pd = *b_.dev->alloc_pd();
  Mw* mw = *b_.dev->alloc_mw(pd, p.type);
  const uint32_t before = mw->rkey();
  Wc wc = bind(b_, mw, static_cast<uint8_t>(before + 1), b_.mr, b_.addr() + p.off, p.len, p.acc);
  EXPECT_EQ(wc.status, WcStatus::kMwBindErr) << to_string(wc.status);
  EXPECT_EQ(wc.opcode, WcOpcode::kBindMw);
  EXPECT_EQ(b_.qp->state(), QpState::kErr);
  EXPECT_EQ(mw->rkey(), before);
}

INSTANTIATE_TEST_SUITE_P(
    Mw, MwBadBindTest,
    ::testing::Values(
        BadBind{"MrWithoutBindAccess", MwType::kType1, kAll & ~access::kMwBind, false, 0, 4096, access::kRemoteRead},
        BadBind{"ZeroBasedMr", MwType::kType2, kAll | access::kZeroBased, false, 0, 4096, access::kRemoteRead},
        BadBind{"WindowOnAnotherPd", MwType::kType2, kAll, true, 0, 4096, access::kRemoteRead},
        BadBind{"Type1OnAnotherPd", MwType::kType1, kAll, true, 0, 4096, access::kRemoteRead},
        BadBind{"PastTheMr", MwType::kType2, kAll, false, kLen - 100, 4096, access::kRemoteRead},
        BadBind{"RemoteWriteWithoutLocalWrite", MwType::kType2,
                access::kRemoteRead | access::kMwBind, false, 0, 4096, access::kRemoteWrite},
        BadBind{"Type1ZeroBased", MwType::kType1, kAll, false, 0, 4096, access::kRemoteRead | access::kZeroBased},
        BadBind{"Type2ZeroLength", MwType::kType2, kAll, false, 0, 0, access::kRemoteRead}),
    [](const auto& i) { return std::string(i.param.name); });

TEST_F(MwTest, LocalInvOfAType1WindowFails) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType1);
  SendWr inv = make_wr(WrOpcode::kLocalInv, nullptr, 0, 44);
  inv.invalidate_rkey = mw->rkey();
  ASSERT_FALSE(post_send(b_.qp, inv));
  Wc wc = one(b_.scq);
  EXPECT_EQ(wc.status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(wc.opcode, WcOpcode::kLocalInv);
}

TEST_F(MwTest, BindIsRefusedAtPostWithoutAWindow) {
  connect();
  SendWr wr = make_wr(WrOpcode::kBindMw, nullptr, 0, 1);
  EXPECT_EQ(post_send(b_.qp, wr), errc(EINVAL));
  EXPECT_EQ(b_.dev->alloc_mw(b_.pd, static_cast<MwType>(3)).error(), errc(EINVAL));
}

TEST_F(MwTest, DeallocUnbinds) {
  connect();
  Mw* mw = *b_.dev->alloc_mw(b_.pd, MwType::kType2);
  ASSERT_EQ(bind(b_, mw, 1, b_.mr, b_.addr(), kLen, access::kRemoteWrite).status, WcStatus::kSuccess);
  const uint32_t rkey = mw->rkey();
  EXPECT_FALSE(b_.dev->dealloc_mw(mw));
  EXPECT_EQ(b_.dev->dealloc_mw(mw), errc(EINVAL));
  EXPECT_FALSE(b_.dev->dereg_mr(b_.mr));
  b_.mr = nullptr;
  EXPECT_EQ(write(b_.addr(), rkey, 64).status, WcStatus::kRemAccessErr);
  expect_untouched();
}

// ---- SQE (IBTA 10.3.1): UC and UD ----

class SqeTest : public ::testing::TestWithParam<QpType> {
 protected:
  void SetUp() override {
    a_ = env_.make_node(1, GetParam(), kLen, kAll);
    b_ = env_.make_node(2, GetParam(), kLen, kAll);
    ASSERT_TRUE(a_.qp && b_.qp);
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, {}));
    if (GetParam() == QpType::kUD) {
      AhAttr aa;
      ASSERT_FALSE(b_.dev->query_gid(kPortNum, 0, &aa.dgid));
      ah_ = *a_.dev->create_ah(a_.pd, aa);
    }
  }
  SendWr send(const Sge& s, uint64_t id) {
    SendWr wr = make_wr(WrOpcode::kSend, &s, 1, id);
    if (ah_) wr.ud = {ah_, b_.qp->qp_num(), 0x11111111};
    return wr;
  }
  std::vector<Wc> wait(Cq* cq, size_t n) { return env_.wait_wcs(cq, n, {a_.dev.get(), b_.dev.get()}); }
  Env env_{Net::kSim};
  Node a_, b_;
  Ah* ah_ = nullptr;
};

TEST_P(SqeTest, LocalErrorMovesToSqeAndBackToRts) {
  const size_t grh = GetParam() == QpType::kUD ? 40 : 0;
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 512, b_.mr->lkey(), 70));
  // a receive posted on a (its RQ keeps working in SQE)
  ASSERT_FALSE(post_recv(a_.qp, a_.addr() + 8192, 512, a_.mr->lkey(), 80));
  fill_pattern(a_.buf, 0, 64, 1);
  Sge bad{a_.addr(), 64, a_.mr->lkey() ^ 0x100};
  Sge good{a_.addr(), 64, a_.mr->lkey()};
  SendWr wrs[2] = {send(bad, 1), send(good, 2)};
  size_t n = 0;
  ASSERT_FALSE(a_.qp->post_send(std::span<const SendWr>(wrs, 2), &n));
  auto wcs = wait(a_.scq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(a_.qp->state(), QpState::kSqe);
  // Posting in SQE: flushed at once.
  ASSERT_FALSE(post_send(a_.qp, send(good, 3)));
  auto fl = wait(a_.scq, 1);
  ASSERT_EQ(fl.size(), 1u);
  EXPECT_EQ(fl[0].status, WcStatus::kWrFlushErr);
  // Nothing reached b.
  Wc none[1];
  EXPECT_EQ(b_.rcq->poll(none), 0);
  // The receive side of a still works in SQE.
  SendWr back = make_wr(WrOpcode::kSend, nullptr, 0, 9);
  Sge bs{b_.addr() + 4096, 16, b_.mr->lkey()};
  back.sg_list = std::span<const Sge>(&bs, 1);
  if (ah_) {
    AhAttr aa;
    ASSERT_FALSE(a_.dev->query_gid(kPortNum, 0, &aa.dgid));
    back.ud = {*b_.dev->create_ah(b_.pd, aa), a_.qp->qp_num(), 0x11111111};
  }
  ASSERT_FALSE(post_send(b_.qp, back));
  auto ar = wait(a_.rcq, 1);
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0].status, WcStatus::kSuccess);
  EXPECT_EQ(ar[0].byte_len, 16 + grh);
  // SQE -> RTS: sending works again.
  QpAttr at;
  at.qp_state = QpState::kRts;
  ASSERT_FALSE(a_.qp->modify(at, qp_attr::kState));
  EXPECT_EQ(a_.qp->state(), QpState::kRts);
  ASSERT_FALSE(post_send(a_.qp, send(good, 4)));
  auto ok = wait(a_.scq, 1);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].status, WcStatus::kSuccess);
  auto br = wait(b_.rcq, 1);
  ASSERT_EQ(br.size(), 1u);
  EXPECT_EQ(br[0].status, WcStatus::kSuccess);
  EXPECT_EQ(br[0].byte_len, 64 + grh);
  EXPECT_TRUE(std::equal(a_.buf.begin(), a_.buf.begin() + 64, b_.buf.begin() + grh));
}

TEST(SqeRc, RcLocalErrorStillGoesToErr) {
  Env env{Net::kSim};
  Node a = env.make_node(1, QpType::kRC, 4096, kAll), b = env.make_node(2, QpType::kRC, 4096, kAll);
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, {}));
  Sge bad{a.addr(), 64, a.mr->lkey() ^ 0x100};
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &bad, 1, 1)));
  auto w = env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(a.qp->state(), QpState::kErr);
}

INSTANTIATE_TEST_SUITE_P(UcUd, SqeTest, ::testing::Values(QpType::kUC, QpType::kUD),
                         [](const auto& i) { return std::string(to_string(i.param)); });

}  // namespace
}  // namespace rocelab::emu::test
