// The live side of `rocelab replay` (replay.h), internal to src/replay: an
// emu::Device on a simulated fabric of its own (virtual time, no propagation
// delay: the capture's own gaps are the timing), with one RC or UC QP
// connected to a bare port of the fabric, through which the replay sends the
// capture's requests as they are. Its MRs are the MemoryOracle's spans,
// registered at the capture's I/O virtual addresses; its receive queue is a
// ring of buffers, each reposted as soon as it completes.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emu/device.h"
#include "emu/transport/transport.h"
#include "replay/memory_oracle.h"
#include "testbed/testbed.h"
#include "wire/packet.h"

namespace rocelab::replay::detail {

struct ResponderSetup {
  wire::IpAddr req_ip, resp_ip;  // two addresses of one family
  bool rc = true;                // else UC
  uint32_t req_qpn = 0;          // the requester's QPN the responses go to
  uint32_t mtu = 1024;           // the path MTU
  uint64_t recv_needed = 0;      // receives the capture's requests consume
  uint64_t max_send = 0;         // the largest SEND: a receive buffer's size (at most 2 GiB)
  emu::PacketTap* tap = nullptr; // records what the responder sends and receives
};

class LiveResponder {
 public:
  // Builds the fabric, the requester's port and the responder, registers
  // mem's live MRs, posts the receives and connects the QP (RTS, expecting
  // PSN 0). nullptr, with *error, when a step fails.
  static std::unique_ptr<LiveResponder> create(const ResponderSetup& s, MemoryOracle& mem, std::string* error);

  uint32_t qpn() const { return qp_->qp_num(); }
  uint64_t receives_posted() const { return receives_; }
  uint64_t mr_bytes() const { return mr_bytes_; }

  // Sends a transport packet (BTH .. ICRC) from the requester's port.
  void send(const emu::Datagram& dg) { port_->send(std::span<const emu::Datagram>(&dg, 1)); }

  // Runs everything due up to virtual time `until`, or (drain) until nothing
  // is in flight; each packet the responder sends meanwhile reaches
  // on_response.
  void pump(Nanos until, bool drain);
  Nanos now() const { return fabric_->now(); }
  void set_on_response(std::function<void(const emu::Datagram&)> f) { on_response_ = std::move(f); }
  // Stops recording (before the capture being written is closed).
  void detach_tap() { dev_->set_tap(nullptr); }

 private:
  LiveResponder();
  size_t step();
  void post_recv(uint32_t slot);

  testbed::Testbed bed_;
  emu::SimFabric* fabric_ = nullptr;
  std::unique_ptr<emu::Transport> port_;  // the requester's
  std::unique_ptr<emu::Device> dev_;
  emu::Cq* cq_ = nullptr;
  emu::Qp* qp_ = nullptr;
  emu::Mr* recv_mr_ = nullptr;
  std::vector<std::byte> recv_mem_;
  uint64_t slot_len_ = 0, receives_ = 0, mr_bytes_ = 0;
  bool recv_needed_ = false;
  std::array<emu::Wc, 64> wcs_;
  std::function<void(const emu::Datagram&)> on_response_;
};

}  // namespace rocelab::replay::detail
