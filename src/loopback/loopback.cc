#include "loopback/loopback.h"

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "capture/pcap_writer.h"
#include "emu/connect.h"
#include "emu/device.h"
#include "emu/records/event_log.h"
#include "emu/records/pcap_tap.h"
#include "emu/transport/fault_injector.h"
#include "testbed/endpoint.h"
#include "testbed/testbed.h"
#include "wire/packet.h"

namespace rocelab::loopback {
namespace {

using namespace rocelab::emu;

constexpr unsigned kAccess = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                             access::kRemoteAtomic;

// One side: the testbed's endpoint; its MR at a fixed iova (make_side).
using Side = testbed::Endpoint;

template <typename T>
T must(wire::Result<T> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message());
  return std::move(*r);
}
void must(std::error_code ec, const char* what) {
  if (ec) throw std::runtime_error(std::string(what) + ": " + ec.message());
}

class Loopback {
 public:
  explicit Loopback(const Options& o) : o_(o) {}

  Summary run() {
    setup();
    for (const std::string& op : ops()) {
      if (!stop_reason_.empty()) {
        not_run_ += o_.count;
        continue;
      }
      run_op(op);
    }
    finish();
    return std::move(sum_);
  }

 private:
  bool sim() const { return o_.transport == "sim"; }

  std::vector<std::string> ops() const {
    std::vector<std::string> all;
    if (o_.op != "all") return {o_.op};
    all.push_back("send");
    if (type_ != QpType::kUD) all.push_back("write");
    if (type_ == QpType::kRC) {
      all.push_back("read");
      all.push_back("atomic");
    }
    return all;
  }

  // The device of one side, on the testbed's network: 192.0.2.<host> on the
  // fabric, the first free 127.0.0.x on UDP; with faults, each device injects
  // on what it sends, with its own seed so the two differ.
  std::unique_ptr<Device> make_device(uint8_t host, const DeviceConfig& cfg) {
    std::string err;
    const std::optional<testbed::NodeFaults> nf = testbed::NodeFaults::from(o_.faults, o_.faults.seed * 2 + host, &err);
    if (!err.empty()) throw std::invalid_argument("faults: " + err);
    FaultInjector* fi = nullptr;
    auto dev = bed_->make_device(wire::IpAddr::v4(192, 0, 2, host), 1, cfg, nf ? &*nf : nullptr, &fi, &err);
    if (!dev) throw std::runtime_error(err);
    if (fi) injectors_.push_back(fi);
    if (fi && fault_log_) {
      // The injector's own record of what it did, a line per packet it touched:
      // time_ns device dir actions opcode psn dest_qpn.
      fi->set_observer([this, host, fi](const FaultRecord& r) {
        auto p = wire::parse_roce(r.datagram->payload);
        if (!p) return;
        std::string acts;
        for (auto [on, name] : {std::pair{r.dropped, "drop"}, {r.duplicated, "dup"}, {r.corrupted, "corrupt"},
                                {r.delayed, "delay"}, {r.reordered, "reorder"}})
          if (on) acts += (acts.empty() ? "" : ",") + std::string(name);
        std::fprintf(fault_log_, "%lld rocelab%d %s %s 0x%02x %u 0x%06x\n",
                     static_cast<long long>(fi->now().count()), host - 1,
                     r.dir == FaultDir::kTx ? "tx" : "rx", acts.c_str(), p->hdr.bth.opcode, p->hdr.bth.psn.value(),
                     p->hdr.bth.dest_qpn.value());
      });
    }
    return dev;
  }

  void make_side(Side& s, uint8_t host, const char* name) {
    DeviceConfig cfg;
    cfg.name = name;
    mtu_from_bytes(o_.mtu, &cfg.active_mtu);
    cfg.retry_forever = o_.retry_forever;
    s.dev = make_device(host, cfg);
    if (pcap_) {
      const Nanos offset = sim() ? Nanos(0)
                                 : std::chrono::duration_cast<Nanos>(
                                       std::chrono::system_clock::now().time_since_epoch()) -
                                       s.dev->transport().now();
      // tx: each packet as sent (a lost one too); rx: as received (where a
      // responder sees the requests: what rocelab check judges best).
      taps_.push_back(std::make_unique<PcapTap>(*pcap_, o_.pcap_at == "rx" ? PcapTap::Dirs::kRx : PcapTap::Dirs::kTx,
                                                offset));
      s.dev->set_tap(taps_.back().get());
    }
    if (log_) s.dev->set_event_sink(log_->sink_for(name));
    testbed::EndpointSpec spec;
    spec.type = type_;
    spec.len = std::max<size_t>(o_.size, 64) + 64;
    spec.access = kAccess;
    spec.cqe = 1024;
    spec.cap = {64, 64, 2, 2, 64};
    spec.channel = !sim();
    // Registered at a fixed iova (as ibv_reg_mr_iova does), so that addresses
    // on the wire, and with them simulated runs, do not depend on where the
    // heap is.
    spec.iova = uint64_t{host} << 32;
    const std::string err = s.open(spec);
    if (!err.empty()) throw std::runtime_error(s.dev->name() + ": " + err);
  }

