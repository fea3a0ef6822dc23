// Every error status, provoked the way a real NIC would see it, on the
// simulated fabric. Rejected remote accesses leave target memory untouched.
#include <fcntl.h>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic;

class ErrorsTest : public ::testing::Test {
 protected:
  void connect(ConnectOptions o = {}) {
    a_ = env_.make_node(1, QpType::kRC, kLen, kAll);
    b_ = env_.make_node(2, QpType::kRC, kLen, kAll);
    ASSERT_TRUE(a_.qp && b_.qp);
    o_ = o;
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, o));
  }
  std::vector<Wc> wait(Cq* cq, size_t n) { return env_.wait_wcs(cq, n, {a_.dev.get(), b_.dev.get()}); }
  Wc one(Cq* cq) {
    auto v = wait(cq, 1);
    EXPECT_EQ(v.size(), 1u);
    return v.empty() ? Wc{} : v[0];
  }
  SendWr write_to(uint64_t raddr, uint32_t rkey, uint32_t len) {
    sge_ = {a_.addr(), len, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &sge_, 1, 77);
    wr.rdma.remote_addr = raddr;
    wr.rdma.rkey = rkey;
    return wr;
  }
  void expect_untouched(const std::vector<std::byte>& b, std::byte v) {
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i] != v) {
        ADD_FAILURE() << "target byte " << i << " changed";
        return;
      }
    }
  }
  // A failed RC WRITE: the requester gets `status`, target memory is untouched.
  void expect_rejected_write(const SendWr& wr, WcStatus status, std::vector<std::byte>& target) {
    std::fill(target.begin(), target.end(), std::byte{0xCC});
    fill_pattern(a_.buf, 0, 4096, 5);
    ASSERT_FALSE(post_send(a_.qp, wr));
    Wc wc = one(a_.scq);
    EXPECT_EQ(wc.status, status) << to_string(wc.status);
    EXPECT_EQ(wc.wr_id, 77u);
    expect_untouched(target, std::byte{0xCC});
    EXPECT_EQ(a_.qp->state(), QpState::kErr);
  }

  // retry_cnt 7, timeout 8 (1 ms); b moved to ERR so that it drops everything;
  // then a sends one SEND.
  void send_to_a_silent_peer(bool retry_forever) {
    ConnectOptions o;
    o.timeout = 8;
    o.retry_cnt = 7;
    env_.set_retry_forever(retry_forever);
    connect(o);
    QpAttr a;
    a.qp_state = QpState::kErr;
    ASSERT_FALSE(b_.qp->modify(a, qp_attr::kState));
    Sge s{a_.addr(), 10, a_.mr->lkey()};
    ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  }

  static constexpr size_t kLen = 1 << 16;
  Env env_{Net::kSim};
  Node a_, b_;
  ConnectOptions o_;
  Sge sge_;
};

TEST_F(ErrorsTest, BadRkeyIsRemoteAccessError) {
  connect();
  expect_rejected_write(write_to(b_.addr(), b_.mr->rkey() ^ 0x100, 4096), WcStatus::kRemAccessErr, b_.buf);
  EXPECT_EQ(b_.qp->state(), QpState::kErr);  // IBTA class C: the responder QP too
  AsyncEvent ev;
  bool access_err = false;
  int fd_flags = fcntl(b_.dev->async_fd(), F_GETFL);
  fcntl(b_.dev->async_fd(), F_SETFL, fd_flags | O_NONBLOCK);
  while (!b_.dev->get_async_event(&ev)) access_err |= ev.event_type == EventType::kQpAccessErr && ev.qp == b_.qp;
  EXPECT_TRUE(access_err);
}

TEST_F(ErrorsTest, OutOfRangeIsRemoteAccessError) {
  connect();
  expect_rejected_write(write_to(b_.addr() + kLen - 100, b_.mr->rkey(), 4096), WcStatus::kRemAccessErr, b_.buf);
}

