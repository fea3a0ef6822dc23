// A vanished peer: the remote process dies mid-transfer.
// Outstanding WRs end with RETRY_EXC_ERR after timeout x (retry_cnt + 1) —
// also for retry_cnt 7, which otherwise retries forever as on rxe, because the
// network says the peer is gone (ICMP port unreachable; the simulated fabric
// reports the same for an address nobody holds) — and the rest are flushed.
// On the fabric, on its virtual clock; on real UDP, with a forked peer process
// that is killed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
constexpr size_t kLen = 1 << 20;
constexpr uint32_t kMsg = 64 * 1024;  // 64 packets at MTU 1024
constexpr int kWrs = 8;

// 4.096 us x 2^timeout (IBTA 9.7.6.1.3).
Nanos local_ack_timeout(uint8_t timeout) { return Nanos(uint64_t{4096} << timeout); }

QpState state_of(Qp* qp) {
  QpAttr a;
  QpInitAttr ia;
  EXPECT_FALSE(qp->query(&a, &ia));
  return a.qp_state;
}

// Posts kWrs signaled WRITEs of kMsg bytes from a to b.
void post_writes(Node& a, const Node& b) {
  for (int i = 0; i < kWrs; ++i) {
    Sge s{a.addr() + uint64_t(i) * kMsg, kMsg, a.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, uint64_t(i));
    wr.rdma = {b.addr() + uint64_t(i) * kMsg, b.mr->rkey()};
    ASSERT_FALSE(post_send(a.qp, wr));
  }
}

// The completions expected after the peer vanished: the WRs that
// were acknowledged before succeed, the oldest unacknowledged one ends with
// RETRY_EXC_ERR, every later one with WR_FLUSH_ERR, in posting order.
void expect_retry_exc_then_flush(const std::vector<Wc>& wcs, uint64_t first_wr_id) {
  size_t i = 0;
  while (i < wcs.size() && wcs[i].status == WcStatus::kSuccess) ++i;
  ASSERT_LT(i, wcs.size()) << "no WR failed";
  EXPECT_EQ(wcs[i].status, WcStatus::kRetryExcErr) << to_string(wcs[i].status);
  for (size_t k = 0; k < wcs.size(); ++k) EXPECT_EQ(wcs[k].wr_id, first_wr_id + k) << "completion " << k;
  for (++i; i < wcs.size(); ++i) EXPECT_EQ(wcs[i].status, WcStatus::kWrFlushErr) << to_string(wcs[i].status);
}

class VanishedPeer : public ::testing::TestWithParam<int> {};

// b's device is destroyed after a's first WRITE completed: a's later WRITEs
// are never acknowledged; a is told the address is gone when it retransmits.
TEST_P(VanishedPeer, OnTheFabricRetryExcAfterTimeoutTimesRetryCntPlusOne) {
  const auto retry_cnt = static_cast<uint8_t>(GetParam());
  Env env(Net::kSim);
  Node a = env.make_node(1, QpType::kRC, kLen, kAll);
  Node b = env.make_node(2, QpType::kRC, kLen, kAll);
  ASSERT_TRUE(a.qp && b.qp);
  ConnectOptions o;
  o.timeout = 10;  // 4.2 ms of virtual time
  o.retry_cnt = retry_cnt;
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, o));
  post_writes(a, b);
  std::vector<Wc> first = env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].status, WcStatus::kSuccess);
  const Counters before = a.qp->counters();
  b = Node{};  // the peer vanishes: its device, QP and address are gone
  const Nanos gone_at = env.fabric()->now();

  std::vector<Wc> rest = env.wait_wcs(a.scq, kWrs - 1, {a.dev.get()});
  ASSERT_EQ(rest.size(), size_t(kWrs - 1));
  expect_retry_exc_then_flush(rest, 1);
  EXPECT_EQ(state_of(a.qp), QpState::kErr);
  const Counters after = a.qp->counters();
  EXPECT_EQ(after.retry_exceeded_err - before.retry_exceeded_err, 1u);
  // retry_cnt retransmissions (one per timeout), then the last timeout ends it.
  EXPECT_EQ(after.completer_retry_err - before.completer_retry_err, retry_cnt);
  // The last ACK arrived just before the peer vanished, and the retransmit
  // timer was started from it: the error comes (retry_cnt + 1) timeouts later.
  const Nanos took = env.fabric()->now() - gone_at;
  const Nanos expected = local_ack_timeout(o.timeout) * (retry_cnt + 1);
  EXPECT_LE(took, expected);
  EXPECT_GT(took, expected - local_ack_timeout(o.timeout) / 2);
}

