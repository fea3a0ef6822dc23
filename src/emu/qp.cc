// Queue pairs: creation, posting work requests, completions, the move to ERR
// and its flush (IBTA 10.3.1, 10.8).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

constexpr uint32_t kMaxInline = 1024;

bool opcode_valid(QpType t, WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return t != QpType::kUD;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
      return t == QpType::kRC;
    case WrOpcode::kLocalInv:
    case WrOpcode::kBindMw:
      return t != QpType::kUD;  // memory windows (mw.cc), as rxe: RC and UC
  }
  return false;
}

bool type_valid(QpType t) { return t == QpType::kRC || t == QpType::kUC || t == QpType::kUD; }

}  // namespace

wire::IpUdpInfo QpImpl::ip_to(const wire::IpAddr& to) const {
  wire::IpUdpInfo ip;
  ip.src = eng->transport->local_address();
  ip.dst = to;
  ip.sport = sport;
  ip.dport = wire::kRoceV2Port;
  ip.ip_id = 0;  // what the kernel sends for DF packets from an unconnected socket
  ip.df = true;
  return ip;
}

void gather(const Seg* segs, uint32_t nseg, uint64_t off, std::byte* dst, uint32_t n) {
  for (uint32_t i = 0; i < nseg && n > 0; ++i) {
    if (off >= segs[i].len) {
      off -= segs[i].len;
      continue;
    }
    const uint32_t k = std::min<uint64_t>(segs[i].len - off, n);
    std::memcpy(dst, segs[i].p + off, k);
    dst += k;
    n -= k;
    off = 0;
  }
}

void scatter(const Seg* segs, uint32_t nseg, uint64_t off, const std::byte* src, uint32_t n) {
  for (uint32_t i = 0; i < nseg && n > 0; ++i) {
    if (off >= segs[i].len) {
      off -= segs[i].len;
      continue;
    }
    const uint32_t k = std::min<uint64_t>(segs[i].len - off, n);
    std::memcpy(segs[i].p + off, src, k);
    src += k;
    n -= k;
    off = 0;
  }
}

WcOpcode wc_opcode_of(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv: return WcOpcode::kSend;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp: return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd: return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv: return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw: return WcOpcode::kBindMw;
  }
  return WcOpcode::kSend;
}

void set_state(QpImpl& qp, QpState s) {
  if (qp.state_ != s) {
    EngineEvent e;
    e.kind = EventKind::kQpStateChange;
    e.qpn = qp.qpn;
    e.from = qp.state_;
    e.to = s;
    qp.eng->log(e);
  }
  qp.state_ = s;
  qp.attr.qp_state = s;
}

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
void post_recv_cqe(QpImpl& qp, const Wc& wc, bool solicited) { push_cqe(qp, *qp.rcq, wc, solicited); }

