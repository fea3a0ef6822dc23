// Property tests of RC reliability: random workloads on several RC
// QPs under random loss, reordering and duplication (property_workload.h says
// what a seed draws). Every RC message must be delivered exactly once, in
// order and byte-exact, every atomic applied exactly once, every WR complete
// with SUCCESS, and nothing else may appear in any CQ (property_check.h).
// Each failure prints its seed and a command line that runs just that seed:
//   ROCELAB_PROPERTY_SEED=N    emu_property_tests --gtest_filter='RcPropertySim.ChosenSeeds'
//   ROCELAB_PROPERTY_SEEDS=FIRST:COUNT (or COUNT, from 1) runs many seeds there.
// (RcPropertyUdp.ChosenSeeds for real UDP.) The same seed on the simulated
// fabric gives the same packets, byte for byte (SameSeedSameCapture).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "capture/pcap_writer.h"
#include "emu/records/pcap_tap.h"
#include "tests/emu/pair.h"
#include "tests/emu/property_check.h"
#include "tests/emu/property_workload.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic;
constexpr QpCap kCap = {64, 256, 4, 4, kMaxInline};
constexpr int kCqe = 4096;

PropertyLimits limits(Net net) {
  PropertyLimits l;
  if (net == Net::kUdp) {  // real sockets, real time: smaller and gentler
    l.pairs = 2;
    l.min_ops = 8;
    l.max_ops = 20;
    l.max_size = 64 * 1024;
    l.max_loss_pm = 100;
    l.max_reorder_pm = 50;
    l.max_dup_pm = 50;
    l.max_corrupt_pm = 10;
    l.rx_rules = false;
    l.small_mtu = false;
    l.short_timeouts = false;
  }
  return l;
}

std::string reproduce(Net net, uint64_t seed) {
  return "reproduce: ROCELAB_PROPERTY_SEED=" + std::to_string(seed) +
         " emu_property_tests --gtest_filter=" + (net == Net::kSim ? "RcPropertySim" : "RcPropertyUdp") +
         ".ChosenSeeds";
}

// One scenario on two devices. Declaration order is destruction order in
// reverse: the devices (and their helper threads) go before the buffers they
// write into, the fabric last.
class Run {
 public:
  Run(Net net, const Scenario& sc) : net_(net), sc_(sc), rng_(mix64(sc.seed ^ 0x52554E)) {}

  // Runs everything and reports each violation as a test failure.
  void execute(std::array<PacketTap*, 2> taps = {nullptr, nullptr}) {
    if (!set_up(taps)) return;
    drive();
    if (failures_ == 0) drain();
    if (failures_ == 0) check_memory();
    check_faults_happened();
    if (std::getenv("ROCELAB_PROPERTY_VERBOSE")) print_summary();
  }

 private:
  struct Side {
    std::unique_ptr<Device> dev;
    Pd* pd = nullptr;
    Cq* scq = nullptr;
    Cq* rcq = nullptr;
    std::vector<Qp*> qps;
    std::map<uint32_t, size_t> send_stream, recv_stream;  // qp_num -> stream
  };
  struct Stream {
    std::vector<std::byte> local, remote;  // never resized once registered
    Mr* lmr = nullptr;
    Mr* rmr = nullptr;
    size_t posted = 0, recv_posted = 0;
  };
  static uint64_t iova(size_t stream) { return (uint64_t{stream} + 1) << 32; }

  // The first few violations (the rest usually follow from them).
  void fail(const std::string& what) {
    if (failures_ < 5) ADD_FAILURE() << what << (failures_ == 0 ? "\n" + sc_.describe() : "");
    if (failures_ == 5) ADD_FAILURE() << "(further violations of this seed not shown)";
    ++failures_;
  }

