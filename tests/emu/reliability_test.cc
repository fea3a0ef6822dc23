// RC reliability on the simulated fabric with scripted faults:
// each scenario names the fault, what the protocol must do, and checks data,
// completions and the rxe-named counters.
#include <gtest/gtest.h>

#include "tests/emu/pair.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic;

class Reliability : public ::testing::Test {
 protected:
  // a gets faults_a on what it sends, b gets faults_b.
  void connect(const std::string& faults_a, const std::string& faults_b, Mtu mtu = Mtu::k1024,
               uint8_t retry_cnt = 7, uint8_t rnr_retry = 7) {
    env_ = std::make_unique<Env>(Net::kSim, mtu);
    env_->set_retry_forever(true);  // retry_cnt 7 as rxe: these schedules test recovery, not giving up
    env_->set_faults(faults_a);
    a_ = env_->make_node(1, QpType::kRC, kLen, kAll);
    env_->set_faults(faults_b);
    b_ = env_->make_node(2, QpType::kRC, kLen, kAll);
    ASSERT_TRUE(a_.qp && b_.qp);
    ConnectOptions o;
    o.path_mtu = mtu;
    o.timeout = 10;  // 4 ms of virtual time
    o.retry_cnt = retry_cnt;
    o.rnr_retry = rnr_retry;
    o.psn_a = 0xFFFFFA;  // wraps during the first message
    o.psn_b = 0x800000;
    ASSERT_FALSE(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, o));
    if (getenv("EMU_DEBUG")) { a_.dev->set_event_sink(&dbg_a_); b_.dev->set_event_sink(&dbg_b_); }
  }
  struct Dbg : EventSink {
    const char* n;
    explicit Dbg(const char* x) : n(x) {}
    void on_event(const EngineEvent& e) override {
      fprintf(stderr, "%s t=%lld %s qpn=%u op=%u psn=%u len=%u st=%s %.*s\n", n, (long long)e.time.count(),
              std::string(to_string(e.kind)).c_str(), e.qpn, e.bth_opcode, e.psn, e.length,
              std::string(to_string(e.status)).c_str(), (int)e.reason.size(), e.reason.data());
    }
  };
  Dbg dbg_a_{"A"}, dbg_b_{"B"};
  std::vector<Wc> wait(Cq* cq, size_t n) { return env_->wait_wcs(cq, n, {a_.dev.get(), b_.dev.get()}); }
  Wc one(Cq* cq) {
    auto v = wait(cq, 1);
    EXPECT_EQ(v.size(), 1u);
    return v.empty() ? Wc{} : v[0];
  }
  void send_and_check(uint32_t len, uint8_t seed) {
    fill_pattern(a_.buf, 0, len, seed);
    std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0});
    ASSERT_FALSE(post_recv(b_.qp, b_.addr(), kLen, b_.mr->lkey(), seed));
    Sge s{a_.addr(), len, a_.mr->lkey()};
    ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, seed)));
    Wc sw = one(a_.scq);
    EXPECT_EQ(sw.status, WcStatus::kSuccess) << to_string(sw.status);
    auto rw = wait(b_.rcq, 1);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, WcStatus::kSuccess);
    EXPECT_EQ(rw[0].byte_len, len);
    EXPECT_EQ(rw[0].wr_id, seed);
    EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), len), 0);
  }
  // RDMA WRITE_WITH_IMM of len bytes from a to b: data byte-exact, exactly one
  // receive completion carrying the immediate.
  void write_imm_and_check(uint32_t len, uint8_t seed) {
    fill_pattern(a_.buf, 0, len, seed);
    std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0});
    ASSERT_FALSE(post_recv(b_.qp, b_.addr(), 0, b_.mr->lkey(), seed));
    Sge s{a_.addr(), len, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWriteWithImm, &s, 1, seed);
    wr.rdma = {b_.addr(), b_.mr->rkey()};
    wr.imm_data = 0x01020300u + seed;
    ASSERT_FALSE(post_send(a_.qp, wr));
    Wc sw = one(a_.scq);
    EXPECT_EQ(sw.status, WcStatus::kSuccess) << to_string(sw.status);
    Wc rw = one(b_.rcq);
    EXPECT_EQ(rw.status, WcStatus::kSuccess) << to_string(rw.status);
    EXPECT_EQ(rw.opcode, WcOpcode::kRecvRdmaWithImm);
    EXPECT_EQ(rw.byte_len, len);
    EXPECT_EQ(rw.imm_data, 0x01020300u + seed);
    EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), len), 0);
    expect_no_more_recv();
  }
  // Nothing else is delivered, however long the fabric runs.
  void expect_no_more_recv() {
    for (int i = 0; i < 50; ++i) env_->step({a_.dev.get(), b_.dev.get()});
    Wc extra;
    EXPECT_EQ(b_.rcq->poll(std::span<Wc>(&extra, 1)), 0);
  }
  void read_and_check(uint32_t len, uint8_t seed) {
    fill_pattern(b_.buf, 0, len, seed);
    std::fill(a_.buf.begin(), a_.buf.end(), std::byte{0});
    Sge s{a_.addr(), len, a_.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaRead, &s, 1, seed);
    wr.rdma = {b_.addr(), b_.mr->rkey()};
    ASSERT_FALSE(post_send(a_.qp, wr));
    Wc w = one(a_.scq);
    EXPECT_EQ(w.status, WcStatus::kSuccess) << to_string(w.status);
    EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), len), 0);
  }
  static constexpr size_t kLen = 1 << 16;
  std::unique_ptr<Env> env_;
  Node a_, b_;
};