INSTANTIATE_TEST_SUITE_P(RetryCnt, VanishedPeer, ::testing::Values(0, 3, 7));

// A peer that is alive but silent: everything a sends in the first 200 ms of
// virtual time is lost, so nothing says the peer is gone.
class SilentPeer : public ::testing::Test {
 protected:
  void start(uint8_t retry_cnt, bool forever = false) {
    env_ = std::make_unique<Env>(Net::kSim);
    env_->set_retry_forever(forever);
    env_->set_faults("drop:from=0ms:for=200ms");
    a_ = env_->make_node(1, QpType::kRC, kLen, kAll);
    env_->set_faults("");
    b_ = env_->make_node(2, QpType::kRC, kLen, kAll);
    ASSERT_TRUE(a_.qp && b_.qp);
    ConnectOptions o;
    o.timeout = 10;  // 4.2 ms
    o.retry_cnt = retry_cnt;
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, o));
    fill_pattern(a_.buf, 0, size_t(kWrs) * kMsg, 5);
    post_writes(a_, b_);
    wcs_ = env_->wait_wcs(a_.scq, kWrs, {a_.dev.get(), b_.dev.get()});
    ASSERT_EQ(wcs_.size(), size_t(kWrs));
  }
  std::unique_ptr<Env> env_;
  Node a_, b_;
  std::vector<Wc> wcs_;
};

// On a device that reads retry_cnt 7 as rxe does (retry_forever), 7 retries for
// as long as the silence lasts, and the transfer completes once packets get
// through again.
TEST_F(SilentPeer, RetryForeverKeepsRetryingWhileNothingSaysThePeerIsGone) {
  ASSERT_NO_FATAL_FAILURE(start(7, true));
  for (const Wc& wc : wcs_) EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  // 200 ms of silence at 4.2 ms per timeout: far more than seven retries.
  EXPECT_GT(a_.qp->counters().completer_retry_err, 40u);
  EXPECT_EQ(a_.qp->counters().retry_exceeded_err, 0u);
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), size_t(kWrs) * kMsg), 0);
}

// By default (the IBTA, NICs) retry_cnt 7 means seven retries: the eighth timeout ends it.
TEST_F(SilentPeer, RetryCnt7GivesUpAfterEightTimeouts) {
  ASSERT_NO_FATAL_FAILURE(start(7));
  expect_retry_exc_then_flush(wcs_, 0);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 7u);
}

// The same silence with retry_cnt 6 gives up: six retries, the seventh timeout ends it.
TEST_F(SilentPeer, RetryCnt6GivesUpAfterSevenTimeouts) {
  ASSERT_NO_FATAL_FAILURE(start(6));
  expect_retry_exc_then_flush(wcs_, 0);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 6u);
}

// ---- Real UDP, two processes ----

