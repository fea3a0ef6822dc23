// Test harness for src/cm: "processes" (an emulated device, its own Cm and an
// event channel) on the simulated fabric or on real UDP sockets (127.0.0.x),
// built on the testbed (src/testbed) as the engine tests are. It also
// plays librdmacm's part where the tests need a QP: it moves QPs with the
// attributes init_qp_attr gives, as ucma_modify_qp_rtr/rts do.
#pragma once
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cm/rdma_cm.h"
#include "emu/device.h"
#include "emu/transport/fault_config.h"
#include "testbed/endpoint.h"
#include "testbed/testbed.h"

namespace rocelab::cm::test {

using namespace std::chrono_literals;
using Nanos = std::chrono::nanoseconds;

using testbed::Net;

// A process: its device and objects (testbed::Endpoint without a QP: make_qp
// adds one per connection) and its CM with one event channel.
struct Side : testbed::Endpoint {
  std::unique_ptr<Cm> cm;
  ChannelHandle cm_ch = 0;
  wire::IpAddr addr() const { return dev->address(); }
  SockAddr at(uint16_t port) const { return {dev->address(), port}; }
};

class CmEnv {
 public:
  explicit CmEnv(Net net) : net_(net), bed_(net) {}
  Net net() const { return net_; }
  testbed::Testbed& bed() { return bed_; }

  // A process on host (10.0.0.host on the fabric, the first free 127.0.0.x
  // from 100+host on UDP); faults: a drop-schedule SPEC (fault_config.h) for
  // what its device sends; with_cm false: a device whose QP 1 nobody serves.
  Side make_side(uint8_t host, const std::string& faults = "", bool with_cm = true,
                 CmConfig cfg = {}, std::optional<wire::IpAddr> sim_addr = std::nullopt) {
    Side s;
    std::optional<testbed::NodeFaults> nf;
    if (!faults.empty()) {
      emu::FaultConfig fc;
      fc.schedule = faults;
      std::string why;
      nf = testbed::NodeFaults::from(fc, host, &why);
      EXPECT_EQ(why, "");
    }
    std::string err;
    s.dev = bed_.make_device(sim_addr ? *sim_addr : wire::IpAddr::v4(10, 0, 0, host),
                             static_cast<uint8_t>(100 + host), {},
                             nf ? &*nf : nullptr, nullptr, &err);
    if (!s.dev) {
      ADD_FAILURE() << err;
      return s;
    }
    devs_.push_back(s.dev.get());
    testbed::EndpointSpec spec;
    spec.access = emu::access::kLocalWrite | emu::access::kRemoteWrite | emu::access::kRemoteRead;
    spec.with_qp = false;
    EXPECT_EQ(s.open(spec), "");
    if (!with_cm) return s;
    if (net_ == Net::kSim) {
      cfg.route = [](const emu::Device&, const wire::IpAddr&) { return RouteVerdict::kReachable; };
      if (cfg.seed == 0) cfg.seed = host;
    }
    s.cm = std::make_unique<Cm>(cfg);
    EXPECT_FALSE(s.cm->add_device(*s.dev));
    s.cm_ch = *s.cm->create_channel();
    return s;
  }

  // One round of progress; on the fabric the clock moves to the next event
  // when nothing else does. False when nothing can happen any more (fabric idle).
  bool step() {
    const size_t moved = bed_.step(devs_);
    if (net_ == Net::kSim && moved == 0 && bed_.fabric()->next_event() == Nanos::max()) return false;
    return true;
  }
  Nanos now() const { return bed_.now(); }

  // The next event of s's channel, or nullopt after budget (virtual time on
  // the fabric, real time on UDP: a hang guard, not a timing assertion).
  std::optional<Event> next_event(Side& s, Nanos budget = 400s) {
    const Nanos start = bed_.now();
    const auto wall = std::chrono::steady_clock::now();
    for (;;) {
      Event ev;
      if (!s.cm->get_event(s.cm_ch, &ev)) return ev;
      if (net_ == Net::kSim ? bed_.now() - start > budget
                                 : std::chrono::steady_clock::now() - wall > std::chrono::seconds(20))
        return std::nullopt;
      if (!step()) {
        if (!s.cm->get_event(s.cm_ch, &ev)) return ev;
        return std::nullopt;
      }
    }
  }
  // Expects the next event to be of type t; returns it.
  Event expect_event(Side& s, EventType t, Nanos budget = 400s) {
    auto ev = next_event(s, budget);
    EXPECT_TRUE(ev.has_value()) << "no event, wanted " << to_string(t);
    if (!ev) return {};
    EXPECT_EQ(to_string(ev->type), to_string(t)) << "status " << ev->status;
    return *ev;
  }
  // Runs the network for d (virtual or real time).
  void run_for(Nanos d) {
    const Nanos end = bed_.now() + d;
    while (bed_.now() < end) {
      if (!step()) break;
    }
  }

