// Internal: the concrete QP. Its three IBTA roles keep their state in separate
// structs: Requester (requester.cc), Completer (completer.cc), Responder
// (responder.cc); the send queue of SendWqe is shared by requester and completer.
// Guarded by the device lock.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "cc/notification_point.h"
#include "cc/rate_control.h"
#include "emu/impl_objects.h"
#include "emu/wr_opcode_table.h"
#include "wire/aeth.h"
#include "wire/psn.h"

namespace rocelab::emu {

using wire::Psn;

// A piece of local memory a WQE reads from or writes to (resolved from an SGE).
struct Seg {
  std::byte* p = nullptr;
  uint32_t len = 0;
};

struct SendWqe {
  SendWr wr;                       // sg_list is not kept: see segs
  Seg* segs = nullptr;             // max_send_sge entries of QpImpl::sq_segs
  uint32_t num_segs = 0;
  std::byte* inline_buf = nullptr;  // max_inline_data bytes of QpImpl::sq_inline
  uint32_t length = 0;             // message length in bytes
  bool signaled = false;
  WcStatus local_error = WcStatus::kSuccess;  // found at post: completes in error
  // UD destination, captured at post (the AH may be destroyed afterwards)
  wire::IpAddr ud_dst;
  uint32_t ud_qpn = 0, ud_qkey = 0;
  // Requester: PSNs are assigned once, when the WQE is first sent, and reused on retry.
  bool started = false;
  Psn first_psn, last_psn;
  uint32_t npkts = 0;              // packets (READ: response packets) = PSNs consumed
  // A READ or an atomic (WR-opcode table): limited by max_rd_atomic, fenced.
  bool is_rd_atomic() const { return wr_op_info(wr.opcode).rd_atomic(); }
};

// Requester (requester.cc): which packet goes out next.
struct Requester {
  Psn next_psn;          // PSN of the next never-sent packet (sq_psn)
  uint64_t cur = 0;      // index of the WQE being sent (head <= cur <= tail)
  uint32_t cur_pkt = 0;  // next packet within it
  uint32_t rd_atomic_inflight = 0;  // READ/atomic WQEs in [head, cur)
  uint32_t noack_pkts = 0;          // packets since the last AckReq
  bool rnr_wait = false;            // paused until the RNR timer fires
  // The device's in-flight budget (requester.cc): the first PSN never sent,
  // how many PSNs of this QP the device counts as in flight, and whether the
  // QP waits in the device's queue for budget.
  Psn sent_psn;
  uint32_t counted = 0;
  bool starved = false;
};

// Completer (completer.cc): acknowledgements, retries, the retransmit timer.
struct Completer {
  Psn psn;               // oldest unacknowledged PSN
  // The retransmission timer expired and no response has acknowledged
  // anything since: the QP's packets are presumed lost, and it gives its share
  // of the device's in-flight budget back (requester.cc).
  bool timed_out = false;
  uint8_t retry_left = 0, rnr_retry_left = 0;
  // A go-back-N triggered by a response is under way: later out-of-order
  // responses of the same burst must not start (and count) another one (rxe started_retry).
  bool started_retry = false;
  std::unique_ptr<Timer> retrans_timer;
  std::unique_ptr<Timer> rnr_timer;
};

// Congestion control (congestion.cc), when the device runs it: the QP as
// DCQCN's reaction point — its rate control, and the pacer that holds its
// requests to that rate — and as its notification point (CNPs for the
// CE-marked packets it receives).
struct Congestion {
  std::unique_ptr<cc::RateControl> rate;  // null: the device runs no congestion control
  cc::NotificationPoint np{Nanos{0}};
  // The pacer (ps on the transport's clock): the last packet it let go
  // counts from last_ps, its bytes take last_bytes at the current rate, and
  // the next may leave at next_send_ps — recomputed when the rate changes.
  int64_t last_ps = 0;
  uint32_t last_bytes = 0;
  int64_t next_send_ps = 0;
  bool held = false;              // the requester waits for the pacer
  std::unique_ptr<Timer> timer;   // armed at the earlier of the pacer's and the algorithm's time
};

// Saved READ / atomic request, for duplicates (IBTA 9.7.5.1.3: READs are served
// again, atomics answered from the saved result and never executed twice).
struct RdAtomicRes {
  bool valid = false;
  bool atomic = false;
  Psn first_psn, last_psn;
  uint64_t orig = 0;     // atomic: original remote value
  uint32_t msn = 0;
};

// Responder (responder.cc).
struct Responder {
  enum class Seq : uint8_t { kNone, kSend, kWrite };
  Psn epsn;              // expected PSN
  uint32_t msn = 0;      // 24 bits
  Seq seq = Seq::kNone;  // message in progress
  bool nak_sent = false; // PSN sequence error NAK sent for epsn; drop until epsn
  bool uc_drop = false;  // UC: drop until the next FIRST/ONLY
  // SEND in progress: the receive WQE taken from the RQ or SRQ
  bool have_wqe = false;
  RecvWqe wqe;           // copy (max_recv_sge SGEs)
  uint32_t offset = 0;   // bytes received into it
  // XRC target: the XRC SRQ the request being processed names (its XRCETH);
  // its receive WQE, its PD (L_Keys, R_Keys) and its CQ serve the message.
  SrqImpl* xrc_srq = nullptr;
  // WRITE in progress
  MrImpl* mr = nullptr;
  uint64_t va = 0;
  uint32_t resid = 0;    // bytes still expected (RETH DMA length minus received)
  uint32_t write_len = 0;
  // ACK coalescing: one ACK per QP per receive batch, or held until ack_due
  // for the QP's next post_send (DeviceConfig::ack_hold)
  bool ack_pending = false;
  bool ack_listed = false;  // in Engine::ack_list
  Psn ack_psn;
  Nanos ack_due{0};
  std::vector<RdAtomicRes> res;  // max(1, max_dest_rd_atomic) entries
  size_t res_next = 0;
};

class QpImpl final : public Qp {
 public:
  Engine* eng = nullptr;
  PdImpl* pd = nullptr;
  CqImpl* scq = nullptr;
  CqImpl* rcq = nullptr;
  SrqImpl* srq_ = nullptr;
  XrcdImpl* xrcd = nullptr;  // XRC_TGT
  int handles = 1;           // XRC_TGT: the creator's and every open_qp's
  uint32_t mcast_groups = 0;  // UD: multicast groups attached (mcast.cc)
  uint32_t async_queue = 0;   // where its async events go (Device::set_async_queue)
  QpType type_ = QpType::kRC;
  uint32_t qpn = 0;
  bool sq_sig_all = false;
  QpCap cap_;
  QpState state_ = QpState::kReset;
  QpAttr attr;           // every attribute ever set (query returns it)
  wire::IpAddr dst;      // from attr.ah_attr (RC/UC)
  uint16_t sport = 0xC000;  // UDP source port, 0xC000..0xFFFF
  bool sq_drained_notify = false;
  Nanos last_post{Nanos::min()};  // the last post_send that took work requests
  Counters ctr;
  std::string refusal;   // why the last refused verb was refused (Qp::last_refusal)

