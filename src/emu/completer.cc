// The completer (IBTA 9.7.5.1 requester side, rxe_comp.c): ACKs, NAKs, READ
// responses and ATOMIC ACKs complete WQEs in order; the retransmit and RNR
// timers drive go-back-N retries.
#include <algorithm>
#include <bit>
#include <cstring>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

using wire::AckKind;
using wire::NakCode;
using wire::OpClass;

enum class CompState : uint8_t {
  kGetWqe, kCheckPsn, kCheckAck, kRead, kAtomic, kWriteSend, kUpdateComp, kCompWqe,
  kErrorRetry, kRnrRetry, kErrorNak, kDone, kExit,
};
// As rxe_comp.c names them (comp_state_name[]); the event log shows them.
constexpr std::string_view kCompStateNames[] = {
    "get_wqe", "check_psn", "check_ack", "read", "atomic", "write_send", "update_comp", "comp_wqe",
    "error_retry", "rnr_retry", "error", "done", "exit",
};
static_assert(std::size(kCompStateNames) == static_cast<size_t>(CompState::kExit) + 1);

struct Scratch {
  const wire::RocePacket& pkt;
  Psn psn;
  SendWqe* w = nullptr;
  WcStatus status = WcStatus::kSuccess;
};

Nanos retrans_timeout(uint8_t timeout) {
  // IBTA 9.7.6.1.3: 4.096 us * 2^timeout.
  return Nanos(uint64_t{4096} << std::min<uint8_t>(timeout, 31));
}

CompState get_wqe(QpImpl& qp, Scratch& s) {
  if (qp.sq_head == qp.req.cur && !(qp.sq_head != qp.sq_tail && qp.wqe(qp.sq_head).started))
    return CompState::kExit;  // nothing sent and outstanding: a stray or late response
  s.w = &qp.wqe(qp.sq_head);
  if (!s.w->started) return CompState::kExit;
  return CompState::kCheckPsn;
}

CompState check_psn(QpImpl& qp, Scratch& s) {
  const wire::OpInfo& info = s.pkt.hdr.info();
  // A response beyond this WQE acknowledges it implicitly (IBTA 9.7.5.1.4),
  // unless it is a READ or atomic: their data went missing.
  if (s.psn.after(s.w->last_psn)) {
    if (s.w->is_rd_atomic()) return CompState::kErrorRetry;
    return CompState::kCompWqe;
  }
  if (s.psn.before(qp.comp.psn)) {
    // A duplicate (a response to a retried request): ignore.
    return CompState::kExit;
  }
  if (s.psn.after(qp.comp.psn) && s.w->is_rd_atomic() && info.is(OpClass::kRead | OpClass::kResponse))
    return CompState::kErrorRetry;  // READ response packets missing
  return CompState::kCheckAck;
}

CompState check_ack(QpImpl& qp, Scratch& s) {
  const wire::OpInfo& info = s.pkt.hdr.info();
  const WrKind kind = wr_op_info(s.w->wr.opcode).kind;
  if (info.is(OpClass::kRead)) {
    if (kind != WrKind::kRead) return CompState::kExit;  // unexpected: drop
    if (info.carries(wire::Hdr::kAeth) && s.pkt.hdr.aeth.kind() != AckKind::kAck) return CompState::kExit;
    return CompState::kRead;
  }
  if (info.carries(wire::Hdr::kAtomicAckEth)) {
    if (kind != WrKind::kAtomic) return CompState::kExit;
    return CompState::kAtomic;
  }
  const wire::Aeth& aeth = s.pkt.hdr.aeth;
  switch (aeth.kind()) {
    case AckKind::kAck:
      if (s.w->is_rd_atomic()) return CompState::kErrorRetry;  // ACK where data was due
      return CompState::kWriteSend;
    case AckKind::kRnrNak:
      return CompState::kRnrRetry;
    case AckKind::kNak:
      switch (static_cast<NakCode>(aeth.value5())) {
        case NakCode::kPsnSeqError:
          qp.ctr.rcvd_seq_err++;
          qp.eng->counters.rcvd_seq_err++;
          // The NAK acknowledges everything before its PSN: forward progress
          // resets the retry counter (IBTA 9.7.6.1.2), and the retry starts afresh.
          if (s.psn.after(qp.comp.psn)) {
            qp.comp.psn = s.psn;
            qp.comp.retry_left = qp.attr.retry_cnt;
            qp.comp.started_retry = false;
          }
          return CompState::kErrorRetry;
        case NakCode::kInvalidRequest: s.status = WcStatus::kRemInvReqErr; return CompState::kErrorNak;
        case NakCode::kRemoteAccessError: s.status = WcStatus::kRemAccessErr; return CompState::kErrorNak;
        case NakCode::kRemoteOpError: s.status = WcStatus::kRemOpErr; return CompState::kErrorNak;
        case NakCode::kInvalidRdRequest: s.status = WcStatus::kRemInvRdReqErr; return CompState::kErrorNak;
      }
      s.status = WcStatus::kBadRespErr;
      return CompState::kErrorNak;
    case AckKind::kReserved:
      break;
  }
  return CompState::kExit;
}