  bool set_up(std::array<PacketTap*, 2> taps) {
    env_ = std::make_unique<Env>(net_, sc_.mtu);
    env_->set_retry_forever(true);  // up to 30 % loss: retry_cnt 7 as rxe reads it
    for (int d = 0; d < 2; ++d) {
      Side& s = side_[d];
      env_->set_fault_config(sc_.faults[d]);
      s.dev = env_->make_device(static_cast<uint8_t>(d + 1));
      if (!s.dev) return fail("cannot create device"), false;
      if (taps[d]) s.dev->set_tap(taps[d]);
      if (std::getenv("ROCELAB_PROPERTY_DEBUG")) s.dev->set_event_sink(&debug_[d]);
      s.pd = *s.dev->alloc_pd();
      s.scq = *s.dev->create_cq(kCqe, nullptr, 0);
      s.rcq = *s.dev->create_cq(kCqe, nullptr, 0);
    }
    ConnectOptions o;
    o.path_mtu = sc_.mtu;
    o.psn_a = sc_.psn[0];
    o.psn_b = sc_.psn[1];
    o.timeout = sc_.timeout;
    o.retry_cnt = 7;  // forever on these devices (set_retry_forever), as rxe
    o.rnr_retry = 7;
    o.min_rnr_timer = sc_.min_rnr_timer;
    o.max_rd_atomic = sc_.max_rd_atomic;
    const unsigned pairs = sc_.streams.empty() ? 0 : sc_.streams.back().pair + 1;
    for (unsigned p = 0; p < pairs; ++p) {
      for (Side& s : side_) {
        QpInitAttr ia;
        ia.send_cq = s.scq;
        ia.recv_cq = s.rcq;
        ia.cap = kCap;
        auto qp = s.dev->create_qp(s.pd, ia);
        if (!qp) return fail("create_qp: " + qp.error().message()), false;
        s.qps.push_back(*qp);
      }
      if (auto ec = connect_pair(*side_[0].dev, *side_[0].qps[p], *side_[1].dev, *side_[1].qps[p], o)) {
        return fail("connect_pair: " + ec.message()), false;
      }
    }
    streams_.resize(sc_.streams.size());
    for (size_t i = 0; i < sc_.streams.size(); ++i) {
      const StreamPlan& plan = sc_.streams[i];
      Stream& st = streams_[i];
      Side& req = side_[plan.req];
      Side& resp = side_[1 - plan.req];
      st.local = plan.initial_local();
      st.remote = plan.initial_remote();
      auto lmr = req.dev->reg_mr(req.pd, st.local.data(), st.local.size(), iova(i), kAll);
      auto rmr = resp.dev->reg_mr(resp.pd, st.remote.data(), st.remote.size(), iova(i), kAll);
      if (!lmr || !rmr) return fail("reg_mr failed"), false;
      st.lmr = *lmr;
      st.rmr = *rmr;
      req.send_stream[req.qps[plan.pair]->qp_num()] = i;
      resp.recv_stream[resp.qps[plan.pair]->qp_num()] = i;
      checkers_.emplace_back(plan);
    }
    return true;
  }

  void post_sends(size_t i) {
    const StreamPlan& plan = sc_.streams[i];
    Stream& st = streams_[i];
    const size_t in_flight = st.posted - checkers_[i].done();
    if (st.posted == plan.ops.size() || in_flight >= plan.window) return;
    const size_t batch = std::min<size_t>({plan.window - in_flight, plan.ops.size() - st.posted,
                                           1 + rng_.below(4)});
    std::array<SendWr, 4> wrs;
    std::array<std::array<Sge, 3>, 4> sges;
    for (size_t k = 0; k < batch; ++k) {
      const size_t idx = st.posted + k;
      const Op& op = plan.ops[idx];
      // Inline data is read from the process address (no lkey), as in libibverbs.
      const uint64_t base = op.inline_data ? reinterpret_cast<uint64_t>(st.local.data() + op.local_off)
                                           : iova(i) + op.local_off;
      const uint32_t cuts[4] = {0, op.nsge > 1 ? op.split[0] : op.len, op.nsge > 2 ? op.split[1] : op.len,
                                op.len};
      for (unsigned g = 0; g < op.nsge; ++g) {
        const uint32_t end = g + 1 == op.nsge ? op.len : cuts[g + 1];
        sges[k][g] = Sge{base + cuts[g], end - cuts[g], st.lmr->lkey()};
      }
      SendWr& wr = wrs[k];
      wr = SendWr{};
      wr.wr_id = idx;
      wr.opcode = wr_opcode(op.kind);
      wr.sg_list = std::span<const Sge>(sges[k].data(), op.nsge);
      wr.send_flags = (op.signaled ? send_flags::kSignaled : 0u) | (op.fence ? send_flags::kFence : 0u) |
                      (op.inline_data ? send_flags::kInline : 0u);
      wr.imm_data = op.imm;
      const uint64_t raddr = iova(i) + op.remote_off;
      if (is_atomic(op.kind)) {
        wr.atomic.remote_addr = raddr;
        wr.atomic.rkey = st.rmr->rkey();
        wr.atomic.compare_add = op.compare_add;
        wr.atomic.swap = op.swap;
      } else {
        wr.rdma.remote_addr = raddr;
        wr.rdma.rkey = st.rmr->rkey();
      }
    }
    size_t n = 0;
    const auto ec = side_[plan.req].qps[plan.pair]->post_send(std::span<const SendWr>(wrs.data(), batch), &n);
    if (ec || n != batch) {
      return fail("stream " + std::to_string(i) + ": post_send of WR " + std::to_string(st.posted) +
                  ": " + ec.message());
    }
    st.posted += batch;
  }