// Drop the 3rd packet of a 10-packet SEND: b NAKs (PSN sequence error) once
// on the 4th, a goes back to the 3rd; the message arrives once and whole.
TEST_F(Reliability, LostMiddlePacketIsNakedAndResent) {
  connect("drop:class=send:nth=3", "");
  send_and_check(10 * 1024, 1);
  EXPECT_EQ(b_.qp->counters().out_of_seq_request, 7u);  // PSNs 4..10 of the first round
  EXPECT_EQ(a_.qp->counters().rcvd_seq_err, 1u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
  EXPECT_EQ(b_.qp->counters().rdma_recvs, 1u);
}

// A 4-packet message (FIRST, MIDDLE, MIDDLE, LAST) at MTU 1024.
constexpr uint32_t k4Pkts = 3 * 1024 + 900;

// Lost FIRST of a SEND: the MIDDLE reveals the gap, b NAKs once (PSN sequence
// error) and drops the rest of the round; a goes back to the FIRST.
TEST_F(Reliability, LostFirstSendPacketIsNakedAndResent) {
  connect("drop:class=send:nth=1", "");
  send_and_check(k4Pkts, 11);
  expect_no_more_recv();
  EXPECT_EQ(b_.qp->counters().out_of_seq_request, 3u);  // MIDDLE, MIDDLE, LAST of round 1
  EXPECT_EQ(b_.qp->counters().duplicate_request, 0u);
  EXPECT_EQ(b_.qp->counters().rdma_recvs, 1u);
  EXPECT_EQ(a_.qp->counters().rcvd_seq_err, 1u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
}

// Lost LAST of a SEND: nothing follows it, so no NAK; the ACK never comes and
// a's retransmit timer resends from the oldest unacknowledged PSN (the FIRST:
// only the LAST asked for an ACK). b re-ACKs the three duplicates and delivers once.
TEST_F(Reliability, LostLastSendPacketTimesOutAndIsResent) {
  connect("drop:class=send:nth=4", "");
  send_and_check(k4Pkts, 12);
  expect_no_more_recv();
  EXPECT_EQ(b_.qp->counters().out_of_seq_request, 0u);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 3u);
  EXPECT_EQ(b_.qp->counters().rdma_recvs, 1u);
  EXPECT_EQ(a_.qp->counters().rcvd_seq_err, 0u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
}

// The same two losses on a 4-packet RDMA WRITE_WITH_IMM.
TEST_F(Reliability, LostFirstWritePacketIsNakedAndResent) {
  connect("drop:class=write:nth=1", "");
  write_imm_and_check(k4Pkts, 13);
  EXPECT_EQ(b_.qp->counters().out_of_seq_request, 3u);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 0u);
  EXPECT_EQ(a_.qp->counters().rcvd_seq_err, 1u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
}

TEST_F(Reliability, LostLastWritePacketTimesOutAndIsResent) {
  connect("drop:class=write:nth=4", "");
  write_imm_and_check(k4Pkts, 14);
  EXPECT_EQ(b_.qp->counters().out_of_seq_request, 0u);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 3u);
  EXPECT_EQ(a_.qp->counters().rcvd_seq_err, 0u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
}

// Lost READ response FIRST: the MIDDLE after it shows responses are missing;
// a asks again for the whole READ, b serves it again from its READ resource.
TEST_F(Reliability, LostFirstReadResponseIsRequestedAgain) {
  connect("", "drop:class=read:nth=1");
  read_and_check(k4Pkts, 15);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 1u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
  EXPECT_EQ(a_.qp->counters().rcvd_seq_err, 0u);
}

// Lost READ response LAST: a times out and asks only for the missing last
// packet (IBTA 9.4.4: the retried READ starts at what has not arrived).
TEST_F(Reliability, LostLastReadResponseIsRequestedAgain) {
  connect("", "drop:class=read:nth=4");
  read_and_check(k4Pkts, 16);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 1u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 1u);
  EXPECT_EQ(b_.qp->counters().sent_pkts, 5u);  // 4 responses + the last one again
}

// Retry exhaustion: b receives every SEND but all its ACKs are lost. a retries
// retry_cnt times without progress, then the oldest WQE completes with
// RETRY_EXC_ERR, the QP goes to ERR and the WQEs behind it are flushed.
TEST_F(Reliability, RetryExhaustedThenTheRestIsFlushed) {
  connect("", "drop:class=ack", Mtu::k1024, /*retry_cnt=*/2);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_FALSE(post_recv(b_.qp, b_.addr() + i * 4096, 4096, b_.mr->lkey(), i));
  fill_pattern(a_.buf, 0, 3 * 2000, 17);
  Sge s[3];
  for (uint64_t i = 0; i < 3; ++i) {
    s[i] = {a_.addr() + i * 2000, 2000, a_.mr->lkey()};
    ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s[i], 1, 100 + i)));
  }
  auto wcs = wait(a_.scq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExcErr) << to_string(wcs[0].status);
  EXPECT_EQ(wcs[0].wr_id, 100u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(wcs[i].status, WcStatus::kWrFlushErr) << to_string(wcs[i].status);
    EXPECT_EQ(wcs[i].wr_id, 100u + i);
  }
  EXPECT_EQ(a_.qp->state(), QpState::kErr);
  EXPECT_EQ(a_.qp->counters().retry_exceeded_err, 1u);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 2u);
  // The responder did its part: each SEND delivered once, in order.
  auto rw = wait(b_.rcq, 3);
  ASSERT_EQ(rw.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rw[i].status, WcStatus::kSuccess);
    EXPECT_EQ(rw[i].wr_id, i);
    EXPECT_EQ(std::memcmp(b_.buf.data() + i * 4096, a_.buf.data() + i * 2000, 2000), 0);
  }
  EXPECT_GT(b_.qp->counters().duplicate_request, 0u);
}