 private:
  Net net_;
  testbed::Testbed bed_;
  std::vector<emu::Device*> devs_;
};

inline emu::Qp* make_qp(Side& s, emu::QpType t = emu::QpType::kRC) {
  emu::QpInitAttr ia;
  ia.send_cq = s.scq;
  ia.recv_cq = s.rcq;
  ia.qp_type = t;
  ia.cap = {16, 16, 1, 1, 0};
  auto qp = s.dev->create_qp(s.pd, ia);
  EXPECT_TRUE(qp.ok());
  return qp.ok() ? *qp : nullptr;
}

// librdmacm's QP moves: rdma_init_qp_attr, then ibv_modify_qp.
inline void move_qp(Side& s, IdHandle id, emu::Qp* qp, emu::QpState to) {
  emu::QpAttr a;
  uint32_t mask = 0;
  ASSERT_FALSE(s.cm->init_qp_attr(id, to, &a, &mask)) << emu::to_string(to);
  ASSERT_FALSE(qp->modify(a, mask)) << emu::to_string(to) << ": " << qp->last_refusal();
}

inline std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
inline std::string text(const Event& e) {
  std::string s(reinterpret_cast<const char*>(e.private_data.data()), e.private_data_len);
  return s.substr(0, s.find('\0'));
}

// ---- what librdmacm's programs do, step by step ----

inline constexpr uint16_t kPort = 7174;

// A connected RC pair as rping sets it up: B listens, A resolves and
// connects, B accepts, A establishes; QPs moved with init_qp_attr.
struct Conn {
  IdHandle listen = kNoId, a = kNoId, b = kNoId;
  emu::Qp* qa = nullptr;
  emu::Qp* qb = nullptr;
  Event req, rep, est;  // B's CONNECT_REQUEST, A's CONNECT_RESPONSE, B's ESTABLISHED
};

inline void listen_on(CmEnv& env, Side& b, IdHandle* lid, int backlog = 8) {
  (void)env;
  auto l = b.cm->create_id(b.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_TRUE(l.ok());
  *lid = *l;
  ASSERT_FALSE(b.cm->bind(*lid, b.at(kPort)));
  ASSERT_FALSE(b.cm->listen(*lid, backlog));
}

inline IdHandle resolve(CmEnv& env, Side& a, const SockAddr& dst, PortSpace ps = PortSpace::kTcp,
                 emu::QpType t = emu::QpType::kRC) {
  auto id = a.cm->create_id(a.cm_ch, ps, t);
  EXPECT_TRUE(id.ok());
  EXPECT_FALSE(a.cm->resolve_addr(*id, std::nullopt, dst, 2000));
  env.expect_event(a, EventType::kAddrResolved);
  EXPECT_FALSE(a.cm->resolve_route(*id, 2000));
  env.expect_event(a, EventType::kRouteResolved);
  return *id;
}

inline void start_connect(CmEnv& env, Side& a, Side& b, Conn* c, const std::string& req_data) {
  c->a = resolve(env, a, b.at(kPort));
  c->qa = make_qp(a);
  move_qp(a, c->a, c->qa, emu::QpState::kInit);
  ConnParam p;
  auto pd = bytes(req_data);
  p.private_data = pd;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.qp_num = c->qa->qp_num();
  ASSERT_FALSE(a.cm->connect(c->a, p));
}

inline void accept_and_establish(CmEnv& env, Side& a, Side& b, Conn* c, const std::string& rep_data,
                          const Event* taken = nullptr) {
  c->req = taken ? *taken : env.expect_event(b, EventType::kConnectRequest);
  c->b = c->req.id;
  c->qb = make_qp(b);
  move_qp(b, c->b, c->qb, emu::QpState::kInit);
  move_qp(b, c->b, c->qb, emu::QpState::kRtr);
  move_qp(b, c->b, c->qb, emu::QpState::kRts);
  ConnParam p;
  auto pd = bytes(rep_data);
  p.private_data = pd;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.qp_num = c->qb->qp_num();
  ASSERT_FALSE(b.cm->accept(c->b, p));
  c->rep = env.expect_event(a, EventType::kConnectResponse);
  move_qp(a, c->a, c->qa, emu::QpState::kRtr);
  move_qp(a, c->a, c->qa, emu::QpState::kRts);
  ASSERT_FALSE(a.cm->establish(c->a));
  c->est = env.expect_event(b, EventType::kEstablished);
}

inline Conn connect_pair(CmEnv& env, Side& a, Side& b, const std::string& req_data = "hello from A",
                  const std::string& rep_data = "welcome from B") {
  Conn c;
  listen_on(env, b, &c.listen);
  start_connect(env, a, b, &c, req_data);
  accept_and_establish(env, a, b, &c, rep_data);
  return c;
}

// A SEND from A's QP lands in B's buffer: the QPs the CM set up work.
inline void send_a_to_b(CmEnv& env, Side& a, Side& b, const Conn& c, const std::string& msg) {
  emu::Sge rs{reinterpret_cast<uint64_t>(b.buf.data()), 1024, b.mr->lkey()};
  emu::RecvWr r;
  r.wr_id = 7;
  r.sg_list = std::span<const emu::Sge>(&rs, 1);
  size_t n = 0;
  ASSERT_FALSE(c.qb->post_recv(std::span<const emu::RecvWr>(&r, 1), &n));
  std::memcpy(a.buf.data(), msg.data(), msg.size());
  emu::Sge ss{reinterpret_cast<uint64_t>(a.buf.data()), static_cast<uint32_t>(msg.size()), a.mr->lkey()};
  emu::SendWr w;
  w.wr_id = 9;
  w.opcode = emu::WrOpcode::kSend;
  w.sg_list = std::span<const emu::Sge>(&ss, 1);
  w.send_flags = emu::send_flags::kSignaled;
  ASSERT_FALSE(c.qa->post_send(std::span<const emu::SendWr>(&w, 1), &n));
  bool got = false;
  const auto wall = std::chrono::steady_clock::now();
  while (!got && std::chrono::steady_clock::now() - wall < 20s) {
    emu::Wc wc[4];
    const int k = b.rcq->poll(std::span<emu::Wc>(wc, 4));
    for (int i = 0; i < k; ++i)
      if (wc[i].wr_id == 7) {
        EXPECT_EQ(wc[i].status, emu::WcStatus::kSuccess);
        got = true;
      }
    if (!got && !env.step()) break;
  }
  ASSERT_TRUE(got) << "the SEND did not arrive";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.buf.data()), msg.size()), msg);
}

}  // namespace rocelab::cm::test
