// XRC (IBTA XRC annex) in the engine: an initiator QP on one device sends to a
// target QP on another, each message to the XRC SRQ its XRCETH names; the
// receive completes on that SRQ's CQ with the target's QP number. Failures: an
// SRQ number that names nothing, an SRQ of another XRC domain; the objects'
// rules (what each QP type takes, domains shared by file and closed last).
#include <gtest/gtest.h>

#include <cerrno>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;

// A: the initiator (PD, send CQ, XRC_INI QP, a buffer). B: the target (PD, an
// XRC domain with two XRC SRQs, each on its own CQ, a second domain with one
// SRQ, the XRC_TGT QP, a buffer).
struct XrcPair {
  Env env{Net::kSim};
  std::unique_ptr<Device> a, b;
  Pd *pa = nullptr, *pb = nullptr;
  Cq *a_scq = nullptr, *b_cq1 = nullptr, *b_cq2 = nullptr, *b_cq3 = nullptr;
  Xrcd *xrcd = nullptr, *other = nullptr;
  Srq *srq1 = nullptr, *srq2 = nullptr, *foreign = nullptr;
  Qp *ini = nullptr, *tgt = nullptr;
  std::vector<std::byte> abuf = std::vector<std::byte>(16384), bbuf = std::vector<std::byte>(16384);
  Mr *amr = nullptr, *bmr = nullptr;
  ConnectOptions opts;

  uint64_t aaddr() const { return reinterpret_cast<uint64_t>(abuf.data()); }
  uint64_t baddr() const { return reinterpret_cast<uint64_t>(bbuf.data()); }

  void make() {
    a = env.make_device(1);
    b = env.make_device(2);
    ASSERT_TRUE(a && b);
    pa = *a->alloc_pd();
    pb = *b->alloc_pd();
    a_scq = *a->create_cq(64, nullptr, 0);
    b_cq1 = *b->create_cq(64, nullptr, 0);
    b_cq2 = *b->create_cq(64, nullptr, 0);
    b_cq3 = *b->create_cq(64, nullptr, 0);
    amr = *a->reg_mr(pa, abuf.data(), abuf.size(), aaddr(), kAll);
    bmr = *b->reg_mr(pb, bbuf.data(), bbuf.size(), baddr(), kAll);
    xrcd = *b->open_xrcd(0, true, false);
    other = *b->open_xrcd(0, true, false);
    SrqAttr sa{16, 2, 0};
    srq1 = *b->create_xrc_srq(pb, xrcd, b_cq1, sa);
    srq2 = *b->create_xrc_srq(pb, xrcd, b_cq2, sa);
    foreign = *b->create_xrc_srq(pb, other, b_cq3, sa);
    QpInitAttr ia;
    ia.qp_type = QpType::kXrcIni;
    ia.send_cq = a_scq;
    ia.cap = {16, 0, 2, 0, 64};
    auto i = a->create_qp(pa, ia);
    ASSERT_TRUE(i.ok()) << i.error().message();
    ini = *i;
    QpInitAttr ta;
    ta.qp_type = QpType::kXrcTgt;
    ta.xrcd = xrcd;
    auto t = b->create_qp(nullptr, ta);
    ASSERT_TRUE(t.ok()) << t.error().message();
    tgt = *t;
    ASSERT_FALSE(connect_pair(*a, *ini, *b, *tgt, opts));
    ASSERT_EQ(ini->state(), QpState::kRts);
    ASSERT_EQ(tgt->state(), QpState::kRts);
  }
  void post_srq(Srq* srq, uint64_t off, uint32_t len, uint64_t wr_id) {
    Sge s{baddr() + off, len, bmr->lkey()};
    RecvWr wr{wr_id, std::span<const Sge>(&s, 1)};
    ASSERT_FALSE(srq->post_recv(std::span<const RecvWr>(&wr, 1), nullptr));
  }
  std::error_code send(WrOpcode op, uint64_t off, uint32_t len, uint32_t srqn, uint64_t wr_id) {
    Sge s{aaddr() + off, len, amr->lkey()};
    SendWr wr = make_wr(op, &s, 1, wr_id);
    wr.xrc_remote_srqn = srqn;
    return post_send(ini, wr);
  }
  std::vector<Wc> wait(Cq* cq, size_t n) { return env.wait_wcs(cq, n, {a.get(), b.get()}); }
  // Drives both devices a while without expecting anything.
  void settle() {
    for (int i = 0; i < 50; ++i) env.step({a.get(), b.get()});
  }
};