// RNR without a later receive: b has no receive WQE, every try is RNR NAKed;
// after rnr_retry retries the SEND completes with RNR_RETRY_EXC_ERR and the
// WQE behind it is flushed. Nothing was delivered.
TEST_F(Reliability, RnrExhaustedThenTheRestIsFlushed) {
  connect("", "", Mtu::k1024, 7, /*rnr_retry=*/2);
  Sge s{a_.addr(), 3000, a_.mr->lkey()};
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  ASSERT_FALSE(post_send(a_.qp, make_wr(WrOpcode::kSend, &s, 1, 2)));
  auto wcs = wait(a_.scq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRnrRetryExcErr) << to_string(wcs[0].status);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr) << to_string(wcs[1].status);
  EXPECT_EQ(a_.qp->state(), QpState::kErr);
  EXPECT_EQ(a_.qp->counters().rcvd_rnr_err, 3u);  // the first try and two retries
  EXPECT_EQ(a_.qp->counters().rnr_nak_retry_err, 1u);
  EXPECT_EQ(b_.qp->counters().send_rnr_err, 3u);
  EXPECT_EQ(b_.qp->counters().rdma_recvs, 0u);
}

// A duplicated atomic request (the network delivers it twice): the second copy
// is answered from the replay cache; the add happens once.
TEST_F(Reliability, DuplicateAtomicRequestIsExecutedOnce) {
  connect("dup:class=atomic:nth=1", "");
  uint64_t v = 1000;
  std::memcpy(b_.buf.data(), &v, 8);
  Sge s{a_.addr(), 8, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kAtomicFetchAndAdd, &s, 1, 1);
  wr.atomic.remote_addr = b_.addr();
  wr.atomic.rkey = b_.mr->rkey();
  wr.atomic.compare_add = 5;
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kSuccess);
  for (int i = 0; i < 50; ++i) env_->step({a_.dev.get(), b_.dev.get()});
  uint64_t orig = 0, now = 0;
  std::memcpy(&orig, a_.buf.data(), 8);
  std::memcpy(&now, b_.buf.data(), 8);
  EXPECT_EQ(orig, 1000u);
  EXPECT_EQ(now, 1005u);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 1u);
  EXPECT_EQ(b_.qp->counters().sent_pkts, 2u);  // the ATOMIC ACK, then its replay
  Wc extra;
  EXPECT_EQ(a_.scq->poll(std::span<Wc>(&extra, 1)), 0);
}