struct PeerInfo {
  Gid gid;
  uint32_t qpn = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::write(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

PeerInfo info_of(const Node& n) {
  PeerInfo i;
  EXPECT_FALSE(n.dev->query_gid(1, 0, &i.gid));
  i.qpn = n.qp->qp_num();
  i.addr = n.addr();
  i.rkey = n.mr->rkey();
  return i;
}

// The child: a device on its own 127.0.0.x, one RC QP that accepts WRITEs,
// answered by the device's helper thread until the process is killed.
[[noreturn]] void run_peer(int in, int out, const ConnectOptions& o) {
  Env env(Net::kUdp);
  Node b = env.make_node(2, QpType::kRC, kLen, kAll);
  PeerInfo mine, theirs;
  if (!b.qp || qp_to_init(*b.qp, o)) _exit(3);
  mine = info_of(b);
  if (!write_all(out, &mine, sizeof mine) || !read_all(in, &theirs, sizeof theirs)) _exit(4);
  if (qp_to_rtr(*b.qp, theirs.gid, theirs.qpn, o.psn_a, o) || qp_to_rts(*b.qp, o.psn_b, o)) _exit(5);
  const char ready = 'r';
  if (!write_all(out, &ready, 1)) _exit(6);
  char c;
  while (::read(in, &c, 1) > 0) {
  }
  _exit(0);
}

// The same on the real transport: a process dies mid-transfer; its
// peer, with the retry_cnt 7 that perftest and rdma-core's examples set, gets
// RETRY_EXC_ERR for the oldest outstanding WRITE and WR_FLUSH_ERR for the rest.
TEST(VanishedPeerUdp, KilledProcessEndsOutstandingWritesWithRetryExcThenFlush) {
  ConnectOptions o;
  o.timeout = 12;  // 16.8 ms: the error comes about 134 ms after the last ACK
  o.retry_cnt = 7;
  o.psn_a = 0x123456;
  o.psn_b = 0xABCDE;
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  const pid_t pid = ::fork();  // before this process has any thread
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(to_parent[0]);
    run_peer(to_child[0], to_parent[1], o);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  struct Reaper {
    pid_t pid;
    int fds[2];
    ~Reaper() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
      ::close(fds[0]);
      ::close(fds[1]);
    }
  } reaper{pid, {to_child[1], to_parent[0]}};

  Env env(Net::kUdp);
  Node a = env.make_node(1, QpType::kRC, kLen, kAll);
  ASSERT_TRUE(a.qp);
  PeerInfo theirs;
  ASSERT_TRUE(read_all(to_parent[0], &theirs, sizeof theirs)) << "peer process failed to start";
  const PeerInfo mine = info_of(a);
  ASSERT_TRUE(write_all(to_child[1], &mine, sizeof mine));
  ASSERT_FALSE(qp_to_init(*a.qp, o));
  ASSERT_FALSE(qp_to_rtr(*a.qp, theirs.gid, theirs.qpn, o.psn_b, o));
  ASSERT_FALSE(qp_to_rts(*a.qp, o.psn_a, o));
  char ready = 0;
  ASSERT_TRUE(read_all(to_parent[0], &ready, 1));

  // WRITEs, kWrs outstanding at a time, until 64 have completed.
  uint64_t posted = 0, done = 0;
  auto post_one = [&] {
    const uint64_t slot = posted % kWrs;
    Sge s{a.addr() + slot * kMsg, kMsg, a.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, posted);
    wr.rdma = {theirs.addr + slot * kMsg, theirs.rkey};
    ASSERT_FALSE(post_send(a.qp, wr));
    ++posted;
  };
  for (int i = 0; i < kWrs; ++i) post_one();
  while (done < 64) {
    std::vector<Wc> w = env.wait_wcs(a.scq, 1, {a.dev.get()});
    ASSERT_EQ(w.size(), 1u) << "the transfer stalled before the peer was killed";
    ASSERT_EQ(w[0].status, WcStatus::kSuccess) << to_string(w[0].status);
    ASSERT_EQ(w[0].wr_id, done);
    ++done;
    post_one();
  }
  const Counters before = a.qp->counters();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);  // mid-transfer: kWrs WRITEs outstanding
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  reaper.pid = 0;

  // ACKs the peer sent before it died may still complete WRITEs (under load
  // all kWrs of them were, once: then no WR was left to fail). Each such
  // completion makes room for a WRITE posted after the death, which nobody
  // can acknowledge, so one WR at least fails.
  std::vector<Wc> rest;
  for (;;) {
    std::vector<Wc> w = env.wait_wcs(a.scq, 1, {a.dev.get()});
    ASSERT_EQ(w.size(), 1u) << "no completion after the peer was killed";
    if (w[0].status != WcStatus::kSuccess) {
      rest = std::move(w);
      break;
    }
    ASSERT_EQ(w[0].wr_id, done);
    ++done;
    post_one();
  }
  // Nothing hangs: every outstanding WR completes (wait_wcs gives up after 20 s).
  std::vector<Wc> more = env.wait_wcs(a.scq, posted - done - 1, {a.dev.get()});
  ASSERT_EQ(more.size(), posted - done - 1);
  rest.insert(rest.end(), more.begin(), more.end());
  expect_retry_exc_then_flush(rest, done);
  EXPECT_EQ(state_of(a.qp), QpState::kErr);
  const Counters after = a.qp->counters();
  EXPECT_EQ(after.retry_exceeded_err - before.retry_exceeded_err, 1u);
  EXPECT_GE(after.completer_retry_err - before.completer_retry_err, 7u);
}

}  // namespace
}  // namespace rocelab::emu::test