void complete_send(QpImpl& qp, WcStatus status) {
  SendWqe& w = qp.wqe(qp.sq_head);
  if (w.signaled || status != WcStatus::kSuccess) {
    Wc wc;
    wc.wr_id = w.wr.wr_id;
    wc.status = status;
    wc.opcode = wc_opcode_of(w.wr.opcode);
    wc.byte_len = w.length;
    wc.qp_num = qp.qpn;
    post_send_cqe(qp, wc);
  }
  if (status == WcStatus::kSuccess &&
      (w.wr.opcode == WrOpcode::kSend || w.wr.opcode == WrOpcode::kSendWithImm ||
       w.wr.opcode == WrOpcode::kSendWithInv)) {
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
  if (qp.type_ == QpType::kRC) return qp_to_error(qp, false, EventType::kQpFatal);
  // IBTA 10.3.1 / 11.6.3: a local error on a send WR of a UC or UD QP moves it
  // to SQE: the receive queue keeps working, the later send WRs flush, and
  // modify SQE->RTS resumes the send queue. No async event: the CQE reports it.
  set_state(qp, QpState::kSqe);
  while (qp.sq_head != qp.sq_tail) complete_send(qp, WcStatus::kWrFlushErr);
}

// ---- creation ----

Result<Qp*> Device::create_qp(Pd* pd, const QpInitAttr& a) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_pd(e, pd) || !type_valid(a.qp_type)) return errc(EINVAL);
  if (!a.send_cq || !a.recv_cq || !device_owns_cq(e, a.send_cq) || !device_owns_cq(e, a.recv_cq))
    return errc(EINVAL);
  if (a.srq && !device_owns_srq(e, a.srq)) return errc(EINVAL);
  const QpCap& c = a.cap;
  const auto max_wr = static_cast<uint32_t>(e.dattr.max_qp_wr);
  const auto max_sge = static_cast<uint32_t>(e.dattr.max_sge);
  if (c.max_send_wr > max_wr || c.max_recv_wr > max_wr || c.max_send_sge > max_sge ||
      c.max_recv_sge > max_sge || c.max_inline_data > kMaxInline)
    return errc(EINVAL);
  if (e.qps.size() >= static_cast<size_t>(e.dattr.max_qp)) return errc(ENOMEM);

  auto qp = std::make_unique<QpImpl>();
  QpImpl& q = *qp;
  q.eng = &e;
  q.pd = static_cast<PdImpl*>(pd);
  q.scq = static_cast<CqImpl*>(a.send_cq);
  q.rcq = static_cast<CqImpl*>(a.recv_cq);
  q.srq_ = static_cast<SrqImpl*>(a.srq);
  q.type_ = a.qp_type;
  q.sq_sig_all = a.sq_sig_all;
  q.cap_.max_send_wr = std::max<uint32_t>(c.max_send_wr, 1);
  q.cap_.max_send_sge = std::max<uint32_t>(c.max_send_sge, 1);
  q.cap_.max_recv_wr = q.srq_ ? 0 : std::max<uint32_t>(c.max_recv_wr, 1);
  q.cap_.max_recv_sge = q.srq_ ? 0 : std::max<uint32_t>(c.max_recv_sge, 1);
  q.cap_.max_inline_data = c.max_inline_data;
  while (e.qp_by_num.count(e.next_qpn) || e.next_qpn < 2) e.next_qpn = (e.next_qpn + 1) & 0xFFFFFF;
  q.qpn = e.next_qpn;
  e.next_qpn = (e.next_qpn + 1) & 0xFFFFFF;
  // RoCEv2 UDP source port: 0xC000 | 14 bits of the QPN hash (as rxe's older scheme)
  q.sport = static_cast<uint16_t>(0xC000 | ((q.qpn ^ (q.qpn >> 14) ^ (q.qpn * 2654435761u >> 18)) & 0x3FFF));

  q.sq.resize(q.cap_.max_send_wr);
  for (SendWqe& w : q.sq) {
    w.segs.resize(q.cap_.max_send_sge);
    w.inline_buf.resize(q.cap_.max_inline_data);
  }
  if (!q.srq_) q.rq.init(q.cap_.max_recv_wr, q.cap_.max_recv_sge);
  q.resp.wqe.sge.resize(std::max<uint32_t>({q.cap_.max_recv_sge, q.srq_ ? q.srq_->rq.max_sge() : 0, 1}));
  q.resp.res.resize(1);
  QpImpl* raw = &q;
  q.comp.retrans_timer = e.transport->make_timer([raw] { comp_on_retrans_timer(*raw); });
  q.comp.rnr_timer = e.transport->make_timer([raw] { comp_on_rnr_timer(*raw); });
  q.attr.qp_state = QpState::kReset;
  q.attr.cap = q.cap_;
  q.attr.port_num = kPortNum;
  q.attr.path_mtu = e.pattr.active_mtu;

  q.pd->users++;
  q.scq->users++;
  q.rcq->users++;
  if (q.srq_) q.srq_->users++;
  e.qp_by_num[q.qpn] = raw;
  e.qps.push_back(std::move(qp));
  return static_cast<Qp*>(raw);
}

std::error_code Device::destroy_qp(Qp* qpp) {
  Engine& e = *engine_;
  std::lock_guard lk(e.mu);
  if (!device_owns_qp(e, qpp)) return errc(EINVAL);
  auto* qp = static_cast<QpImpl*>(qpp);
  // Type 2 windows bound to it go back to free (rxe drops them with the QP).
  for (auto& w : e.mws)
    if (w->qp == qp) invalidate_rkey(*qp, w->key);
  e.qp_by_num.erase(qp->qpn);
  qp->pd->users--;
  qp->scq->users--;
  qp->rcq->users--;
  if (qp->srq_) qp->srq_->users--;
  std::erase(e.ack_list, qp);
  for (auto it = e.qps.begin(); it != e.qps.end(); ++it) {
    if (it->get() == qp) {
      e.qps.erase(it);
      break;
    }
  }
  return {};
}