// Drop the ACK: a times out and resends; b sees a duplicate SEND, re-ACKs it
// and does NOT deliver it a second time.
TEST_F(Reliability, LostAckMeansDuplicateReAckedNotReExecuted) {
  connect("", "drop:class=ack:nth=1");
  send_and_check(3000, 2);
  EXPECT_GE(b_.qp->counters().duplicate_request, 1u);
  EXPECT_GE(a_.qp->counters().completer_retry_err, 1u);
  Wc extra;
  for (int i = 0; i < 50; ++i) env_->step({a_.dev.get(), b_.dev.get()});
  EXPECT_EQ(b_.rcq->poll(std::span<Wc>(&extra, 1)), 0);  // delivered exactly once
}

// Drop a READ response in the middle: a retries the READ for what is missing;
// b serves it again from its saved READ resource.
TEST_F(Reliability, LostReadResponseIsServedAgain) {
  connect("", "drop:class=read:nth=5");
  read_and_check(20 * 1024, 3);
  EXPECT_GE(b_.qp->counters().duplicate_request, 1u);
  EXPECT_GE(a_.qp->counters().completer_retry_err, 1u);
}

// Drop the ATOMIC ACK: the retried atomic is answered from the replay cache;
// the add happens once.
TEST_F(Reliability, LostAtomicAckIsReplayedNotReExecuted) {
  connect("", "drop:class=atomic:nth=1");
  uint64_t v = 40;
  std::memcpy(b_.buf.data(), &v, 8);
  Sge s{a_.addr(), 8, a_.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kAtomicFetchAndAdd, &s, 1, 1);
  wr.atomic.remote_addr = b_.addr();
  wr.atomic.rkey = b_.mr->rkey();
  wr.atomic.compare_add = 2;
  ASSERT_FALSE(post_send(a_.qp, wr));
  EXPECT_EQ(one(a_.scq).status, WcStatus::kSuccess);
  uint64_t orig = 0, now = 0;
  std::memcpy(&orig, a_.buf.data(), 8);
  std::memcpy(&now, b_.buf.data(), 8);
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(now, 42u);
  EXPECT_EQ(b_.qp->counters().duplicate_request, 1u);
}

// Every packet duplicated in both directions: all data right, duplicates counted.
TEST_F(Reliability, DuplicatedPacketsAreHarmless) {
  connect("dup:p=1", "dup:p=1");
  send_and_check(8 * 1024, 4);
  read_and_check(8 * 1024, 5);
  EXPECT_GT(b_.qp->counters().duplicate_request, 0u);
}

// A corrupted packet fails its ICRC and is dropped; RC recovers.
TEST_F(Reliability, CorruptedPacketIsDroppedByIcrcAndRecovered) {
  connect("corrupt:class=send:nth=2", "");
  send_and_check(5 * 1024, 6);
  EXPECT_EQ(b_.dev->counters().rcvd_icrc_err, 1u);
}

// 10% loss each way, every operation, many messages: every byte right.
TEST_F(Reliability, RandomLossEveryOperation) {
  connect("drop:p=0.1", "drop:p=0.1", Mtu::k1024);
  for (uint8_t i = 0; i < 8; ++i) {
    send_and_check(16 * 1024 + i, i);
    read_and_check(12 * 1024 + i, static_cast<uint8_t>(i + 100));
  }
  EXPECT_GT(a_.qp->counters().completer_retry_err, 0u);
}

// Forward progress restores the retry counter (IBTA 9.7.6.1.2, rxe_comp.c):
// retry_cnt 1 allows one retry in a row without progress. A 4-packet READ
// loses its 2nd response (the 3rd starts retry 1 from the 2nd PSN); the retried
// READ's first response is progress, its second is lost, its last starts
// retry 2. Without the reset retry 2 would be RETRY_EXC_ERR.
TEST_F(Reliability, ForwardProgressResetsTheRetryCounter) {
  connect("", "drop:class=read:nth=2;drop:class=read:nth=6", Mtu::k1024, /*retry_cnt=*/1);
  read_and_check(4096, 9);
  EXPECT_EQ(a_.qp->counters().completer_retry_err, 2u);
  EXPECT_EQ(a_.qp->counters().retry_exceeded_err, 0u);
  EXPECT_EQ(a_.qp->state(), QpState::kRts);
}

// Reordering: later packets overtake earlier ones; the responder NAKs the gap
// and the data still arrives in order and intact.
TEST_F(Reliability, ReorderedPacketsRecover) {
  connect("reorder:class=send:every=4:by=2", "");
  for (uint8_t i = 0; i < 4; ++i) send_and_check(9 * 1024, i);
}

}  // namespace
}  // namespace rocelab::emu::test
