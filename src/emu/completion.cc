// Completion plumbing: CQEs of the send and receive queues, the event log
// entry of each, CQ overflow, the move to ERR with its flush (IBTA 10.3.1,
// 11.4.2.3) and the local failure of a send WQE (ERR or SQE).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emu/engine.h"
#include "emu/roles.h"
#include "emu/wr_opcode_table.h"

namespace rocelab::emu {

void cq_overflow(CqImpl& cq) {
  if (cq.overflowed && cq.count < static_cast<size_t>(cq.cap)) return;
  AsyncEvent ev;
  ev.event_type = EventType::kCqErr;
  ev.cq = &cq;
  cq.eng->raise_async(ev);
  for (auto& q : cq.eng->qps) {
    if (q->scq == &cq || q->rcq == &cq) qp_to_error(*q, true, EventType::kQpFatal);
  }
}

static void push_cqe(QpImpl& qp, CqImpl& cq, const Wc& wc, bool solicited) {
  EngineEvent e;
  e.kind = EventKind::kCompletion;
  e.qpn = qp.qpn;
  e.wr_id = wc.wr_id;
  e.status = wc.status;
  e.wc_opcode = wc.opcode;
  e.length = wc.byte_len;
  qp.eng->log(e);
  if (!cq.push(wc, solicited)) {
    // A full CQ: the completion is lost, the CQ is in error (IBTA 11.4.2.3).
    if (!cq.overflowed || qp.state_ != QpState::kErr) cq_overflow(cq);
  }
}

void post_send_cqe(QpImpl& qp, const Wc& wc) { push_cqe(qp, *qp.scq, wc, false); }
// An XRC target's receives complete on the CQ of the XRC SRQ the message went to.
void post_recv_cqe(QpImpl& qp, const Wc& wc, bool solicited) {
  CqImpl* cq = qp.type_ == QpType::kXrcTgt ? (qp.resp.xrc_srq ? qp.resp.xrc_srq->cq : nullptr) : qp.rcq;
  if (cq) push_cqe(qp, *cq, wc, solicited);
}

void complete_send(QpImpl& qp, WcStatus status) {
  SendWqe& w = qp.wqe(qp.sq_head);
  if (w.signaled || status != WcStatus::kSuccess) {
    Wc wc;
    wc.wr_id = w.wr.wr_id;
    wc.status = status;
    wc.opcode = wr_op_info(w.wr.opcode).wc;
    wc.byte_len = w.length;
    wc.qp_num = qp.qpn;
    post_send_cqe(qp, wc);
  }
  if (status == WcStatus::kSuccess && wr_op_info(w.wr.opcode).send) {
    qp.ctr.rdma_sends++;
    qp.eng->counters.rdma_sends++;
  }
  if (w.is_rd_atomic() && qp.sq_head < qp.req.cur && qp.req.rd_atomic_inflight > 0)
    qp.req.rd_atomic_inflight--;
  ++qp.sq_head;
  if (qp.req.cur < qp.sq_head) {
    qp.req.cur = qp.sq_head;
    qp.req.cur_pkt = 0;
  }
}

void qp_to_error(QpImpl& qp, bool raise_event, EventType ev) {
  if (qp.state_ == QpState::kErr) return;
  set_state(qp, QpState::kErr);
  qp.comp.retrans_timer->cancel();
  qp.comp.rnr_timer->cancel();
  qp.resp.ack_pending = false;
  // IBTA 10.3.1: every outstanding WR completes with WR_FLUSH_ERR.
  while (qp.sq_head != qp.sq_tail) complete_send(qp, WcStatus::kWrFlushErr);
  Wc wc;
  wc.status = WcStatus::kWrFlushErr;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp.qpn;
  if (qp.resp.have_wqe) {
    wc.wr_id = qp.resp.wqe.wr_id;
    post_recv_cqe(qp, wc, false);
    qp.resp.have_wqe = false;
  }
  while (!qp.rq.empty()) {
    wc.wr_id = qp.rq.front().wr_id;
    qp.rq.pop();
    post_recv_cqe(qp, wc, false);
  }
  if (raise_event) {
    AsyncEvent a;
    a.event_type = ev;
    a.qp = &qp;
    qp.eng->raise_async(a);
  }
  if (qp.srq_) {
    AsyncEvent a;
    a.event_type = EventType::kQpLastWqeReached;
    a.qp = &qp;
    qp.eng->raise_async(a);
  }
}

void fail_send_wqe(QpImpl& qp) {
  complete_send(qp, qp.wqe(qp.sq_head).local_error);
  if (qp.reliable()) return qp_to_error(qp, false, EventType::kQpFatal);
  // IBTA 10.3.1 / 11.6.3: a local error on a send WR of a UC or UD QP moves it
  // to SQE: the receive queue keeps working, the later send WRs flush, and
  // modify SQE->RTS resumes the send queue. No async event: the CQE reports it.
  set_state(qp, QpState::kSqe);
  while (qp.sq_head != qp.sq_tail) complete_send(qp, WcStatus::kWrFlushErr);
}

}  // namespace rocelab::emu
