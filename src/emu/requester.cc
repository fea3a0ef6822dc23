// The requester (IBTA 9.7 "requester side", rxe_req.c): WQEs to request
// packets. PSNs are assigned when a WQE is first sent and kept for retries;
// RC is limited by a PSN window, max_rd_atomic and fences.
#include <algorithm>
#include <bit>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

using wire::OpClass;
namespace op = wire::op;

// The device's in-flight budget: RC PSNs sent and not yet acknowledged over
// all its QPs. One QP's window (128 to 512, DeviceConfig::window_bytes) is far below it; thousands of QPs at
// once would otherwise put thousands of windows on the wire in one burst,
// more than the peer's socket buffer (4 MiB: 1024 packets at MTU 4096) can
// hold, and the losses bring every QP's retransmission timer at once: with
// 3,000 QPs of perftest, RETRY_EXC_ERR. A QP that finds the budget spent
// waits in the device's queue (FIFO) and sends when ACKs bring budget back;
// retransmissions are never held (their PSNs are counted already).
constexpr int64_t kDeviceInflightPsns = 1024;
constexpr uint32_t kAckReqEvery = 64;  // AckReq at least this often within long messages

// How many PSNs qp may have unacknowledged (DeviceConfig::window_bytes).
int32_t psn_window(const QpImpl& qp) {
  const uint32_t bytes = qp.eng->cfg.window_bytes;
  if (bytes == 0) return DeviceConfig::kMinPsnWindow;
  return static_cast<int32_t>(
      std::clamp(bytes / qp.pmtu(), DeviceConfig::kMinPsnWindow, DeviceConfig::kMaxPsnWindow));
}

// imm_data is kept as ibv keeps it: the wire bytes in memory (network order).
uint32_t be_to_host(uint32_t v) {
  return std::endian::native == std::endian::little ? __builtin_bswap32(v) : v;
}

wire::Transport wire_transport(QpType t) {
  switch (t) {
    case QpType::kRC: return wire::Transport::kRC;
    case QpType::kUC: return wire::Transport::kUC;
    case QpType::kUD: return wire::Transport::kUD;
    case QpType::kXrcIni:
    case QpType::kXrcTgt: return wire::Transport::kXRC;
  }
  return wire::Transport::kRC;
}