  void post_recvs(size_t i) {
    const StreamPlan& plan = sc_.streams[i];
    Stream& st = streams_[i];
    size_t target = plan.recvs.size();
    if (plan.lazy_recv) target = std::min(target, st.recv_posted + (rng_.per_mille(200) ? 1 : 0));
    Qp* qp = side_[1 - plan.req].qps[plan.pair];
    for (; st.recv_posted < target; ++st.recv_posted) {
      const RecvPlan& rp = plan.recvs[st.recv_posted];
      const uint64_t base = iova(i) + rp.off;
      Sge sg[2] = {{base, rp.cap, st.rmr->lkey()}, {}};
      if (rp.split) sg[0].length = rp.split, sg[1] = Sge{base + rp.split, rp.cap - rp.split, st.rmr->lkey()};
      RecvWr r;
      r.wr_id = st.recv_posted;
      r.sg_list = std::span<const Sge>(sg, rp.split ? 2 : 1);
      size_t n = 0;
      if (auto ec = qp->post_recv(std::span<const RecvWr>(&r, 1), &n)) {
        return fail("stream " + std::to_string(i) + ": post_recv: " + ec.message());
      }
    }
  }

  // Polls every CQ once; returns how many completions it took.
  size_t poll_all() {
    size_t total = 0;
    for (Side& s : side_) {
      for (Cq* cq : {s.scq, s.rcq}) {
        Wc wc[32];
        const int n = cq->poll(std::span<Wc>(wc, 32));
        for (int k = 0; k < n; ++k) on_wc(s, cq == s.scq, wc[k]);
        total += static_cast<size_t>(std::max(n, 0));
      }
    }
    return total;
  }

  void on_wc(Side& s, bool send, const Wc& wc) {
    auto& owners = send ? s.send_stream : s.recv_stream;
    const auto it = owners.find(wc.qp_num);
    if (it == owners.end()) {
      return fail(std::string(send ? "send" : "receive") + " completion for QP " + std::to_string(wc.qp_num) +
                  " that has no stream: " + std::string(to_string(wc.status)));
    }
    const size_t i = it->second;
    const std::string err = send ? checkers_[i].on_send(wc) : checkers_[i].on_recv(wc, streams_[i].remote);
    if (!err.empty()) fail("stream " + std::to_string(i) + ": " + err);
  }

  bool all_finished() const {
    for (const StreamChecker& c : checkers_) {
      if (!c.finished()) return false;
    }
    return true;
  }

  // One progress round; on the fabric, when nothing moved, the clock jumps to
  // the next event. Returns false when nothing at all is pending (no packet,
  // no timer): then only the test itself can make progress, by posting.
  bool step() {
    if (net_ == Net::kSim && env_->fabric()->next_event() == Nanos::max()) {
      return side_[0].dev->progress() + side_[1].dev->progress() > 0;
    }
    env_->step({side_[0].dev.get(), side_[1].dev.get()});
    return true;
  }

  // A hang guard, not a timing assertion: 60 s of virtual time on the fabric
  // (retries are forever), 60 s of real time on UDP.
  bool out_of_budget() {
    if (net_ == Net::kSim) return env_->fabric()->now() - vstart_ > std::chrono::seconds(60);
    return std::chrono::steady_clock::now() - start_ > std::chrono::seconds(60);
  }

  void drive() {
    start_ = std::chrono::steady_clock::now();
    vstart_ = net_ == Net::kSim ? env_->fabric()->now() : Nanos(0);
    while (failures_ == 0 && !all_finished()) {
      for (size_t i = 0; i < streams_.size() && failures_ == 0; ++i) {
        post_recvs(i);
        post_sends(i);
      }
      if (poll_all() == 0 && !step()) {
        // Lazy receives come one in a few rounds; anything else is a stall.
        if (++idle_rounds_ > 10000) return fail("stalled: nothing in flight, no timer armed" + progress());
      } else {
        idle_rounds_ = 0;
      }
      if (out_of_budget()) return fail("no progress within the budget" + progress());
    }
  }