CompState do_read(QpImpl& qp, Scratch& s) {
  SendWqe& w = *s.w;
  const uint64_t off = uint64_t{static_cast<uint32_t>(s.psn.distance(w.first_psn))} * qp.pmtu();
  const uint32_t len = static_cast<uint32_t>(s.pkt.payload.size());
  if (off + len > w.length) {
    s.status = WcStatus::kBadRespErr;  // more data than asked for
    return CompState::kErrorNak;
  }
  scatter(w.segs, w.num_segs, off, s.pkt.payload.data(), len);
  qp.comp.psn = s.psn + 1;
  if (s.psn == w.last_psn) return CompState::kCompWqe;
  return CompState::kUpdateComp;
}

CompState do_atomic(QpImpl&, Scratch& s) {
  SendWqe& w = *s.w;
  std::byte orig[8];
  std::memcpy(orig, &s.pkt.hdr.atomic_ack_eth.orig, 8);  // host order, as the CPU reads it
  scatter(w.segs, w.num_segs, 0, orig, 8);
  return CompState::kCompWqe;
}

CompState write_send(QpImpl& qp, Scratch& s) {
  if (s.psn == s.w->last_psn) return CompState::kCompWqe;
  qp.comp.psn = s.psn + 1;  // part of a long message acknowledged
  return CompState::kUpdateComp;
}

CompState comp_wqe(QpImpl& qp, Scratch& s) {
  qp.comp.psn = s.w->last_psn + 1;
  complete_send(qp, WcStatus::kSuccess);
  qp.comp.retry_left = qp.attr.retry_cnt;
  qp.comp.rnr_retry_left = qp.attr.rnr_retry;
  // More WQEs may be covered by the same (coalesced) ACK.
  if (s.psn.after(s.w->last_psn)) return CompState::kGetWqe;
  return CompState::kDone;
}

// retry_cnt N: N retries in a row without progress, then RETRY_EXC_ERR — 7
// included, as the IBTA and NICs have it. A device made with retry_forever
// reads 7 as rxe does (rxe_comp.c COMPST_ERROR_RETRY: forever), unless the
// network has told us the peer is gone (ICMP unreachable: its process has
// exited): then 7 means seven again (docs/rc-reliability.md).
bool retries_exhausted(const QpImpl& qp) {
  if (qp.comp.retry_left != 0) return false;
  return qp.attr.retry_cnt != 7 || !qp.eng->cfg.retry_forever || qp.eng->gone_peers.contains(qp.dst);
}

// Go-back-N from comp.psn, while retries last. retry_left is reset by every
// forward progress, so it counts consecutive retries without progress.
CompState error_retry(QpImpl& qp, Scratch& s) {
  if (qp.comp.started_retry) return CompState::kExit;
  if (retries_exhausted(qp)) {
    qp.ctr.retry_exceeded_err++;
    qp.eng->counters.retry_exceeded_err++;
    s.status = WcStatus::kRetryExcErr;
    return CompState::kErrorNak;
  }
  if (qp.comp.retry_left != 0) qp.comp.retry_left--;
  qp.ctr.completer_retry_err++;
  qp.eng->counters.completer_retry_err++;
  req_rewind(qp, qp.comp.psn);
  qp.comp.started_retry = true;
  return CompState::kDone;
}

CompState rnr_retry(QpImpl& qp, Scratch& s) {
  qp.ctr.rcvd_rnr_err++;
  qp.eng->counters.rcvd_rnr_err++;
  if (qp.comp.rnr_retry_left == 0) {
    qp.ctr.rnr_nak_retry_err++;
    qp.eng->counters.rnr_nak_retry_err++;
    s.status = WcStatus::kRnrRetryExcErr;
    return CompState::kErrorNak;
  }
  if (qp.attr.rnr_retry != 7) qp.comp.rnr_retry_left--;  // IBTA: 7 means retry forever
  if (s.psn.after(qp.comp.psn)) qp.comp.psn = s.psn;
  req_rewind(qp, s.psn);
  qp.req.rnr_wait = true;
  req_budget_sync(qp);  // nothing of it is in flight until the RNR timer fires
  qp.comp.retrans_timer->cancel();
  const uint32_t us = wire::rnr_timer_us(s.pkt.hdr.aeth.value5());
  qp.comp.rnr_timer->arm_at(qp.eng->transport->now() + std::chrono::microseconds(us));
  return CompState::kExit;
}