  std::vector<SendWqe> sq;  // max_send_wr entries
  // Their SGEs and inline data, max_send_sge and max_inline_data a WQE, in one
  // allocation each at creation (never resized: the WQEs point into them).
  std::vector<Seg> sq_segs;
  std::vector<std::byte> sq_inline;
  uint64_t sq_head = 0, sq_tail = 0;  // [head, tail): posted and not completed
  RecvQueue rq;

  Requester req;
  Completer comp;
  Responder resp;
  Congestion cong;

  SendWqe& wqe(uint64_t i) { return sq[i % sq.size()]; }
  // Reliable connected: RC and both XRC halves (ACKs, retries, NAKs).
  bool reliable() const { return type_ == QpType::kRC || type_ == QpType::kXrcIni || type_ == QpType::kXrcTgt; }
  // The PD that requests to this QP are checked against: an XRC target has
  // none of its own, it uses the PD of the XRC SRQ the request names.
  PdImpl* rx_pd() const { return type_ == QpType::kXrcTgt ? (resp.xrc_srq ? resp.xrc_srq->pd : nullptr) : pd; }
  uint32_t pmtu() const { return mtu_bytes(attr.path_mtu); }
  bool sq_full() const { return sq_tail - sq_head == sq.size(); }
  // The port on this device's transport for packets of this QP.
  wire::IpUdpInfo ip_to(const wire::IpAddr& to) const;
};

// Packets needed for a message of len bytes at MTU pmtu (a 0-byte message is one packet).
constexpr uint32_t packets_for(uint32_t len, uint32_t pmtu) {
  return len == 0 ? 1 : (len + pmtu - 1) / pmtu;
}

}  // namespace rocelab::emu
