// Internal: the device engine. One lock (mu) guards everything; the public
// methods take it, the roles (requester, completer, responder, recv) run with
// it held. See docs/architecture.md.
#pragma once
#include <array>
#include <atomic>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "emu/device.h"
#include "emu/impl_objects.h"
#include "emu/qp_impl.h"
#include "emu/transport/unreachable_set.h"
#include "wire/frame.h"
#include "wire/packet.h"

namespace rocelab::emu {

// Outgoing frames: a fixed pool of buffers, each holding IP + UDP headers and
// the transport packet; sent as one batch. Allocated once (no per-packet heap)
// and not zeroed: every frame is written before it is sent (zeroing its
// 272 KiB would be a third of what creating a device costs).
struct TxQueue {
  static constexpr size_t kFrames = 64;
  std::unique_ptr<std::array<std::byte, wire::kMaxFrameLen>[]> frames =
      std::make_unique_for_overwrite<std::array<std::byte, wire::kMaxFrameLen>[]>(kFrames);
  std::array<Datagram, kFrames> batch{};
  size_t n = 0;
};

class Device::Engine {
 public:
  Engine(std::unique_ptr<Transport> t, DeviceConfig c);
  ~Engine();

  mutable std::mutex mu;
  std::unique_ptr<Transport> transport;
  DeviceConfig cfg;
  DeviceAttr dattr;
  PortAttr pattr;
  Gid gid0{};
  Counters counters;  // device totals
  std::array<uint8_t, 8> warned{};  // DeviceConfig::warn lines given, per reason

  // Async event queues (Device::open_async_queue): [0] is the device's own.
  struct AsyncQueue {
    uint32_t id = 0;
    int efd = -1;  // counts the events pushed (EFD_SEMAPHORE)
    std::deque<AsyncEvent> q;
  };
  std::mutex async_mu;  // guards async_qs (get_async_event runs without mu)
  std::vector<AsyncQueue> async_qs;
  uint32_t next_async_queue = 1;

  std::vector<std::unique_ptr<PdImpl>> pds;
  std::vector<std::unique_ptr<MrImpl>> mrs;
  std::vector<std::unique_ptr<MwImpl>> mws;
  std::vector<std::unique_ptr<ChannelImpl>> channels;
  std::vector<std::unique_ptr<CqImpl>> cqs;
  std::vector<std::unique_ptr<SrqImpl>> srqs;
  std::vector<std::unique_ptr<XrcdImpl>> xrcds;
  std::unordered_map<uint32_t, SrqImpl*> srq_by_num;
  std::vector<std::unique_ptr<AhImpl>> ahs;
  std::vector<std::unique_ptr<QpImpl>> qps;
  std::unordered_map<uint32_t, QpImpl*> qp_by_num;
  std::unordered_map<uint32_t, MrImpl*> mr_by_key;
  std::unordered_map<uint32_t, MwImpl*> mw_by_index;  // R_Key >> 8 (MRs and MWs share the index space)
  // QP numbers: the first one, and the next after q (both within cfg.qpn_block).
  uint32_t first_qpn() const { return (cfg.qpn_block < 0 ? 0 : uint32_t(cfg.qpn_block) << 16) | 0x11; }
  uint32_t qpn_after(uint32_t q) const {
    if (cfg.qpn_block < 0) return (q + 1) & 0xFFFFFF;
    return (q & 0xFFFF) == 0xFFFF ? first_qpn() : q + 1;
  }
  uint32_t next_qpn = 0x11, next_mr_index = 1, next_pd_handle = 1, next_srq_num = 1, next_cq_num = 1;

  // UD multicast groups this device joined and their QPs (mcast.cc).
  struct McastGroup {
    wire::IpAddr addr;
    std::vector<QpImpl*> qps;
  };
  std::vector<McastGroup> mcast;
  uint32_t mcast_attached = 0;  // attachments over all groups
  void mcast_receive(const wire::RocePacket& pkt, const Datagram& d);

  TxQueue tx;
  // The transport lets the ICRC be left out (Transport::icrc_optional): then
  // it is computed only for a capture (cfg.tap), on send and on receive,
  // the received copy made in rx_filled.
  bool icrc_optional = false;
  std::unique_ptr<std::array<std::byte, wire::kMaxFrameLen>> rx_filled;
  std::vector<QpImpl*> ack_list;  // QPs with a deferred ACK (reserved capacity)
  std::unique_ptr<Timer> ack_timer;  // the earliest held ACK's due time (ack_hold > 0)
  // Sends the deferred ACKs, but for those held for their QP's reply and not
  // yet due, for which the ACK timer is armed.
  void flush_acks();
  // RC PSNs sent and not yet acknowledged, over all QPs, and the QPs waiting
  // for some of that budget to come back before they send new packets
  // (requester.cc, "The device's in-flight budget").
  int64_t inflight_psns = 0;
  std::deque<QpImpl*> starved;
  // Peers the transport reported unreachable (ICMP) and that have not sent
  // anything since: an RC QP with retry_cnt 7 stops retrying towards them.
  UnreachableSet gone_peers;
  RecvHandler on_recv;            // bound once to receive()
  // QP 1 (gsi.cc): the client, the PSN of the next MAD, the UDP source port.
  GsiClient* gsi = nullptr;
  uint32_t gsi_psn = 0;
  uint16_t gsi_sport = 0xC000;
  void gsi_receive(const wire::RocePacket& pkt, const Datagram& d);