  void setup() {
    if (o_.qp_type == "rc") type_ = QpType::kRC;
    else if (o_.qp_type == "uc") type_ = QpType::kUC;
    else if (o_.qp_type == "ud") type_ = QpType::kUD;
    else throw std::invalid_argument("QP type " + o_.qp_type + ": rc, uc or ud");
    if (o_.transport != "sim" && o_.transport != "udp")
      throw std::invalid_argument("transport " + o_.transport + ": sim or udp");
    Mtu m;
    if (!mtu_from_bytes(o_.mtu, &m)) throw std::invalid_argument("MTU " + std::to_string(o_.mtu) + ": 256, 512, 1024, 2048 or 4096");
    if (type_ == QpType::kUD && o_.size > o_.mtu)
      throw std::invalid_argument("UD messages must fit in one MTU (size " + std::to_string(o_.size) + " > MTU " +
                                  std::to_string(o_.mtu) + ")");
    for (const std::string& op : ops()) {
      const bool ok = op == "send" || (op == "write" && type_ != QpType::kUD) ||
                      ((op == "read" || op == "atomic") && type_ == QpType::kRC);
      if (!ok) throw std::invalid_argument("a " + o_.qp_type + " QP has no " + op + " operation");
    }
    bed_ = std::make_unique<testbed::Testbed>(sim() ? testbed::Net::kSim : testbed::Net::kUdp);
    if (!o_.pcap.empty()) pcap_ = std::make_unique<capture::PcapWriter>(must(capture::PcapWriter::open(o_.pcap), "pcap"));
    if (!o_.events.empty()) log_ = must(EventLog::open(o_.events), "event log");
    if (!o_.fault_log.empty()) {
      fault_log_ = std::fopen(o_.fault_log.c_str(), "w");
      if (!fault_log_) throw std::runtime_error(o_.fault_log + ": " + std::strerror(errno));
    }
    make_side(a_, 1, "rocelab0");
    make_side(b_, 2, "rocelab1");
    ConnectOptions c;
    mtu_from_bytes(o_.mtu, &c.path_mtu);
    c.psn_a = 0xFFFF00;  // the PSN wraps during any longer run
    c.psn_b = 0x123456;
    c.retry_cnt = static_cast<uint8_t>(o_.retry_cnt);
    c.timeout = static_cast<uint8_t>(o_.timeout);
    must(connect_pair(*a_.dev, *a_.qp, *b_.dev, *b_.qp, c), "connect");
    if (type_ == QpType::kUD) {
      AhAttr aa;
      must(b_.dev->query_gid(kPortNum, 0, &aa.dgid), "query_gid");
      ah_ = must(a_.dev->create_ah(a_.pd, aa), "create_ah");
    }
    // UC and UD drop what the faults damage; RC must recover everything.
    lossy_ = type_ != QpType::kRC && o_.faults.active();
    start_ = std::chrono::steady_clock::now();
  }