// Sends the next packet of w (packet qp.req.cur_pkt); READ sends one request for the rest.
void send_packet(QpImpl& qp, SendWqe& w) {
  Engine& e = *qp.eng;
  const uint32_t pmtu = qp.pmtu();
  const uint32_t k = qp.req.cur_pkt;
  wire::RoceHeaders h;
  const WrOpInfo& op = wr_op_info(w.wr.opcode);
  const uint8_t rc_op = op.bth_opcode(k, w.npkts);
  h.bth.opcode = wire::for_transport(wire_transport(qp.type_), rc_op).value_or(rc_op);
  h.bth.psn = w.first_psn + k;
  const wire::OpInfo& info = h.info();
  const bool last = w.is_rd_atomic() || k + 1 >= w.npkts;
  uint32_t len = 0;
  uint64_t off = uint64_t{k} * pmtu;
  wire::IpUdpInfo ip;
  if (qp.type_ == QpType::kUD) {
    h.bth.dest_qpn = wire::Qpn(w.ud_qpn);
    h.deth.qkey = w.ud_qkey;
    h.deth.src_qpn = wire::Qpn(qp.qpn);
    ip = qp.ip_to(w.ud_dst);
  } else {
    h.bth.dest_qpn = wire::Qpn(qp.attr.dest_qp_num);
    ip = qp.ip_to(qp.dst);
  }
  // XRC: every request names the target's XRC SRQ (XRCETH).
  if (info.carries(wire::Hdr::kXrcEth)) h.xrceth.srqn = w.wr.xrc_remote_srqn;
  switch (op.kind) {
    case WrKind::kRead:
      // IBTA 9.4.4: a retried READ asks only for what has not arrived.
      h.reth = {w.wr.rdma.remote_addr + off, w.wr.rdma.rkey, static_cast<uint32_t>(w.length - std::min<uint64_t>(off, w.length))};
      qp.req.cur_pkt = w.npkts;
      break;
    case WrKind::kAtomic:
      h.atomic_eth = op.atomic == AtomicOperands::kCompareSwap
                         ? wire::AtomicEth{w.wr.atomic.remote_addr, w.wr.atomic.rkey, w.wr.atomic.swap, w.wr.atomic.compare_add}
                         : wire::AtomicEth{w.wr.atomic.remote_addr, w.wr.atomic.rkey, w.wr.atomic.compare_add, 0};
      qp.req.cur_pkt = 1;
      break;
    case WrKind::kMessage:
    case WrKind::kLocal:  // never sent (req_run executes it)
      len = static_cast<uint32_t>(std::min<uint64_t>(pmtu, w.length - std::min<uint64_t>(off, w.length)));
      if (info.carries(wire::Hdr::kReth)) h.reth = {w.wr.rdma.remote_addr, w.wr.rdma.rkey, w.length};
      if (info.carries(wire::Hdr::kImmDt)) h.immdt.imm = be_to_host(w.wr.imm_data);
      if (info.carries(wire::Hdr::kIeth)) h.ieth.rkey = w.wr.invalidate_rkey;
      qp.req.cur_pkt = k + 1;
      break;
  }
  if (last && (w.wr.send_flags & send_flags::kSolicited) &&
      (info.is(OpClass::kSend) || info.carries(wire::Hdr::kImmDt)))
    h.bth.se = true;
  if (qp.reliable()) {
    // rxe: AckReq on the last packet of a message, and every kAckReqEvery
    // packets. And on the packet that spends the device's in-flight budget: the
    // QPs that wait for budget (requester.cc) wait for ACKs, and none would
    // come for packets that asked for none.
    if (last || ++qp.req.noack_pkts >= kAckReqEvery || e.inflight_psns + 1 >= kDeviceInflightPsns) {
      h.bth.ack_req = true;
      qp.req.noack_pkts = 0;
    }
  }
  const Seg* segs = w.segs;
  const uint32_t nseg = w.num_segs;
  e.emit(qp, ip, h, len, [&](std::byte* dst) { gather(segs, nseg, off, dst, len); });
}

}  // namespace

void req_budget_sync(QpImpl& qp) {
  // A QP whose timer expired (its packets presumed lost) or that waits out an
  // RNR NAK has nothing in flight: it must not hold the budget the others need
  // (a silent peer retried forever would otherwise starve every other QP).
  const bool holds = qp.reliable() && (qp.state_ == QpState::kRts || qp.state_ == QpState::kSqd) &&
                     !qp.comp.timed_out && !qp.req.rnr_wait;
  const int32_t d = holds ? qp.req.sent_psn.distance(qp.comp.psn) : 0;
  const uint32_t now = d > 0 ? static_cast<uint32_t>(d) : 0;
  qp.eng->inflight_psns += static_cast<int64_t>(now) - static_cast<int64_t>(qp.req.counted);
  qp.req.counted = now;
}

void req_kick_starved(Engine& e) {
  // Each QP at most once a round: one that starves again goes to the back.
  for (size_t n = e.starved.size(); n > 0 && !e.starved.empty() && e.inflight_psns < kDeviceInflightPsns; --n) {
    QpImpl* qp = e.starved.front();
    e.starved.pop_front();
    qp->req.starved = false;
    req_run(*qp);
  }
}