TEST_F(ErrorsTest, MissingMrAccessFlagIsRemoteAccessError) {
  connect();
  std::vector<std::byte> ro(8192, std::byte{0xCC});
  Mr* mr = *b_.dev->reg_mr(b_.pd, ro.data(), ro.size(), reinterpret_cast<uint64_t>(ro.data()),
                           access::kLocalWrite | access::kRemoteRead);
  expect_rejected_write(write_to(reinterpret_cast<uint64_t>(ro.data()), mr->rkey(), 4096),
                        WcStatus::kRemAccessErr, ro);
}

TEST_F(ErrorsTest, MrOfAnotherPdIsRemoteAccessError) {
  connect();
  Pd* other = *b_.dev->alloc_pd();
  std::vector<std::byte> mem(8192, std::byte{0xCC});
  Mr* mr = *b_.dev->reg_mr(other, mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()), kAll);
  expect_rejected_write(write_to(reinterpret_cast<uint64_t>(mem.data()), mr->rkey(), 4096),
                        WcStatus::kRemAccessErr, mem);
}

TEST_F(ErrorsTest, ReadAndAtomicWithBadRkeyLeaveMemoryAlone) {
  connect();
  std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0xCC});
  Sge s{a_.addr(), 8, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kAtomicFetchAndAdd, &s, 1, 1);
  wr.atomic.remote_addr = b_.addr();
  wr.atomic.rkey = 0xBAD;
  wr.atomic.compare_add = 1;
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRemAccessErr);
  expect_untouched(b_.buf, std::byte{0xCC});
}

TEST_F(ErrorsTest, QpWithoutRemoteWriteIsInvalidRequest) {
  ConnectOptions o;
  o.access = access::kRemoteRead;  // b does not allow RDMA WRITE
  connect(o);
  expect_rejected_write(write_to(b_.addr(), b_.mr->rkey(), 100), WcStatus::kRemInvReqErr, b_.buf);
}

TEST_F(ErrorsTest, MisalignedAtomicIsInvalidRequest) {
  connect();
  std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0xCC});
  Sge s{a_.addr(), 8, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kAtomicCmpAndSwp, &s, 1, 1);
  wr.atomic.remote_addr = b_.addr() + 4;
  wr.atomic.rkey = b_.mr->rkey();
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRemInvReqErr);
  expect_untouched(b_.buf, std::byte{0xCC});
}

TEST_F(ErrorsTest, SendLongerThanReceiveBufferIsLengthError) {
  connect();
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 100, b_.mr->lkey(), 9));
  Sge s{a_.addr(), 3000, a_.mr->lkey()};
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  Wc r = one(b_.rcq);
  EXPECT_EQ(r.status, WcStatus::kLocLenErr);
  EXPECT_EQ(r.wr_id, 9u);
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRemInvReqErr);
}

TEST_F(ErrorsTest, BadReceiveSgeIsRemoteOperationalError) {
  connect();
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 100, 0xDEAD00, 9));
  Sge s{a_.addr(), 50, a_.mr->lkey()};
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  EXPECT_EQ(one(b_.rcq).status, WcStatus::kLocProtErr);
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRemOpErr);
}

TEST_F(ErrorsTest, BadLkeyIsLocalProtectionErrorAndFlushesTheRest) {
  connect();
  Sge bad{a_.addr(), 100, a_.mr->lkey() + 0x100};
  Sge good{a_.addr(), 100, a_.mr->lkey()};
  SendWr w1 = make_wr(WrOpcode::kSend, &bad, 1, 1);
  SendWr w2 = make_wr(WrOpcode::kSend, &good, 1, 2);
  SendWr w3 = make_wr(WrOpcode::kSend, &good, 1, 3);
  w3.send_flags = 0;  // unsignaled: a flush completes it anyway
  ASSERT_FALSE(post_send(a_.qp, w1));
  ASSERT_FALSE(post_send(a_.qp, w2));
  ASSERT_FALSE(post_send(a_.qp, w3));
  auto wcs = wait(a_.scq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[2].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  EXPECT_EQ(a_.qp->state(), QpState::kErr);
}

TEST_F(ErrorsTest, ReadIntoMemoryWithoutLocalWriteIsLocalProtectionError) {
  connect();
  std::vector<std::byte> ro(64);
  Mr* mr = *a_.dev->reg_mr(a_.pd, ro.data(), ro.size(), reinterpret_cast<uint64_t>(ro.data()), 0);
  Sge s{reinterpret_cast<uint64_t>(ro.data()), 64, mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kRdmaRead, &s, 1, 1);
  wr.rdma.remote_addr = b_.addr();
  wr.rdma.rkey = b_.mr->rkey();
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kLocProtErr);
}