TEST(Xrc, EachSendLandsInTheSrqItsXrcethNamesAndCompletesOnThatSrqsCq) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  ASSERT_NE(p.srq1->srq_num(), p.srq2->srq_num());
  EXPECT_EQ(p.srq1->type(), SrqType::kXrc);
  EXPECT_EQ(p.srq1->xrcd(), p.xrcd);
  EXPECT_EQ(p.srq1->cq(), p.b_cq1);
  p.post_srq(p.srq1, 0, 4096, 11);
  p.post_srq(p.srq2, 4096, 4096, 22);
  fill_pattern(p.abuf, 0, 3000, 5);      // three packets at MTU 1024
  fill_pattern(p.abuf, 4096, 700, 9);
  ASSERT_FALSE(p.send(WrOpcode::kSend, 0, 3000, p.srq1->srq_num(), 1));
  ASSERT_FALSE(p.send(WrOpcode::kSendWithImm, 4096, 700, p.srq2->srq_num(), 2));
  auto s = p.wait(p.a_scq, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].status, WcStatus::kSuccess);
  EXPECT_EQ(s[1].status, WcStatus::kSuccess);
  auto r1 = p.wait(p.b_cq1, 1);
  auto r2 = p.wait(p.b_cq2, 1);
  ASSERT_EQ(r1.size(), 1u);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r1[0].status, WcStatus::kSuccess);
  EXPECT_EQ(r1[0].wr_id, 11u);
  EXPECT_EQ(r1[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(r1[0].byte_len, 3000u);
  EXPECT_EQ(r1[0].qp_num, p.tgt->qp_num());  // the target QP, as xsrq_pingpong's find_qp expects
  EXPECT_EQ(r1[0].src_qp, p.ini->qp_num());
  EXPECT_EQ(r2[0].wr_id, 22u);
  EXPECT_EQ(r2[0].byte_len, 700u);
  EXPECT_TRUE(r2[0].wc_flags & wc_flags::kWithImm);
  EXPECT_EQ(std::memcmp(p.bbuf.data(), p.abuf.data(), 3000), 0);
  EXPECT_EQ(std::memcmp(p.bbuf.data() + 4096, p.abuf.data() + 4096, 700), 0);
  EXPECT_EQ(p.wait(p.b_cq3, 1).size(), 0u);  // nothing went to the other domain
}

TEST(Xrc, WriteAndReadUseThePdOfTheNamedSrq) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  fill_pattern(p.abuf, 0, 2500, 3);
  Sge s{p.aaddr(), 2500, p.amr->lkey()};
  SendWr w = make_wr(WrOpcode::kRdmaWrite, &s, 1, 1);
  w.rdma = {p.baddr() + 8192, p.bmr->rkey()};
  w.xrc_remote_srqn = p.srq1->srq_num();
  ASSERT_FALSE(post_send(p.ini, w));
  fill_pattern(p.bbuf, 12288, 1500, 7);
  Sge rs{p.aaddr() + 4096, 1500, p.amr->lkey()};
  SendWr r = make_wr(WrOpcode::kRdmaRead, &rs, 1, 2);
  r.rdma = {p.baddr() + 12288, p.bmr->rkey()};
  r.xrc_remote_srqn = p.srq1->srq_num();
  ASSERT_FALSE(post_send(p.ini, r));
  auto c = p.wait(p.a_scq, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[1].status, WcStatus::kSuccess);
  EXPECT_EQ(c[1].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(std::memcmp(p.bbuf.data() + 8192, p.abuf.data(), 2500), 0);
  EXPECT_EQ(std::memcmp(p.abuf.data() + 4096, p.bbuf.data() + 12288, 1500), 0);
}

TEST(Xrc, AtomicsUseThePdOfTheNamedSrq) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  std::vector<uint64_t> target{100, 7};
  Mr* tmr = *p.b->reg_mr(p.pb, target.data(), 16, 0x70000, kAll | access::kRemoteAtomic);
  Sge r1{p.aaddr(), 8, p.amr->lkey()}, r2{p.aaddr() + 8, 8, p.amr->lkey()};
  SendWr cas = make_wr(WrOpcode::kAtomicCmpAndSwp, &r1, 1, 1);
  cas.atomic = {0x70000, 100, 555, tmr->rkey()};  // compare 100: equal, swap in 555
  cas.xrc_remote_srqn = p.srq1->srq_num();
  SendWr faa = make_wr(WrOpcode::kAtomicFetchAndAdd, &r2, 1, 2);
  faa.atomic = {0x70008, 5, 0, tmr->rkey()};
  faa.xrc_remote_srqn = p.srq1->srq_num();
  ASSERT_FALSE(post_send(p.ini, cas));
  ASSERT_FALSE(post_send(p.ini, faa));
  auto c = p.wait(p.a_scq, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].opcode, WcOpcode::kCompSwap);
  EXPECT_EQ(c[1].status, WcStatus::kSuccess);
  EXPECT_EQ(c[1].opcode, WcOpcode::kFetchAdd);
  uint64_t orig[2];
  std::memcpy(orig, p.abuf.data(), 16);
  EXPECT_EQ(orig[0], 100u);
  EXPECT_EQ(orig[1], 7u);
  EXPECT_EQ(target[0], 555u);
  EXPECT_EQ(target[1], 12u);
}