void req_run(QpImpl& qp) {
  if (qp.state_ != QpState::kRts && qp.state_ != QpState::kSqd) return;
  const bool rc = qp.reliable();
  if (rc) req_budget_sync(qp);  // what was acknowledged since comes back to the device
  if (qp.req.rnr_wait) return;
  Engine& e = *qp.eng;
  bool sent = false;
  while (qp.req.cur != qp.sq_tail && qp.state_ != QpState::kErr) {
    SendWqe& w = qp.wqe(qp.req.cur);
    if (!w.started) {
      if (qp.state_ == QpState::kSqd) break;  // IBTA 10.3.1: SQD starts no new WQE
      if (w.local_error != WcStatus::kSuccess) {
        if (qp.req.cur != qp.sq_head) break;  // complete in order
        fail_send_wqe(qp);
        return;
      }
      const WrOpInfo& op = wr_op_info(w.wr.opcode);
      if (op.local()) {
        // Local operations (mw.cc) send nothing; they run when every earlier WR
        // has completed, so a later WR sees the window as they leave it.
        if (qp.req.cur != qp.sq_head) break;
        w.local_error = w.wr.opcode == WrOpcode::kBindMw ? exec_bind_mw(qp, w.wr)
                                                         : exec_local_inv(qp, w.wr.invalidate_rkey);
        if (w.local_error != WcStatus::kSuccess) continue;  // fails above, in order
        w.started = true;
        ++qp.req.cur;
        complete_send(qp, WcStatus::kSuccess);
        continue;
      }
      if (rc) {
        // IBTA 10.8.3.3: a fenced WQE waits for earlier READs and atomics.
        if ((w.wr.send_flags & send_flags::kFence) && qp.req.rd_atomic_inflight > 0) break;
        if (w.is_rd_atomic() &&
            qp.req.rd_atomic_inflight >= std::max<uint32_t>(qp.attr.max_rd_atomic, 1))
          break;
      }
      w.npkts = op.kind == WrKind::kAtomic ? 1 : packets_for(w.length, qp.pmtu());
      w.first_psn = qp.req.next_psn;
      w.last_psn = w.first_psn + (w.npkts - 1);
      qp.req.next_psn += w.npkts;
      w.started = true;
      qp.req.cur_pkt = 0;
    }
    if (rc && (w.first_psn + qp.req.cur_pkt).distance(qp.comp.psn) >= psn_window(qp)) break;
    if (rc && !(w.first_psn + qp.req.cur_pkt).before(qp.req.sent_psn) &&
        e.inflight_psns >= kDeviceInflightPsns) {
      if (!qp.req.starved) {  // a new packet, and the device's budget is spent
        qp.req.starved = true;
        e.starved.push_back(&qp);
      }
      break;
    }
    if (!cc_may_send(qp)) break;  // the pacer holds it (congestion.cc)
    send_packet(qp, w);
    cc_sent(qp);
    sent = true;
    if (rc) {
      const Psn after = w.first_psn + qp.req.cur_pkt;  // a READ counts its response PSNs
      if (after.after(qp.req.sent_psn)) {
        qp.req.sent_psn = after;
        req_budget_sync(qp);
      }
    }
    if (qp.req.cur_pkt >= w.npkts) {
      if (w.is_rd_atomic()) qp.req.rd_atomic_inflight++;
      qp.req.cur++;
      qp.req.cur_pkt = 0;
      // IBTA 9.8.3 / rxe: UC and UD sends complete once transmitted.
      if (!rc) complete_send(qp, WcStatus::kSuccess);
    }
  }
  if (rc && sent) comp_update_timer(qp);
  if (qp.state_ == QpState::kSqd && qp.sq_drained_notify && qp.req.cur == qp.sq_head) {
    qp.sq_drained_notify = false;
    AsyncEvent ev;
    ev.event_type = EventType::kSqDrained;
    ev.qp = &qp;
    qp.eng->raise_async(ev);
  }
}

void req_rewind(QpImpl& qp, Psn psn) {
  uint64_t i = qp.sq_head;
  uint32_t pkt = 0;
  for (; i != qp.sq_tail && qp.wqe(i).started; ++i) {
    const SendWqe& w = qp.wqe(i);
    if (!psn.before(w.first_psn) && !psn.after(w.last_psn)) {
      pkt = static_cast<uint32_t>(psn.distance(w.first_psn));
      break;
    }
  }
  qp.req.cur = i;
  qp.req.cur_pkt = pkt;
  qp.req.rd_atomic_inflight = 0;
  for (uint64_t j = qp.sq_head; j != i; ++j) {
    if (qp.wqe(j).is_rd_atomic()) qp.req.rd_atomic_inflight++;
  }
}

}  // namespace rocelab::emu