TEST_F(ErrorsTest, AtomicWithWrongLocalLengthIsLocalQpOperationError) {
  connect();
  Sge s{a_.addr(), 4, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kAtomicFetchAndAdd, &s, 1, 1);
  wr.atomic.remote_addr = b_.addr();
  wr.atomic.rkey = b_.mr->rkey();
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kLocQpOpErr);
}

TEST_F(ErrorsTest, ModifyToErrFlushesEveryOutstandingWr) {
  connect();
  for (uint64_t i = 0; i < 5; ++i) ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 64, b_.mr->lkey(), i));
  QpAttr a;
  a.qp_state = QpState::kErr;
  ASSERT_FALSE(b_.qp->modify(a, qp_attr::kState));
  auto wcs = wait(b_.rcq, 5);
  ASSERT_EQ(wcs.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(wcs[i].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].opcode, WcOpcode::kRecv);
  }
  // Posting in ERR completes with a flush at once.
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 64, b_.mr->lkey(), 99));
  EXPECT_EQ(one(b_.rcq).status, WcStatus::kWrFlushErr);
  // RESET empties the queues without completions.
  a.qp_state = QpState::kReset;
  ASSERT_FALSE(b_.qp->modify(a, qp_attr::kState));
  Wc wc;
  EXPECT_EQ(b_.rcq->poll(std::span<Wc>(&wc, 1)), 0);
}

TEST_F(ErrorsTest, UnresponsivePeerIsRetryExceeded) {
  ConnectOptions o;
  o.timeout = 8;  // ~1 ms of virtual time
  o.retry_cnt = 3;
  connect(o);
  QpAttr a;
  a.qp_state = QpState::kErr;  // b drops everything now
  ASSERT_FALSE(b_.qp->modify(a, qp_attr::kState));
  Sge s{a_.addr(), 10, a_.mr->lkey()};
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRetryExcErr);
  const Counters c = a_.qp->counters();
  EXPECT_EQ(c.completer_retry_err, 3u);
  EXPECT_EQ(c.retry_exceeded_err, 1u);
  EXPECT_EQ(c.sent_pkts, 4u);  // the original and three retries
}

// retry_cnt 7 is seven retries, as the IBTA and NICs have it: the eighth
// timeout ends the WQE with RETRY_EXC_ERR.
TEST_F(ErrorsTest, RetryCnt7IsSevenRetries) {
  ASSERT_NO_FATAL_FAILURE(send_to_a_silent_peer(/*retry_forever=*/false));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRetryExcErr);
  const Counters c = a_.qp->counters();
  EXPECT_EQ(c.completer_retry_err, 7u);
  EXPECT_EQ(c.retry_exceeded_err, 1u);
  EXPECT_EQ(c.sent_pkts, 8u);  // the original and seven retries
}

// On a device that reads 7 as Soft-RoCE does (rocelab run --retry-forever),
// an unresponsive peer never ends the WQE.
TEST_F(ErrorsTest, RetryCnt7RetriesForeverOnARetryForeverDevice) {
  ASSERT_NO_FATAL_FAILURE(send_to_a_silent_peer(/*retry_forever=*/true));
  for (int i = 0; i < 40; ++i) env_.step({a_.dev.get(), b_.dev.get()});
  Wc wc;
  EXPECT_EQ(a_.scq->poll(std::span<Wc>(&wc, 1)), 0);
  const Counters c = a_.qp->counters();
  EXPECT_GE(c.completer_retry_err, 10u);  // well past 7
  EXPECT_EQ(c.retry_exceeded_err, 0u);
  EXPECT_EQ(a_.qp->counters().sent_pkts, c.completer_retry_err + 1);
}