  // Per stream: WRs posted/completed, receives posted/completed.
  std::string progress() const {
    std::string state = "; per stream WRs posted/completed, receives posted/completed:";
    for (size_t i = 0; i < streams_.size(); ++i) {
      state += " [" + std::to_string(streams_[i].posted) + "/" + std::to_string(checkers_[i].done()) + ", " +
               std::to_string(streams_[i].recv_posted) + "/" + std::to_string(checkers_[i].recv_done()) + "]";
    }
    return state;
  }

  // Lets late duplicates and ACKs play out: any completion now is one too many.
  void drain() {
    if (net_ == Net::kSim) {
      const Nanos until = env_->fabric()->now() + std::chrono::seconds(1);
      while (failures_ == 0 && env_->fabric()->next_event() < until) {
        poll_all();
        step();
      }
    } else {
      for (int k = 0; k < 50 && failures_ == 0; ++k) {
        poll_all();
        step();
      }
    }
    poll_all();
    for (Side& s : side_) {
      for (Qp* qp : s.qps) {
        if (qp->state() != QpState::kRts) fail("QP " + std::to_string(qp->qp_num()) + " is in " +
                                               std::string(to_string(qp->state())));
      }
    }
  }

  void check_memory() {
    for (size_t i = 0; i < streams_.size(); ++i) {
      for (const std::string& err : {checkers_[i].check_local(streams_[i].local),
                                     checkers_[i].check_remote(streams_[i].remote)}) {
        if (!err.empty()) fail("stream " + std::to_string(i) + ": " + err);
      }
    }
  }

  // ROCELAB_PROPERTY_VERBOSE=1: the scenario and what it cost.
  void print_summary() {
    std::string out = sc_.describe();
    char b[256];
    if (net_ == Net::kSim) {
      std::snprintf(b, sizeof b, "  virtual time %.3f ms\n",
                    static_cast<double>((env_->fabric()->now() - vstart_).count()) / 1e6);
      out += b;
    }
    for (int d = 0; d < 2; ++d) {
      const Counters c = side_[d].dev->counters();
      std::snprintf(b, sizeof b,
                    "  device %c: sent %llu, received %llu, retries %llu, seq NAKs %llu, RNR NAKs %llu, duplicates %llu\n",
                    d == 0 ? 'A' : 'B', static_cast<unsigned long long>(c.sent_pkts),
                    static_cast<unsigned long long>(c.rcvd_pkts),
                    static_cast<unsigned long long>(c.completer_retry_err),
                    static_cast<unsigned long long>(c.rcvd_seq_err), static_cast<unsigned long long>(c.rcvd_rnr_err),
                    static_cast<unsigned long long>(c.duplicate_request));
      out += b;
    }
    std::fputs(out.c_str(), stderr);
  }

  // The faults must really have happened (a disabled injector would pass
  // everything else). Only on the fabric, where nothing runs concurrently.
  void check_faults_happened() {
    if (net_ != Net::kSim) return;
    for (int d = 0; d < 2; ++d) {
      auto* fi = dynamic_cast<FaultInjector*>(&side_[d].dev->transport());
      if (sc_.faults[d].loss < 0.05) continue;
      if (!fi) return fail("device has no fault injector");
      const FaultStats fs = fi->fault_stats();
      if (fs.tx.seen >= 200 && fs.tx.dropped == 0) {
        fail("loss " + std::to_string(sc_.faults[d].loss) + " configured but nothing dropped in " +
             std::to_string(fs.tx.seen) + " packets");
      }
    }
  }

  // ROCELAB_PROPERTY_DEBUG=1: every engine event on stderr.
  struct DebugSink : EventSink {
    char name;
    explicit DebugSink(char n) : name(n) {}
    void on_event(const EngineEvent& e) override {
      std::fprintf(stderr, "%c t=%lld %s qpn=%u wr=%llu op=%u psn=%u len=%u st=%s %.*s\n", name,
                   static_cast<long long>(e.time.count()), std::string(to_string(e.kind)).c_str(), e.qpn,
                   static_cast<unsigned long long>(e.wr_id), e.bth_opcode, e.psn, e.length,
                   std::string(to_string(e.status)).c_str(), static_cast<int>(e.reason.size()),
                   e.reason.data());
    }
  };

