// Posting work requests: ibv_post_send's checks and the WQE it fills
// (IBTA 10.8, 11.4.1.1), ibv_post_recv.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emu/engine.h"
#include "emu/roles.h"
#include "emu/wr_opcode_table.h"

namespace rocelab::emu {
namespace {

// Validates a WR and fills the WQE; EINVAL for what ibv_post_send rejects.
// Errors the hardware would report in a completion go to w.local_error.
std::error_code prepare_wqe(QpImpl& qp, const SendWr& wr, SendWqe& w) {
  Engine& e = *qp.eng;
  // A refused WR says why (Qp::last_refusal; rocelab run --explain, rocelab sim).
  auto refuse = [&](std::string why) {
    qp.refusal = "post_send wr_id " + std::to_string(wr.wr_id) + " (" + std::string(to_string(wr.opcode)) + "): " + why;
    return errc(EINVAL);
  };
  // What the opcode needs comes from its row of the WR-opcode table.
  const WrOpInfo& op = wr_op_info(wr.opcode);
  if (!op.allowed_on(qp.type_))
    return refuse("not an opcode a " + std::string(to_string(qp.type_)) + " QP can post");
  if (op.window && (!wr.bind_mw.mw || !wr.sg_list.empty()))
    return refuse("a " + std::string(op.name) + " names a window (bind_mw.mw) and carries no SGE");
  // An opcode without SGEs (LOCAL_INV) ignores any it is given, as rxe does.
  const std::span<const Sge> sges = op.sges ? wr.sg_list : std::span<const Sge>();
  if (wr.sg_list.size() > qp.cap_.max_send_sge)
    return refuse(std::to_string(wr.sg_list.size()) + " SGEs, the QP has max_send_sge " +
                  std::to_string(qp.cap_.max_send_sge));
  const bool is_inline = (wr.send_flags & send_flags::kInline) && op.inline_ok;
  uint64_t total = 0;
  for (const Sge& s : sges) total += s.length;
  if (is_inline && total > qp.cap_.max_inline_data)
    return refuse("IBV_SEND_INLINE with " + std::to_string(total) + " bytes, the QP has max_inline_data " +
                  std::to_string(qp.cap_.max_inline_data));
  AhImpl* ah = nullptr;
  if (qp.type_ == QpType::kUD) {
    ah = static_cast<AhImpl*>(wr.ud.ah);
    bool found = false;
    for (auto& x : e.ahs) found = found || x.get() == ah;
    if (!found) return refuse("a UD send needs an address handle of this device (wr.ud.ah)");
    if (ah->pd != qp.pd) return refuse("the address handle belongs to another PD than the QP");
  }
  w.wr = wr;
  w.wr.sg_list = {};
  w.signaled = qp.sq_sig_all || (wr.send_flags & send_flags::kSignaled);
  w.local_error = WcStatus::kSuccess;
  w.started = false;
  w.npkts = 0;
  w.length = static_cast<uint32_t>(std::min<uint64_t>(total, UINT32_MAX));
  w.num_segs = 0;
  if (ah) {
    w.ud_dst = ah->dst;
    w.ud_qpn = wr.ud.remote_qpn & wire::kMask24;
    // IBTA 10.2.4.1: a Q_Key with the high bit set means "use the QP's own".
    w.ud_qkey = (wr.ud.remote_qkey & 0x80000000u) ? qp.attr.qkey : wr.ud.remote_qkey;
  }
  w.wr.xrc_remote_srqn &= wire::kMask24;
  if (is_inline) {
    size_t off = 0;
    for (const Sge& s : sges) {
      if (s.length) std::memcpy(w.inline_buf + off, reinterpret_cast<const void*>(s.addr), s.length);
      off += s.length;
    }
    w.segs[0] = {w.inline_buf, w.length};
    w.num_segs = 1;
  } else {
    // Local protection (IBTA 10.6.3): the lkey names an MR of this PD that covers
    // the SGE and, for READ and atomic results written here, grants local write.
    const bool writes_local = op.writes_local;
    for (const Sge& s : sges) {
      if (s.length == 0) continue;
      MrImpl* mr = e.find_mr(s.lkey);
      std::byte* p = mr && mr->pd == qp.pd ? mr->at(s.addr, s.length) : nullptr;
      if (!p || (writes_local && !(mr->access & access::kLocalWrite))) {
        w.local_error = WcStatus::kLocProtErr;
        break;
      }
      w.segs[w.num_segs++] = {p, s.length};
    }
  }
  if (w.local_error == WcStatus::kSuccess) {
    if (op.kind == WrKind::kAtomic) {
      // The 8-byte original value lands in exactly 8 bytes of local memory.
      if (w.length != 8) w.local_error = WcStatus::kLocQpOpErr;
    } else if (total > e.dattr.max_msg_sz ||
               (qp.type_ == QpType::kUD && total > qp.pmtu())) {
      w.local_error = WcStatus::kLocLenErr;
    }
  }
  return {};
}

}  // namespace

std::error_code Qp::post_send(std::span<const SendWr> wrs, size_t* n_posted) {
  auto& qp = *static_cast<QpImpl*>(this);
  Engine& e = *qp.eng;
  std::lock_guard lk(e.mu);
  size_t n = 0;
  std::error_code ec;
  if (qp.type_ == QpType::kXrcTgt) {
    ec = errc(EINVAL);
    qp.refusal = "post_send on an XRC target QP: it only receives (its initiator sends)";
  } else if (qp.state_ == QpState::kReset || qp.state_ == QpState::kInit || qp.state_ == QpState::kRtr) {
    ec = errc(EINVAL);
    qp.refusal = "post_send on a QP in " + std::string(to_string(qp.state_)) +
                 ": the send queue takes work requests from RTS on";
  } else {
    for (const SendWr& wr : wrs) {
      if (qp.sq_full()) {
        ec = errc(ENOMEM);
        qp.refusal = "post_send: the send queue is full (max_send_wr " + std::to_string(qp.cap_.max_send_wr) + ")";
        break;
      }
      SendWqe& w = qp.wqe(qp.sq_tail);
      if ((ec = prepare_wqe(qp, wr, w))) break;
      ++qp.sq_tail;
      ++n;
      if (e.logging()) {
        EngineEvent ev;
        ev.kind = EventKind::kWrPosted;
        ev.qpn = qp.qpn;
        ev.wr_id = wr.wr_id;
        ev.wr_opcode = wr.opcode;
        ev.length = w.length;
        e.log(ev);
      }
    }
    if (qp.state_ == QpState::kErr || qp.state_ == QpState::kSqe) {
      while (qp.sq_head != qp.sq_tail) complete_send(qp, WcStatus::kWrFlushErr);
    } else {
      req_run(qp);
    }
    // Only a device that holds ACKs reads the clock for it.
    if (n > 0 && e.cfg.ack_hold.count() > 0) qp.last_post = e.transport->now();
    // An ACK held for this reply leaves right after it, in the same batch.
    if (qp.resp.ack_pending && qp.resp.ack_due.count() > 0) resp_flush_ack(qp);
  }
  e.tx_flush();
  if (n_posted) *n_posted = n;
  return ec;
}

std::error_code Qp::post_recv(std::span<const RecvWr> wrs, size_t* n_posted) {
  auto& qp = *static_cast<QpImpl*>(this);
  Engine& e = *qp.eng;
  std::lock_guard lk(e.mu);
  size_t n = 0;
  std::error_code ec;
  if (qp.srq_ || qp.state_ == QpState::kReset || qp.type_ == QpType::kXrcIni || qp.type_ == QpType::kXrcTgt) {
    ec = errc(EINVAL);
    qp.refusal = qp.srq_ ? "post_recv on a QP with an SRQ: receives go to the SRQ (ibv_post_srq_recv)"
                 : qp.type_ == QpType::kXrcIni ? "post_recv on an XRC initiator QP: it has no receive queue"
                 : qp.type_ == QpType::kXrcTgt ? "post_recv on an XRC target QP: receives go to its domain's XRC SRQs"
                                               : "post_recv on a QP in RESET: the receive queue takes work requests from INIT on";
  } else {
    for (const RecvWr& wr : wrs) {
      if ((ec = qp.rq.push(wr))) {
        qp.refusal = ec.value() == ENOMEM
                         ? "post_recv: the receive queue is full (max_recv_wr " + std::to_string(qp.cap_.max_recv_wr) + ")"
                         : "post_recv wr_id " + std::to_string(wr.wr_id) + ": " + std::to_string(wr.sg_list.size()) +
                               " SGEs, the QP has max_recv_sge " + std::to_string(qp.cap_.max_recv_sge);
        break;
      }
      ++n;
      if (e.logging()) {
        EngineEvent ev;
        ev.kind = EventKind::kRecvPosted;
        ev.qpn = qp.qpn;
        ev.wr_id = wr.wr_id;
        e.log(ev);
      }
    }
    if (qp.state_ == QpState::kErr) {
      Wc wc;
      wc.status = WcStatus::kWrFlushErr;
      wc.opcode = WcOpcode::kRecv;
      wc.qp_num = qp.qpn;
      while (!qp.rq.empty()) {
        wc.wr_id = qp.rq.front().wr_id;
        qp.rq.pop();
        post_recv_cqe(qp, wc, false);
      }
    }
  }
  if (n_posted) *n_posted = n;
  return ec;
}

}  // namespace rocelab::emu