TEST_F(ErrorsTest, NoReceiveIsRnrRetryExceeded) {
  ConnectOptions o;
  o.rnr_retry = 2;
  o.min_rnr_timer = 1;  // 10 us
  connect(o);
  Sge s{a_.addr(), 10, a_.mr->lkey()};
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(a_.qp->counters().rcvd_rnr_err, 3u);
  EXPECT_EQ(a_.qp->counters().rnr_nak_retry_err, 1u);
  EXPECT_EQ(b_.qp->counters().send_rnr_err, 3u);
}

TEST_F(ErrorsTest, RnrRecoversWhenAReceiveIsPosted) {
  connect();  // rnr_retry 7: forever
  fill_pattern(a_.buf, 0, 5000, 3);
  Sge s{a_.addr(), 5000, a_.mr->lkey()};
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  for (int i = 0; i < 20; ++i) env_.step({a_.dev.get(), b_.dev.get()});
  EXPECT_GT(b_.qp->counters().send_rnr_err, 0u);
  ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 8000, b_.mr->lkey(), 4));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kSuccess);
  EXPECT_EQ(one(b_.rcq).byte_len, 5000u);
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), 5000), 0);
}

TEST_F(ErrorsTest, CqOverflowRaisesCqErrorAndMovesItsQpsToErr) {
  a_ = env_.make_node(1, QpType::kRC, kLen, kAll, /*cqe=*/2);
  b_ = env_.make_node(2, QpType::kRC, kLen, kAll);
  ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, ConnectOptions{}));
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 64, b_.mr->lkey(), i));
  Sge s{a_.addr(), 10, a_.mr->lkey()};
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, i)));
  for (int i = 0; i < 50 && a_.qp->state() != QpState::kErr; ++i) env_.step({a_.dev.get(), b_.dev.get()});
  EXPECT_EQ(a_.qp->state(), QpState::kErr);
  fcntl(a_.dev->async_fd(), F_SETFL, O_NONBLOCK);
  AsyncEvent ev;
  bool cq_err = false;
  while (!a_.dev->get_async_event(&ev)) cq_err |= ev.event_type == EventType::kCqErr && ev.cq == a_.scq;
  EXPECT_TRUE(cq_err);
}

TEST_F(ErrorsTest, PostSendRejectsWhatIbvPostSendRejects) {
  connect();
  Sge s{a_.addr(), 10, a_.mr->lkey()};
  SendWr wr = make_wr(static_cast<WrOpcode>(42), &s, 1, 1);  // no such opcode
  EXPECT_EQ(post_send(a_.qp, wr), std::errc::invalid_argument);
  wr = make_wr(WrOpcode::kBindMw, nullptr, 0, 1);  // a bind naming no window
  EXPECT_EQ(post_send(a_.qp, wr), std::errc::invalid_argument);
  Sge many[5] = {s, s, s, s, s};  // max_send_sge is 4
  EXPECT_EQ(post_send(a_.qp, make_wr(WrOpcode::kSend, many, 5, 1)), std::errc::invalid_argument);
  std::vector<std::byte> big(100);
  Sge is{reinterpret_cast<uint64_t>(big.data()), 100, 0};  // max_inline_data is 64
  SendWr iw = make_wr(WrOpcode::kSend, &is, 1, 1);
  iw.send_flags |= send_flags::kInline;
  EXPECT_EQ(post_send(a_.qp, iw), std::errc::invalid_argument);
  // A QP in RESET takes no send.
  Qp* fresh = nullptr;
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = a_.scq;
  fresh = *a_.dev->create_qp(a_.pd, ia);
  EXPECT_EQ(post_send(fresh, make_wr(WrOpcode::kSend, &s, 1, 1)), std::errc::invalid_argument);
}

}  // namespace
}  // namespace rocelab::emu::test