  // Waits for one completion on cq; false (and an error) when none comes. With
  // may_be_lost (UC/UD under faults) no completion is not an error, and on UDP
  // the wait is short: a message not there by then is taken as lost. On the
  // simulated fabric the answer is exact: nothing is left in flight. A wait on
  // a side whose QP is in the error state ends as soon as its CQ is empty: the
  // flushed WRs have completed and nothing else will.
  bool wait_one(Side& s, Cq* cq, Wc* wc, bool may_be_lost = false) {
    const auto patience = may_be_lost ? std::chrono::milliseconds(50) +
                                            std::chrono::microseconds(o_.faults.delay_us + o_.faults.jitter_us)
                                      : std::chrono::milliseconds(60000);
    const auto give_up = std::chrono::steady_clock::now() + patience;
    const Nanos vstart = bed_->now();
    for (;;) {
      if (cq->poll(std::span<Wc>(wc, 1)) == 1) return true;
      if (s.qp->state() == QpState::kErr) {
        if (cq->poll(std::span<Wc>(wc, 1)) == 1) return true;
        fail(std::string(s.dev->name()) + ": the QP is in the error state: no completion will come");
        return false;
      }
      if (sim()) {
        // Nothing pending anywhere and nothing moved: nothing ever will.
        if (bed_->fabric()->next_event() == Nanos::max() && a_.dev->progress() + b_.dev->progress() == 0) break;
        if (bed_->now() - vstart > std::chrono::seconds(600)) break;
        bed_->step({a_.dev.get(), b_.dev.get()});
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now > give_up) break;
      // Block on the completion channel (at most until give_up); the helper
      // threads make progress.
      cq->req_notify(false);
      if (cq->poll(std::span<Wc>(wc, 1)) == 1) return true;
      pollfd p{s.ch->fd(), POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - now).count() + 1;
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100))) == 1) {
        Cq* fired = nullptr;
        if (!s.ch->get_event(&fired)) fired->ack_events(1);
      }
    }
    if (!may_be_lost) fail("timed out waiting for a completion");
    return false;
  }

  void fail(const std::string& what) {
    ++errors_;
    if (errors_ <= 10 && o_.on_failure) o_.on_failure(what);
  }

  // The requester's completion of the operation just posted. False, and the
  // run stops, when there is none or it is an error: the QP is then in the
  // error state (or the wait gave up), so the responder's side of the
  // operation will not complete and nothing more can be posted.
  bool requester_done(Wc* wc, WcOpcode opcode, uint32_t byte_len, const char* what) {
    if (!wait_one(a_, a_.scq, wc)) {
      stop_reason_ = "no completion";
      return false;
    }
    expect_ok(*wc, opcode, byte_len, what);
    if (wc->status == WcStatus::kSuccess) return true;
    stop_reason_ = to_string(wc->status);
    return false;
  }

  bool expect_ok(const Wc& wc, WcOpcode opcode, uint32_t byte_len, const char* what) {
    if (wc.status != WcStatus::kSuccess || wc.opcode != opcode || wc.byte_len != byte_len) {
      fail(std::string(what) + ": status " + std::string(to_string(wc.status)) + " opcode " +
           std::string(to_string(wc.opcode)) + " byte_len " + std::to_string(wc.byte_len));
      return false;
    }
    return true;
  }

  static void pattern(std::vector<std::byte>& b, size_t off, uint32_t n, uint32_t seed) {
    for (uint32_t i = 0; i < n; ++i) b[off + i] = std::byte(static_cast<uint8_t>(seed * 31 + i * 7 + (i >> 9)));
  }

  void post(Side& s, const SendWr& wr) { must(s.qp->post_send(std::span<const SendWr>(&wr, 1), nullptr), "post_send"); }
  // The receive side of a UC/UD message under faults. One receive WQE is kept
  // posted: a message that is lost leaves it for the next one (UD: never
  // taken; UC: the message that lost a packet gives it back). A message that
  // arrives must be whole and byte-exact (data_ok); a copy of the previous
  // message (a duplicated packet) is counted and waited past.
  template <typename DataOk>
  void receive_unreliable(WcOpcode opcode, uint32_t byte_len, const char* what, DataOk data_ok) {
    for (;;) {
      Wc wc;
      if (!wait_one(b_, b_.rcq, &wc, true)) {
        ++lost_;
        return;
      }
      --recv_posted_;
      if (!expect_ok(wc, opcode, byte_len, what)) return;
      switch (data_ok()) {
        case Match::kThis:
          ++delivered_;
          return;
        case Match::kPrevious:
          ++repeated_;
          break;
        case Match::kNone:
          fail(std::string(what) + ": data differs (partial or damaged message delivered)");
          return;
      }
      if (recv_posted_ == 0) post_recv_counted(b_.addr(), byte_len);
    }
  }
  enum class Match { kThis, kPrevious, kNone };
  // Which message's pattern the n bytes at p hold: message i's, i-1's or neither.
  Match which(const std::byte* p, uint32_t n, uint32_t i, uint32_t seed_base) {
    scratch_.assign(n, std::byte{0});
    pattern(scratch_, 0, n, seed_base + i);
    if (std::memcmp(p, scratch_.data(), n) == 0) return Match::kThis;
    if (i == 0) return Match::kNone;
    pattern(scratch_, 0, n, seed_base + i - 1);
    return std::memcmp(p, scratch_.data(), n) == 0 ? Match::kPrevious : Match::kNone;
  }
  void post_recv_counted(uint64_t addr, uint32_t len) {
    post_recv(b_, addr, len);
    ++recv_posted_;
  }

  void post_recv(Side& s, uint64_t addr, uint32_t len) {
    Sge sge{addr, len, s.mr->lkey()};
    RecvWr r;
    r.sg_list = std::span<const Sge>(&sge, 1);
    must(s.qp->post_recv(std::span<const RecvWr>(&r, 1), nullptr), "post_recv");
  }

  void run_op(const std::string& op) {
    const uint32_t n = o_.size;
    uint32_t i = 0;
    for (; i < o_.count && errors_ < 10; ++i) {
      Wc wc;
      Sge sge{a_.addr(), n, a_.mr->lkey()};
      SendWr wr;
      wr.wr_id = i;
      wr.sg_list = std::span<const Sge>(&sge, 1);
      wr.send_flags = send_flags::kSignaled;
      if (op == "send") {
        const uint32_t grh = type_ == QpType::kUD ? 40 : 0;
        pattern(a_.buf, 0, n, i);
        std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0});
        if (!lossy_) post_recv(b_, b_.addr(), n + grh);
        else if (recv_posted_ == 0) post_recv_counted(b_.addr(), n + grh);
        wr.opcode = WrOpcode::kSend;
        if (ah_) {
          wr.ud.ah = ah_;
          wr.ud.remote_qpn = b_.qp->qp_num();
          wr.ud.remote_qkey = 0x11111111;
        }
        post(a_, wr);
        if (!requester_done(&wc, WcOpcode::kSend, n, "SEND (requester)")) break;
        if (lossy_) {
          receive_unreliable(WcOpcode::kRecv, n + grh, "SEND (responder)",
                             [&] { return which(b_.buf.data() + grh, n, i, 0); });
        } else if (wait_one(b_, b_.rcq, &wc) && expect_ok(wc, WcOpcode::kRecv, n + grh, "SEND (responder)") &&
            std::memcmp(b_.buf.data() + grh, a_.buf.data(), n) != 0)
          fail("SEND: data differs");
      } else if (op == "write") {
        // UC completes at transmit: WRITE_WITH_IMM tells the target when the data is there.
        const bool imm = type_ == QpType::kUC || (i & 1);
        pattern(a_.buf, 0, n, i + 1000);
        std::fill(b_.buf.begin(), b_.buf.end(), std::byte{0});
        if (imm && !lossy_) post_recv(b_, b_.addr(), 0);
        else if (imm && recv_posted_ == 0) post_recv_counted(b_.addr(), 0);
        wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
        wr.imm_data = i;
        wr.rdma.remote_addr = b_.addr();
        wr.rdma.rkey = b_.mr->rkey();
        post(a_, wr);
        if (!requester_done(&wc, WcOpcode::kRdmaWrite, n, "WRITE")) break;
        if (lossy_) {
          // UC WRITE: only the immediate says the data is all there. A lost
          // message may have placed some of its packets: not checked.
          receive_unreliable(WcOpcode::kRecvRdmaWithImm, n, "WRITE_WITH_IMM (responder)",
                             [&] { return which(b_.buf.data(), n, i, 1000); });
          ++ops_;
          bytes_ += n;
          continue;
        }
        if (imm && wait_one(b_, b_.rcq, &wc)) expect_ok(wc, WcOpcode::kRecvRdmaWithImm, n, "WRITE_WITH_IMM (responder)");
        if (std::memcmp(b_.buf.data(), a_.buf.data(), n) != 0) fail("WRITE: data differs");
      } else if (op == "read") {
        pattern(b_.buf, 0, n, i + 2000);
        std::fill(a_.buf.begin(), a_.buf.end(), std::byte{0});
        wr.opcode = WrOpcode::kRdmaRead;
        wr.rdma.remote_addr = b_.addr();
        wr.rdma.rkey = b_.mr->rkey();
        post(a_, wr);
        if (!requester_done(&wc, WcOpcode::kRdmaRead, n, "READ")) break;
        if (std::memcmp(a_.buf.data(), b_.buf.data(), n) != 0) fail("READ: data differs");
      } else {
        // Alternate FETCH_ADD and CMP_SWP on one 8-byte word, checked against a model.
        uint64_t* target = reinterpret_cast<uint64_t*>(b_.buf.data());
        if (i == 0) *target = model_ = 0x1000;
        sge.length = 8;
        wr.atomic.remote_addr = b_.addr();
        wr.atomic.rkey = b_.mr->rkey();
        const bool cas = i & 1;
        wr.opcode = cas ? WrOpcode::kAtomicCmpAndSwp : WrOpcode::kAtomicFetchAndAdd;
        wr.atomic.compare_add = cas ? model_ : i + 1;
        wr.atomic.swap = model_ * 3 + i;
        post(a_, wr);
        uint64_t orig = 0;
        if (!requester_done(&wc, cas ? WcOpcode::kCompSwap : WcOpcode::kFetchAdd, 8, "ATOMIC")) break;
        std::memcpy(&orig, a_.buf.data(), 8);
        if (orig != model_) fail("ATOMIC: original value differs");
        model_ = cas ? model_ * 3 + i : model_ + i + 1;
        if (*target != model_) fail("ATOMIC: target value differs");
        ++ops_;
        bytes_ += 8;
        continue;
      }
      ++ops_;
      bytes_ += n;
    }
    // The operation that broke the connection counts as failed, not as not run.
    if (!stop_reason_.empty()) not_run_ += o_.count - std::min(o_.count, i + 1);
  }

  void finish() {
    sum_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (o_.counters) {
      for (Side* s : {&a_, &b_}) {
        Summary::DeviceCounters dc{s->dev->name(), {}};
        s->dev->counters().for_each([&](std::string_view name, uint64_t v) {
          if (v) dc.nonzero.emplace_back(std::string(name), v);
        });
        sum_.counters.push_back(std::move(dc));
      }
    }
    for (FaultInjector* fi : injectors_) sum_.faults.push_back(fi->fault_stats());
    injectors_.clear();
    if (pcap_) {
      // Stop the devices first: nothing is written to the capture after this.
      a_.dev.reset();
      b_.dev.reset();
      if (auto ec = pcap_->close()) fail("pcap: " + ec.message());
    }
    if (log_) log_->flush();
    if (fault_log_) {
      a_.dev.reset();  // nothing is injected after this
      b_.dev.reset();
      if (std::fclose(fault_log_) != 0) fail("fault log: " + std::string(std::strerror(errno)));
      fault_log_ = nullptr;
    }
    sum_.ops = ops_;
    sum_.bytes = bytes_;
    sum_.errors = errors_;
    sum_.stop_reason = stop_reason_;
    sum_.not_run = not_run_;
    sum_.lossy = lossy_;
    sum_.delivered = delivered_;
    sum_.lost = lost_;
    sum_.repeated = repeated_;
  }

  Options o_;
  QpType type_ = QpType::kRC;
  std::unique_ptr<testbed::Testbed> bed_;
  std::unique_ptr<capture::PcapWriter> pcap_;
  std::vector<std::unique_ptr<PcapTap>> taps_;
  std::unique_ptr<EventLog> log_;
  std::vector<FaultInjector*> injectors_;  // owned by the devices
  std::FILE* fault_log_ = nullptr;
  Side a_, b_;
  Ah* ah_ = nullptr;
  uint64_t ops_ = 0, bytes_ = 0, errors_ = 0;
  uint64_t model_ = 0;
  std::string stop_reason_;                     // why the run stopped early ("" while it runs)
  uint64_t not_run_ = 0;                        // operations never posted because of it
  bool lossy_ = false;                          // UC/UD under faults
  uint64_t delivered_ = 0, lost_ = 0, repeated_ = 0;
  uint64_t recv_posted_ = 0;                    // lossy_: receive WQEs posted and not completed
  std::vector<std::byte> scratch_;
  std::chrono::steady_clock::time_point start_;
  Summary sum_;
};

}  // namespace

bool run(const Options& o, Summary* summary, std::string* error) {
  try {
    *summary = Loopback(o).run();
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

}  // namespace rocelab::loopback