// The initiator's WR fails with a remote invalid request error, the target QP
// goes to ERR, and no receive is consumed or written anywhere.
void expect_refused(XrcPair& p, uint32_t srqn) {
  p.post_srq(p.srq1, 0, 4096, 11);
  p.post_srq(p.foreign, 4096, 4096, 33);
  fill_pattern(p.abuf, 0, 100, 1);
  ASSERT_FALSE(p.send(WrOpcode::kSend, 0, 100, srqn, 7));
  auto s = p.wait(p.a_scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, WcStatus::kRemInvReqErr) << to_string(s[0].status);
  EXPECT_EQ(p.tgt->state(), QpState::kErr);
  EXPECT_EQ(p.ini->state(), QpState::kErr);
  p.settle();
  for (Cq* cq : {p.b_cq1, p.b_cq2, p.b_cq3}) {
    Wc wc[4];
    EXPECT_EQ(cq->poll(wc), 0);
  }
  for (size_t i = 0; i < 8192; ++i) ASSERT_EQ(p.bbuf[i], std::byte{0}) << i;
  EXPECT_EQ(p.srq1->query().max_wr, 16u);
}

TEST(Xrc, ASrqNumberThatNamesNoSrqIsAnInvalidRequest) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  expect_refused(p, 0xABCDE);
}

TEST(Xrc, AnSrqOfAnotherXrcDomainIsAnInvalidRequest) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  expect_refused(p, p.foreign->srq_num());
}

TEST(Xrc, ABasicSrqNumberIsAnInvalidRequest) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  Srq* basic = *p.b->create_srq(p.pb, SrqAttr{4, 1, 0});
  expect_refused(p, basic->srq_num());
}

TEST(Xrc, NoWqeOnTheNamedSrqIsAnRnrNak) {
  XrcPair p;
  p.opts.rnr_retry = 1;
  ASSERT_NO_FATAL_FAILURE(p.make());
  ASSERT_FALSE(p.send(WrOpcode::kSend, 0, 10, p.srq2->srq_num(), 1));
  auto s = p.wait(p.a_scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, WcStatus::kRnrRetryExcErr) << to_string(s[0].status);
  EXPECT_GE(p.tgt->counters().send_rnr_err, 1u);
}

