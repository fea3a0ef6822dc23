#include "replay/live_responder.h"

#include <algorithm>

#include "emu/connect.h"
#include "emu/transport/sim_fabric.h"

namespace rocelab::replay::detail {

namespace {
constexpr uint32_t kRecvSlots = 1024;
}  // namespace

LiveResponder::LiveResponder() : bed_(testbed::Net::kSim, emu::SimFabricConfig{Nanos(0), 0, Nanos(0)}) {}

std::unique_ptr<LiveResponder> LiveResponder::create(const ResponderSetup& s, MemoryOracle& mem, std::string* error) {
  std::unique_ptr<LiveResponder> lr(new LiveResponder());
  auto fail = [&](std::string why) {
    *error = std::move(why);
    return nullptr;
  };
  lr->fabric_ = lr->bed_.fabric();
  std::string why;
  lr->port_ = lr->bed_.make_transport(s.req_ip, 0, nullptr, nullptr, &why);
  if (!lr->port_) return fail("cannot attach to the simulated fabric: " + why);
  emu::DeviceConfig cfg;
  cfg.name = "replay0";
  cfg.active_mtu = emu::Mtu::k4096;
  cfg.tap = s.tap;
  lr->dev_ = lr->bed_.make_device(s.resp_ip, 0, cfg, nullptr, nullptr, &why);
  if (!lr->dev_) return fail("cannot create the live responder: " + why);
  emu::Device& dev = *lr->dev_;
  auto pd = dev.alloc_pd();
  if (!pd) return fail("live responder: alloc_pd: " + pd.error().message());
  auto cq = dev.create_cq(4096, nullptr, 0);
  if (!cq) return fail("live responder: create_cq: " + cq.error().message());
  lr->cq_ = *cq;
  const unsigned remote = emu::access::kLocalWrite | emu::access::kRemoteWrite | emu::access::kRemoteRead |
                          emu::access::kRemoteAtomic;
  for (auto& [rkey, m] : mem.mrs()) {
    auto mr = dev.reg_mr(*pd, m.mem.data(), m.mem.size(), m.lo, remote);
    if (!mr) return fail("live responder: reg_mr of " + std::to_string(m.mem.size()) + " bytes: " + mr.error().message());
    m.mr = *mr;
    lr->mr_bytes_ += m.mem.size();
  }
  // Receive buffers: a ring of slots, each reposted as soon as it completes.
  lr->slot_len_ = std::max<uint64_t>(s.max_send, 1);
  if (lr->slot_len_ > (1ull << 31)) return fail("a SEND of " + std::to_string(lr->slot_len_) + " bytes: over 2 GiB");
  const uint32_t slots = static_cast<uint32_t>(
      std::clamp<uint64_t>(std::min<uint64_t>(s.recv_needed, (64ull << 20) / lr->slot_len_), 1, kRecvSlots));
  lr->recv_needed_ = s.recv_needed != 0;
  lr->recv_mem_.resize(slots * lr->slot_len_);
  auto recv_mr = dev.reg_mr(*pd, lr->recv_mem_.data(), lr->recv_mem_.size(),
                            reinterpret_cast<uintptr_t>(lr->recv_mem_.data()), emu::access::kLocalWrite);
  if (!recv_mr) return fail("live responder: reg_mr (receive buffers): " + recv_mr.error().message());
  lr->recv_mr_ = *recv_mr;
  emu::QpInitAttr qa;
  qa.send_cq = *cq;
  qa.recv_cq = *cq;
  qa.qp_type = s.rc ? emu::QpType::kRC : emu::QpType::kUC;
  qa.cap.max_send_wr = 16;
  qa.cap.max_recv_wr = slots;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  auto qp = dev.create_qp(*pd, qa);
  if (!qp) return fail("live responder: create_qp: " + qp.error().message());
  lr->qp_ = *qp;
  emu::ConnectOptions co;
  emu::mtu_from_bytes(s.mtu, &co.path_mtu);
  co.max_rd_atomic = static_cast<uint8_t>(std::min<uint32_t>(dev.query_device().max_qp_rd_atom, 255));
  co.min_rnr_timer = 1;
  co.access = emu::access::kRemoteWrite | emu::access::kRemoteRead | emu::access::kRemoteAtomic;
  emu::Qp& q = *lr->qp_;
  if (auto ec = emu::qp_to_init(q, co)) return fail("live responder: to INIT: " + ec.message());
  // The live PSN is the PSN relative to the connection's first message: 0.
  if (auto ec = emu::qp_to_rtr(q, s.req_ip.gid(), s.req_qpn, 0, co))
    return fail("live responder: to RTR: " + ec.message() + " " + q.last_refusal());
  if (auto ec = emu::qp_to_rts(q, 0, co)) return fail("live responder: to RTS: " + ec.message());
  for (uint32_t i = 0; i < slots; ++i) lr->post_recv(i);
  return lr;
}

void LiveResponder::post_recv(uint32_t slot) {
  emu::Sge sge{reinterpret_cast<uintptr_t>(recv_mem_.data()) + slot * slot_len_, static_cast<uint32_t>(slot_len_),
               recv_mr_->lkey()};
  emu::RecvWr wr;
  wr.wr_id = slot;
  wr.sg_list = std::span<const emu::Sge>(&sge, 1);
  size_t n = 0;
  if (!qp_->post_recv(std::span<const emu::RecvWr>(&wr, 1), &n)) ++receives_;
}

size_t LiveResponder::step() {
  size_t moved = dev_->progress();
  moved += port_->poll(
      [&](const emu::Datagram& dg) {
        if (on_response_) on_response_(dg);
      },
      256);
  const int n = recv_needed_ ? cq_->poll(wcs_) : 0;  // receives complete only for SENDs and WRITEs with Immediate
  for (int i = 0; i < n; ++i)
    if (wcs_[static_cast<size_t>(i)].status == emu::WcStatus::kSuccess)
      post_recv(static_cast<uint32_t>(wcs_[static_cast<size_t>(i)].wr_id));
  return moved + static_cast<size_t>(n);
}

void LiveResponder::pump(Nanos until, bool drain) {
  for (int guard = 0; guard < 1 << 22; ++guard) {
    if (step() != 0) continue;
    if (drain) {
      if (fabric_->in_flight() == 0) return;
      fabric_->advance(Nanos::max());
      continue;
    }
    if (fabric_->next_event() > until) {
      if (until > fabric_->now()) fabric_->advance(until);
      return;
    }
    fabric_->advance(until);
  }
}

}  // namespace rocelab::replay::detail
