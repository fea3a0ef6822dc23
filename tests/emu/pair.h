// Test helper: two emulated devices on the simulated fabric or on real UDP
// sockets (127.0.0.x), each with a PD, CQs, a registered buffer and one QP,
// connected to each other through the public API. Devices, faults, the objects
// of a side and time come from the testbed (src/testbed) that rocelab sim,
// rocelab loopback and rocelab replay use too.
#pragma once
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "emu/connect.h"
#include "emu/device.h"
#include "emu/transport/fault_injector.h"
#include "emu/transport/sim_fabric.h"
#include "emu/transport/udp_transport.h"
#include "testbed/endpoint.h"
#include "testbed/testbed.h"

namespace rocelab::emu::test {

using testbed::Net;
using Node = testbed::Endpoint;

class Env {
 public:
  explicit Env(Net net, Mtu active_mtu = Mtu::k1024)
      : net_(net), mtu_(active_mtu), bed_(net) {}

  // Devices made after this read retry_cnt 7 as rxe does: retry forever.
  void set_retry_forever(bool on) { retry_forever_ = on; }
  // Devices made after this hold ACKs for their QP's reply (DeviceConfig::ack_hold).
  void set_ack_hold(Nanos hold) { ack_hold_ = hold; }
  // Devices made after this have this RC send window (DeviceConfig::window_bytes).
  void set_window_bytes(uint32_t bytes) { window_bytes_ = bytes; }
  // Devices made after this stand back so long at most (DeviceConfig::stand_back_max).
  void set_stand_back_max(Nanos max) { stand_back_max_ = max; }
  // Devices made after this tell `warn` about misconfiguration drops (DeviceConfig::warn).
  void set_warn(std::function<void(const std::string&)> warn) { warn_ = std::move(warn); }

  std::unique_ptr<Device> make_device(uint8_t host) {
    std::optional<FaultConfig> fcfg = fault_cfg_;
    if (!fcfg && !faults_.empty()) {
      fcfg.emplace();
      fcfg->schedule = faults_;
      fcfg->seed = host;
    }
    std::optional<testbed::NodeFaults> nf;
    if (fcfg) {
      std::string why;
      nf = testbed::NodeFaults::from(*fcfg, fcfg->seed, &why);
      EXPECT_EQ(why, "");
      if (!why.empty()) return nullptr;
    }
    DeviceConfig cfg;
    cfg.active_mtu = mtu_;
    cfg.retry_forever = retry_forever_;
    cfg.ack_hold = ack_hold_;
    cfg.window_bytes = window_bytes_;
    if (stand_back_max_) cfg.stand_back_max = *stand_back_max_;
    cfg.warn = warn_;
    std::string err;
    auto d = bed_.make_device(wire::IpAddr::v4(10, 0, 0, host), static_cast<uint8_t>(100 + host), cfg,
                              nf ? &*nf : nullptr, nullptr, &err);
    if (!d && net_ == Net::kSim) ADD_FAILURE() << err;  // on UDP a caller may skip (no free address)
    return d;
  }

  // Creates a node: PD, send and receive CQ (cqe entries), a buffer of len bytes
  // registered with access, and a QP of type.
  Node make_node(uint8_t host, QpType type, size_t len, unsigned access, int cqe = 256,
                 QpCap cap = {64, 64, 4, 4, 64}) {
    Node n;
    n.dev = make_device(host);
    EXPECT_TRUE(n.dev);
    if (!n.dev) return n;
    EXPECT_EQ(n.open({type, len, access, cqe, cap}), "");
    return n;
  }

  // One progress round on every device; on the simulated fabric, when nothing
  // moved, the virtual clock advances to the next event (testbed::Testbed::step).
  void step(std::initializer_list<Device*> devs) { bed_.step(std::vector<Device*>(devs)); }

  // Polls cq until `want` completions arrived (or the budget ran out: 60 s of
  // virtual time on the fabric, 20 s of real time on UDP — a hang guard, not a
  // timing assertion).
  std::vector<Wc> wait_wcs(Cq* cq, size_t want, std::initializer_list<Device*> devs) {
    std::vector<Wc> out;
    const auto start = std::chrono::steady_clock::now();
    const Nanos vstart = net_ == Net::kSim ? fabric()->now() : Nanos(0);
    while (out.size() < want) {
      Wc wc[16];
      const int n = cq->poll(std::span<Wc>(wc, std::min<size_t>(16, want - out.size())));
      for (int i = 0; i < n; ++i) out.push_back(wc[i]);
      if (out.size() >= want) break;
      if (net_ == Net::kSim) {
        if (fabric()->now() - vstart > std::chrono::seconds(60)) break;
        if (fabric()->next_event() == Nanos::max() && n == 0) {
          size_t moved = 0;
          for (Device* d : devs) moved += d->progress();
          if (moved == 0) break;  // nothing will ever happen
        }
      } else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
        break;
      }
      step(devs);
    }
    return out;
  }

  SimFabric* fabric() { return bed_.fabric(); }
  // Fault schedule (fault_config.h SPEC) for the devices made from now on
  // (the fault PRNG is seeded with the host number).
  void set_faults(std::string spec) {
    faults_ = std::move(spec);
    fault_cfg_.reset();
  }
  // A whole fault configuration (probabilities, seed, schedule) for the
  // devices made from now on; replaces set_faults' schedule.
  void set_fault_config(FaultConfig cfg) { fault_cfg_ = std::move(cfg); }
  Net net() const { return net_; }

 private:
  Net net_;
  Mtu mtu_;
  bool retry_forever_ = false;
  Nanos ack_hold_{0};
  uint32_t window_bytes_ = 0;
  std::optional<Nanos> stand_back_max_;
  std::function<void(const std::string&)> warn_;
  std::string faults_;
  std::optional<FaultConfig> fault_cfg_;
  testbed::Testbed bed_;
};

inline void fill_pattern(std::vector<std::byte>& b, size_t off, size_t len, uint8_t seed) {
  for (size_t i = 0; i < len; ++i) b[off + i] = std::byte(static_cast<uint8_t>(seed + i * 7 + (i >> 8)));
}

inline SendWr make_wr(WrOpcode op, const Sge* sge, size_t nsge, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = std::span<const Sge>(sge, nsge);
  wr.send_flags = send_flags::kSignaled;
  return wr;
}

inline std::error_code post_recv(Qp* qp, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id) {
  Sge s{addr, len, lkey};
  RecvWr r;
  r.wr_id = wr_id;
  r.sg_list = std::span<const Sge>(&s, 1);
  size_t n = 0;
  return qp->post_recv(std::span<const RecvWr>(&r, 1), &n);
}

inline std::error_code post_send(Qp* qp, const SendWr& wr) {
  size_t n = 0;
  return qp->post_send(std::span<const SendWr>(&wr, 1), &n);
}

}  // namespace rocelab::emu::test