uint32_t Qp::qp_num() const { return static_cast<const QpImpl*>(this)->qpn; }
QpType Qp::type() const { return static_cast<const QpImpl*>(this)->type_; }
QpState Qp::state() const {
  auto* q = static_cast<const QpImpl*>(this);
  std::lock_guard lk(q->eng->mu);
  return q->state_;
}
const QpCap& Qp::cap() const { return static_cast<const QpImpl*>(this)->cap_; }
Pd* Qp::pd() const { return static_cast<const QpImpl*>(this)->pd; }
Cq* Qp::send_cq() const { return static_cast<const QpImpl*>(this)->scq; }
Cq* Qp::recv_cq() const { return static_cast<const QpImpl*>(this)->rcq; }
Srq* Qp::srq() const { return static_cast<const QpImpl*>(this)->srq_; }

Counters Qp::counters() const {
  auto* q = static_cast<const QpImpl*>(this);
  std::lock_guard lk(q->eng->mu);
  return q->ctr;
}

std::error_code Qp::query(QpAttr* attr, QpInitAttr* init) const {
  auto* q = static_cast<const QpImpl*>(this);
  std::lock_guard lk(q->eng->mu);
  if (attr) {
    *attr = q->attr;
    attr->qp_state = attr->cur_qp_state = q->state_;
    attr->cap = q->cap_;
    attr->sq_draining = q->state_ == QpState::kSqd && q->sq_head != q->req.cur;
  }
  if (init) {
    init->send_cq = q->scq;
    init->recv_cq = q->rcq;
    init->srq = q->srq_;
    init->cap = q->cap_;
    init->qp_type = q->type_;
    init->sq_sig_all = q->sq_sig_all;
  }
  return {};
}

// ---- posting ----

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
  if (!opcode_valid(qp.type_, wr.opcode))
    return refuse("not an opcode a " + std::string(to_string(qp.type_)) + " QP can post");
  if (wr.opcode == WrOpcode::kBindMw && (!wr.bind_mw.mw || !wr.sg_list.empty()))
    return refuse("a BIND_MW names a window (bind_mw.mw) and carries no SGE");
  if (wr.sg_list.size() > qp.cap_.max_send_sge)
    return refuse(std::to_string(wr.sg_list.size()) + " SGEs, the QP has max_send_sge " +
                  std::to_string(qp.cap_.max_send_sge));
  const bool is_inline = (wr.send_flags & send_flags::kInline) &&
                         wr.opcode != WrOpcode::kRdmaRead && wr.opcode != WrOpcode::kAtomicCmpAndSwp &&
                         wr.opcode != WrOpcode::kAtomicFetchAndAdd;
  uint64_t total = 0;
  for (const Sge& s : wr.sg_list) total += s.length;
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
  if (is_inline) {
    size_t off = 0;
    for (const Sge& s : wr.sg_list) {
      if (s.length) std::memcpy(w.inline_buf.data() + off, reinterpret_cast<const void*>(s.addr), s.length);
      off += s.length;
    }
    w.segs[0] = {w.inline_buf.data(), w.length};
    w.num_segs = 1;
  } else {
    // Local protection (IBTA 10.6.3): the lkey names an MR of this PD that covers
    // the SGE and, for READ and atomic results written here, grants local write.
    const bool writes_local = wr.opcode == WrOpcode::kRdmaRead ||
                              wr.opcode == WrOpcode::kAtomicCmpAndSwp ||
                              wr.opcode == WrOpcode::kAtomicFetchAndAdd;
    for (const Sge& s : wr.sg_list) {
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
    const bool atomic = wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
    if (atomic) {
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
  if (qp.state_ == QpState::kReset || qp.state_ == QpState::kInit || qp.state_ == QpState::kRtr) {
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
  if (qp.srq_ || qp.state_ == QpState::kReset) {
    ec = errc(EINVAL);
    qp.refusal = qp.srq_ ? "post_recv on a QP with an SRQ: receives go to the SRQ (ibv_post_srq_recv)"
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