  std::thread helper;
  std::atomic<bool> stopping{false};
  // The helper standing back (DeviceConfig::stand_back_max, helper_loop).
  // Two polls no further apart than kPolling are an application polling in a
  // loop. app_polled: when the application's Cq::poll last ran a progress
  // round (transport time). armed_cqs: CQs with a channel armed by req_notify
  // and not yet fired (someone may be blocked on their event; changed under
  // mu). standing_back: the helper sleeps away from the socket now (req_notify
  // wakes it). helper_on_socket: it waits on the socket now (a poll in a loop
  // wakes it, as every arrival the poll takes first would). helper_tid: its
  // kernel thread ID, once it runs.
  static constexpr Nanos kPolling = std::chrono::microseconds(50);
  std::atomic<int64_t> app_polled{std::numeric_limits<int64_t>::min() / 2};
  std::atomic<int> armed_cqs{0};
  std::atomic<bool> standing_back{false};
  std::atomic<bool> helper_on_socket{false};
  std::atomic<int> helper_tid{0};

  // Progress (mu held): timers and received packets, then deferred ACKs and the
  // tx batch, then what the transport learned about unreachable peers.
  size_t progress_locked();
  void helper_loop();

  // recv.cc: checks and demux of one received datagram.
  void receive(const Datagram& d);
  // recv.cc: hands d to cfg.tap, with its ICRC filled in if it was omitted.
  void tap_received(const Datagram& d);
  // recv.cc: the event log's PACKET_RECEIVED of pkt for qp (logging() only).
  void log_received(const QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d);

  // tx.cc: builds one packet (headers h, len payload bytes written by fill) for qp.
  template <typename Fill>
  void emit(QpImpl& qp, const wire::IpUdpInfo& ip, wire::RoceHeaders h, uint32_t len, Fill&& fill);
  std::byte* tx_slot();
  void tx_commit(QpImpl& qp, const wire::IpUdpInfo& ip, std::byte* frame, wire::RoceHeaders& h, size_t hdr_len,
                 uint32_t len);
  // The same for a packet of no QpImpl (QP 1): qctr is null, qpn names the QP in the log.
  void tx_commit_raw(uint32_t qpn, Counters* qctr, const wire::IpUdpInfo& ip, std::byte* frame,
                     wire::RoceHeaders& h, size_t hdr_len, uint32_t len);
  void tx_flush();
  void records_flush();  // taps and event sinks: the batch is complete (records.h)

  // Records.
  bool logging() const { return cfg.events != nullptr; }
  void log(EngineEvent e);
  // Counts (ctr may be null: already counted by the caller), logs and drops.
  void drop(QpImpl* qp, const Datagram& d, std::string_view reason, uint64_t Counters::*ctr);
  // Queues ev: on the queue of the object it names, or on every queue for a
  // port event.
  void raise_async(const AsyncEvent& ev);
  AsyncQueue* async_queue(uint32_t id);  // under async_mu; nullptr when closed
  // An object is destroyed: queued async events naming it are dropped, as
  // uverbs drops them (get_async_event would hand out a dangling pointer).
  void forget_async(const void* object);

  MrImpl* find_mr(uint32_t key) const {
    auto it = mr_by_key.find(key);
    return it == mr_by_key.end() ? nullptr : it->second;
  }
  QpImpl* find_qp(uint32_t qpn) const {
    auto it = qp_by_num.find(qpn);
    return it == qp_by_num.end() ? nullptr : it->second;
  }
  SrqImpl* find_srq(uint32_t num) const {
    auto it = srq_by_num.find(num);
    return it == srq_by_num.end() ? nullptr : it->second;
  }
};

inline std::error_code errc(int e) { return {e, std::generic_category()}; }

// Ownership checks for handles passed in by the user (device.cc).
bool device_owns_cq(const Engine& e, const Cq* cq);
bool device_owns_srq(const Engine& e, const Srq* s);
bool device_owns_pd(const Engine& e, const Pd* p);
bool device_owns_channel(const Engine& e, const CompChannel* c);
bool device_owns_mr(const Engine& e, const Mr* m);
bool device_owns_qp(const Engine& e, const Qp* q);
bool device_owns_mw(const Engine& e, const Mw* w);
bool device_owns_xrcd(const Engine& e, const Xrcd* x);

// mw.cc: remote access (IBTA 10.6.3.2, C9-88) through an MR's R_Key or a bound
// window's: the key names an MR or a valid window of qp's PD (a type 2 window:
// bound to qp) granting need over [va, va+len). On success *mr is the MR and
// *mr_va the address in its iova space. A zero-length access checks nothing
// and returns true with *mr null.
bool resolve_rkey(QpImpl& qp, uint32_t rkey, uint64_t va, uint64_t len, unsigned need, MrImpl** mr,
                  uint64_t* mr_va);
// mw.cc: the local operations of the send queue; the status the WR completes with.
WcStatus exec_bind_mw(QpImpl& qp, const SendWr& wr);
WcStatus exec_local_inv(QpImpl& qp, uint32_t rkey);
// Invalidates the type 2 window rkey names (SEND_WITH_INV at the responder,
// LOCAL_INV); false when rkey names no valid type 2 window.
bool invalidate_rkey(QpImpl& qp, uint32_t rkey);

template <typename Fill>
void Device::Engine::emit(QpImpl& qp, const wire::IpUdpInfo& ip, wire::RoceHeaders h, uint32_t len,
                          Fill&& fill) {
  std::byte* frame = tx_slot();
  const size_t iph = wire::ip_udp_header_len(ip.dst.v6);
  h.bth.pad_count = wire::pad_for(len);
  auto hl = wire::encode_headers(std::span<std::byte>(frame + iph, wire::kMaxRoceLen), h);
  if (!hl) return;  // only for an opcode we never build
  if (len > 0) fill(frame + iph + *hl);
  tx_commit(qp, ip, frame, h, *hl, len);
}

}  // namespace rocelab::emu