  Net net_;
  const Scenario& sc_;
  std::array<DebugSink, 2> debug_{DebugSink('A'), DebugSink('B')};
  Rng rng_;  // posting batches and lazy receives: deterministic per seed
  int failures_ = 0;
  int idle_rounds_ = 0;
  std::chrono::steady_clock::time_point start_;
  Nanos vstart_{0};
  std::unique_ptr<Env> env_;
  std::vector<Stream> streams_;
  std::vector<StreamChecker> checkers_;
  std::array<Side, 2> side_;
};

void run_seed(Net net, uint64_t seed) {
  SCOPED_TRACE(reproduce(net, seed));
  const Scenario sc = make_scenario(seed, limits(net));
  Run(net, sc).execute();
}

// ROCELAB_PROPERTY_SEED=N: that seed; ROCELAB_PROPERTY_SEEDS=FIRST:COUNT or COUNT (from 1).
std::vector<uint64_t> chosen_seeds() {
  std::vector<uint64_t> out;
  if (const char* one = std::getenv("ROCELAB_PROPERTY_SEED")) out.push_back(std::strtoull(one, nullptr, 0));
  if (const char* many = std::getenv("ROCELAB_PROPERTY_SEEDS")) {
    char* end = nullptr;
    uint64_t first = 1, count = std::strtoull(many, &end, 0);
    if (end && *end == ':') first = count, count = std::strtoull(end + 1, nullptr, 0);
    for (uint64_t k = 0; k < count; ++k) out.push_back(first + k);
  }
  return out;
}

std::string seed_name(const ::testing::TestParamInfo<uint64_t>& info) {
  return "seed_" + std::to_string(info.param);
}

class RcPropertySim : public ::testing::TestWithParam<uint64_t> {};
class RcPropertyUdp : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RcPropertySim, RandomWorkload) { run_seed(Net::kSim, GetParam()); }
TEST_P(RcPropertyUdp, RandomWorkload) { run_seed(Net::kUdp, GetParam()); }

INSTANTIATE_TEST_SUITE_P(Seeds, RcPropertySim, ::testing::Range<uint64_t>(1, 31), seed_name);
INSTANTIATE_TEST_SUITE_P(Seeds, RcPropertyUdp, ::testing::Range<uint64_t>(1, 9), seed_name);

TEST(RcPropertySim, ChosenSeeds) {
  const auto seeds = chosen_seeds();
  if (seeds.empty()) GTEST_SKIP() << "set ROCELAB_PROPERTY_SEED=N or ROCELAB_PROPERTY_SEEDS=FIRST:COUNT";
  for (uint64_t s : seeds) run_seed(Net::kSim, s);
}

TEST(RcPropertyUdp, ChosenSeeds) {
  const auto seeds = chosen_seeds();
  if (seeds.empty()) GTEST_SKIP() << "set ROCELAB_PROPERTY_SEED=N or ROCELAB_PROPERTY_SEEDS=FIRST:COUNT";
  for (uint64_t s : seeds) run_seed(Net::kUdp, s);
}

// The checks catch what they exist for. A stream of three 100-byte SENDs:
// the right history passes; a duplicated delivery (message 0 lands in receive
// 1 too), a reordered one, an extra completion, a lost message and an atomic
// applied twice each fail.
StreamPlan three_sends_and_an_add() {
  StreamPlan p;
  p.local_tag = 11;
  p.remote_tag = 22;
  p.fadd_init = 1000;
  for (size_t i = 0; i < 3; ++i) {
    Op op;
    op.len = 100;
    op.local_off = i * 128;
    op.recv = i;
    p.ops.push_back(op);
    p.recvs.push_back(RecvPlan{i, 1024 + i * 128, 100, 0});
  }
  Op add;
  add.kind = OpKind::kFetchAdd;
  add.len = 8;
  add.local_off = 512;
  add.compare_add = 5;
  add.expect_orig = 1000;
  p.ops.push_back(add);
  p.local_len = 640;
  p.remote_len = 1536;
  return p;
}

Wc recv_wc(uint64_t wr_id) {
  Wc wc;
  wc.wr_id = wr_id;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = 100;
  return wc;
}

void deliver(const StreamPlan& p, std::vector<std::byte>& remote, size_t msg, size_t into) {
  const auto src = p.source(p.ops[msg]);
  std::copy(src.begin(), src.end(), remote.begin() + static_cast<ptrdiff_t>(p.recvs[into].off));
}