CompState error_nak(QpImpl& qp, Scratch& s) {
  // IBTA 9.9.3 / rxe: the WQE completes in error (always with a CQE), the QP goes to ERR.
  complete_send(qp, s.status);
  qp_to_error(qp, false, EventType::kQpFatal);
  return CompState::kExit;
}

}  // namespace

void comp_update_timer(QpImpl& qp) {
  const bool outstanding = qp.sq_head != qp.req.cur ||
                           (qp.sq_head != qp.sq_tail && qp.wqe(qp.sq_head).started);
  if (!outstanding || qp.attr.timeout == 0 || qp.state_ == QpState::kErr) {
    qp.comp.retrans_timer->cancel();
    return;
  }
  qp.comp.retrans_timer->arm_at(qp.eng->transport->now() + retrans_timeout(qp.attr.timeout));
}

std::string_view comp_state_name(uint8_t s) {
  return s < std::size(kCompStateNames) ? kCompStateNames[s] : "?";
}

namespace {
// Logs the states one run went through (only when an event sink listens).
void log_steps(QpImpl& qp, uint32_t psn, const RoleSteps& steps) {
  if (!qp.eng->logging()) return;
  EngineEvent e;
  e.kind = EventKind::kRoleSteps;
  e.qpn = qp.qpn;
  e.psn = psn;
  e.steps = steps;
  qp.eng->log(e);
}
}  // namespace

void comp_on_response(QpImpl& qp, const wire::RocePacket& pkt) {
  if (!qp.reliable()) return;
  Scratch s{pkt, pkt.hdr.bth.psn};
  CompState st = CompState::kGetWqe;
  bool progressed = false;
  RoleSteps steps;
  steps.role = Role::kCompleter;
  for (;;) {
    steps.add(static_cast<uint8_t>(st));
    switch (st) {
      case CompState::kGetWqe: st = get_wqe(qp, s); break;
      case CompState::kCheckPsn: st = check_psn(qp, s); break;
      case CompState::kCheckAck: st = check_ack(qp, s); break;
      case CompState::kRead: st = do_read(qp, s); break;
      case CompState::kAtomic: st = do_atomic(qp, s); break;
      case CompState::kWriteSend: st = write_send(qp, s); break;
      case CompState::kUpdateComp:
        qp.comp.retry_left = qp.attr.retry_cnt;
        qp.comp.started_retry = false;
        qp.comp.timed_out = false;
        progressed = true;
        st = CompState::kDone;
        break;
      case CompState::kCompWqe:
        progressed = true;
        qp.comp.started_retry = false;
        qp.comp.timed_out = false;
        st = comp_wqe(qp, s);
        break;
      case CompState::kErrorRetry: st = error_retry(qp, s); break;
      case CompState::kRnrRetry: st = rnr_retry(qp, s); break;
      case CompState::kErrorNak: st = error_nak(qp, s); break;
      case CompState::kDone:
        log_steps(qp, s.psn.value(), steps);
        if (qp.state_ != QpState::kErr) {
          req_run(qp);
          comp_update_timer(qp);
        }
        return;
      case CompState::kExit:
        log_steps(qp, s.psn.value(), steps);
        if (progressed && qp.state_ != QpState::kErr) {
          req_run(qp);
          comp_update_timer(qp);
        }
        return;
    }
  }
}

// Logs the expiry of one of the QP's timers (reason: a static string).
static void log_timer(QpImpl& qp, std::string_view reason) {
  EngineEvent e;
  e.kind = EventKind::kTimer;
  e.qpn = qp.qpn;
  e.psn = qp.comp.psn.value();
  e.reason = reason;
  qp.eng->log(e);
}

void comp_on_retrans_timer(QpImpl& qp) {
  if (qp.state_ == QpState::kErr || qp.state_ == QpState::kReset) return;
  log_timer(qp, "retransmit");
  const bool outstanding = qp.sq_head != qp.req.cur ||
                           (qp.sq_head != qp.sq_tail && qp.wqe(qp.sq_head).started);
  if (!outstanding) return;
  wire::RocePacket none{};
  Scratch s{none, qp.comp.psn};
  qp.comp.started_retry = false;  // a timeout always retries
  qp.comp.timed_out = true;       // req_run below gives the in-flight budget back
  if (error_retry(qp, s) == CompState::kErrorNak) {
    error_nak(qp, s);
    return;
  }
  req_run(qp);
  comp_update_timer(qp);
}

void comp_on_rnr_timer(QpImpl& qp) {
  if (qp.state_ == QpState::kErr || qp.state_ == QpState::kReset) return;
  log_timer(qp, "rnr");
  qp.req.rnr_wait = false;
  req_run(qp);
  comp_update_timer(qp);
}

}  // namespace rocelab::emu