TEST(Xrc, EachQpTypeTakesItsOwnObjects) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  Device& b = *p.b;
  QpInitAttr t;
  t.qp_type = QpType::kXrcTgt;
  EXPECT_EQ(b.create_qp(nullptr, t).error().value(), EINVAL);  // no domain
  t.xrcd = reinterpret_cast<Xrcd*>(p.pb);
  EXPECT_EQ(b.create_qp(nullptr, t).error().value(), EINVAL);  // not a domain of this device
  QpInitAttr i;
  i.qp_type = QpType::kXrcIni;
  EXPECT_EQ(b.create_qp(p.pb, i).error().value(), EINVAL);  // no send CQ
  i.send_cq = p.b_cq1;
  i.srq = p.srq1;
  EXPECT_EQ(b.create_qp(p.pb, i).error().value(), EINVAL);  // an initiator has no receive side
  // Queues an XRC QP does not have.
  Sge s{p.baddr(), 8, p.bmr->lkey()};
  RecvWr rw{1, std::span<const Sge>(&s, 1)};
  EXPECT_EQ(p.tgt->post_recv(std::span<const RecvWr>(&rw, 1), nullptr).value(), EINVAL);
  EXPECT_EQ(p.ini->post_recv(std::span<const RecvWr>(&rw, 1), nullptr).value(), EINVAL);
  SendWr sw = make_wr(WrOpcode::kSend, nullptr, 0, 1);
  EXPECT_EQ(p.tgt->post_send(std::span<const SendWr>(&sw, 1), nullptr).value(), EINVAL);
  EXPECT_NE(p.tgt->last_refusal().find("XRC target"), std::string::npos);
  EXPECT_EQ(p.tgt->pd(), nullptr);
  EXPECT_EQ(p.tgt->xrcd(), p.xrcd);
  // An XRC SRQ needs a domain and a CQ of this device.
  EXPECT_EQ(b.create_xrc_srq(p.pb, nullptr, p.b_cq1, SrqAttr{4, 1, 0}).error().value(), EINVAL);
  EXPECT_EQ(b.create_xrc_srq(p.pb, p.xrcd, nullptr, SrqAttr{4, 1, 0}).error().value(), EINVAL);
  // The state table's XRC columns: an initiator's RTR needs no responder attributes.
  QpInitAttr i2;
  i2.qp_type = QpType::kXrcIni;
  i2.send_cq = p.b_cq1;
  Qp* q = *b.create_qp(p.pb, i2);
  ConnectOptions o;
  ASSERT_FALSE(qp_to_init(*q, o));
  QpAttr a;
  a.qp_state = QpState::kRtr;
  a.path_mtu = Mtu::k1024;
  a.ah_attr.is_global = true;
  a.ah_attr.port_num = 1;
  const uint32_t base = qp_attr::kState | qp_attr::kAv | qp_attr::kPathMtu | qp_attr::kDestQpn | qp_attr::kRqPsn;
  EXPECT_EQ(q->modify(a, base | qp_attr::kMaxDestRdAtomic).value(), EINVAL);
  EXPECT_FALSE(q->modify(a, base)) << q->last_refusal();
  EXPECT_FALSE(b.destroy_qp(q));
}

TEST(Xrc, DomainsAreSharedByFileAndGoWithTheirLastClose) {
  XrcPair p;
  ASSERT_NO_FATAL_FAILURE(p.make());
  Device& b = *p.b;
  EXPECT_EQ(b.open_xrcd(42, false, false).error().value(), EAGAIN);  // as uverbs
  Xrcd* x1 = *b.open_xrcd(42, true, false);
  Xrcd* x2 = *b.open_xrcd(42, false, false);
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(b.open_xrcd(42, true, true).error().value(), EINVAL);  // O_EXCL
  EXPECT_FALSE(b.close_xrcd(x1));
  EXPECT_FALSE(b.close_xrcd(x2));
  EXPECT_EQ(b.close_xrcd(x2).value(), EINVAL);  // gone
  // In use: EBUSY on its last close, until its SRQs and target QPs are gone.
  EXPECT_EQ(b.close_xrcd(p.xrcd).value(), EBUSY);
  // ibv_open_qp: another handle on the target; the QP goes with the last one.
  EXPECT_EQ(b.open_qp(p.other, p.tgt->qp_num()).error().value(), EINVAL);
  EXPECT_EQ(b.open_qp(p.xrcd, p.tgt->qp_num() + 100).error().value(), EINVAL);  // no such QP
  Qp* again = *b.open_qp(p.xrcd, p.tgt->qp_num());
  EXPECT_EQ(again, p.tgt);
  EXPECT_FALSE(b.destroy_qp(p.tgt));
  EXPECT_EQ(again->state(), QpState::kRts);  // still there
  EXPECT_FALSE(b.destroy_qp(again));
  EXPECT_EQ(b.destroy_qp(again).value(), EINVAL);
  EXPECT_FALSE(b.destroy_srq(p.srq1));
  EXPECT_FALSE(b.destroy_srq(p.srq2));
  EXPECT_FALSE(b.close_xrcd(p.xrcd));
  EXPECT_EQ(b.destroy_cq(p.b_cq3).value(), EBUSY);  // the foreign SRQ completes there
  EXPECT_FALSE(b.destroy_srq(p.foreign));
  EXPECT_FALSE(b.destroy_cq(p.b_cq3));
  EXPECT_FALSE(b.close_xrcd(p.other));
}

}  // namespace
}  // namespace rocelab::emu::test