TEST(RcPropertyCheck, CatchesDuplicatedReorderedExtraAndLostDeliveries) {
  const StreamPlan p = three_sends_and_an_add();
  {  // the right history
    StreamChecker c(p);
    auto remote = p.initial_remote();
    for (size_t i = 0; i < 3; ++i) {
      deliver(p, remote, i, i);
      EXPECT_EQ(c.on_recv(recv_wc(i), remote), "");
    }
    EXPECT_EQ(c.check_remote(p.final_remote()), "");
    EXPECT_EQ(c.check_local(p.final_local()), "");
    EXPECT_NE(c.on_recv(recv_wc(3), remote).find("unexpected receive completion"), std::string::npos);
  }
  {  // message 0 delivered twice: the duplicate takes receive 1
    StreamChecker c(p);
    auto remote = p.initial_remote();
    deliver(p, remote, 0, 0);
    deliver(p, remote, 0, 1);
    EXPECT_EQ(c.on_recv(recv_wc(0), remote), "");
    EXPECT_NE(c.on_recv(recv_wc(1), remote).find("stream 0 WR 0"), std::string::npos);
  }
  {  // messages 0 and 1 swapped
    StreamChecker c(p);
    auto remote = p.initial_remote();
    deliver(p, remote, 1, 0);
    EXPECT_NE(c.on_recv(recv_wc(0), remote).find("stream 0 WR 1"), std::string::npos);
  }
  {  // a receive completion out of order
    StreamChecker c(p);
    EXPECT_NE(c.on_recv(recv_wc(1), p.initial_remote()).find("out of order"), std::string::npos);
  }
  {  // message 2 never arrived; the add applied twice; the add returned a wrong value
    StreamChecker c(p);
    auto remote = p.final_remote();
    std::fill_n(remote.begin() + 1024 + 256, 100, std::byte{0});
    EXPECT_NE(c.check_remote(remote).find("receive 2"), std::string::npos);
    remote = p.final_remote();
    const uint64_t twice = 1010;
    std::memcpy(remote.data() + StreamPlan::kFaddOff, &twice, 8);
    EXPECT_NE(c.check_remote(remote).find("FETCH_ADD"), std::string::npos);
    auto local = p.final_local();
    const uint64_t wrong = 1005;
    std::memcpy(local.data() + 512, &wrong, 8);
    EXPECT_NE(c.check_local(local).find("FETCH_ADD"), std::string::npos);
  }
  {  // send completions: the second before the first, then a duplicate
    StreamChecker c(p);
    Wc wc;
    wc.wr_id = 1;
    EXPECT_NE(c.on_send(wc).find("out of order"), std::string::npos);
    wc.wr_id = 0;
    EXPECT_EQ(c.on_send(wc), "");
    EXPECT_NE(c.on_send(wc).find("out of order"), std::string::npos);
  }
}

std::string capture(uint64_t seed, const std::string& path) {
  const Scenario sc = make_scenario(seed, limits(Net::kSim));
  {
    capture::PcapWriter::Options opt;
    opt.nanosecond = true;
    auto w = capture::PcapWriter::open(path, opt);
    EXPECT_TRUE(w.ok()) << path;
    if (!w) return "";
    PcapTap ta(*w, PcapTap::Dirs::kTx), tb(*w, PcapTap::Dirs::kTx);
    Run(Net::kSim, sc).execute({&ta, &tb});
    EXPECT_EQ(ta.errors() + tb.errors(), 0u);
    EXPECT_FALSE(w->close());
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(in.good()) << path;
  std::remove(path.c_str());
  return bytes;
}

// Determinism: the same seed twice gives the same packets, byte for byte
// (payloads, PSNs, which packets were lost or duplicated, virtual timestamps).
TEST(RcPropertySim, SameSeedSameCapture) {
  const std::string dir = ::testing::TempDir();
  std::string first_of_seed[2];
  const uint64_t seeds[2] = {3, 26};  // ~10k and ~1k packets, NAKs, retries and RNR NAKs
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(reproduce(Net::kSim, seeds[k]));
    const std::string a = capture(seeds[k], dir + "rocelab_prop_a.pcap");
    const std::string b = capture(seeds[k], dir + "rocelab_prop_b.pcap");
    EXPECT_GT(a.size(), 10000u);
    EXPECT_TRUE(a == b) << "seed " << seeds[k] << ": captures differ (" << a.size() << " vs " << b.size()
                        << " bytes)";
    first_of_seed[k] = a;
  }
  EXPECT_NE(first_of_seed[0], first_of_seed[1]);  // and the seed matters
}

}  // namespace
}  // namespace rocelab::emu::test
