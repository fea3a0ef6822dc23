// The QP state machine (IBTA 10.3.1, Table 91): one table drives every
// modify_qp. Checks everything, then applies: a failure changes nothing.
#include "emu/qp_state.h"

#include <array>
#include <cerrno>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

using namespace qp_attr;

constexpr int S(QpState s) { return static_cast<int>(s); }

// Per type {RC, UC, UD}.
constexpr QpTransition T(uint32_t rc_req, uint32_t uc_req, uint32_t ud_req, uint32_t rc_opt,
                         uint32_t uc_opt, uint32_t ud_opt) {
  QpTransition t;
  t.valid = true;
  t.req[0] = rc_req; t.req[1] = uc_req; t.req[2] = ud_req;
  t.opt[0] = rc_opt; t.opt[1] = uc_opt; t.opt[2] = ud_opt;
  return t;
}
constexpr QpTransition kNone = T(0, 0, 0, 0, 0, 0);

constexpr auto make_table() {
  std::array<std::array<QpTransition, kNumQpStates>, kNumQpStates> t{};
  using Q = QpState;
  for (int s = 0; s < kNumQpStates; ++s) t[s][S(Q::kReset)] = kNone;  // any -> RESET
  for (int s = S(Q::kInit); s < kNumQpStates; ++s) t[s][S(Q::kErr)] = kNone;  // not RESET -> ERR
  t[S(Q::kReset)][S(Q::kInit)] =
      T(kPkeyIndex | kPort | kAccessFlags, kPkeyIndex | kPort | kAccessFlags, kPkeyIndex | kPort | kQkey,
        0, 0, 0);
  t[S(Q::kInit)][S(Q::kInit)] =
      T(0, 0, 0, kPkeyIndex | kPort | kAccessFlags, kPkeyIndex | kPort | kAccessFlags, kPkeyIndex | kPort | kQkey);
  t[S(Q::kInit)][S(Q::kRtr)] =
      T(kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
        kAv | kPathMtu | kDestQpn | kRqPsn, 0,
        kAltPath | kAccessFlags | kPkeyIndex, kAltPath | kAccessFlags | kPkeyIndex, kPkeyIndex | kQkey);
  t[S(Q::kRtr)][S(Q::kRts)] =
      T(kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxQpRdAtomic, kSqPsn, kSqPsn,
        kCurState | kAltPath | kAccessFlags | kMinRnrTimer | kPathMigState,
        kCurState | kAltPath | kAccessFlags | kPathMigState, kCurState | kQkey);
  const QpTransition rts_rts =
      T(0, 0, 0, kCurState | kAltPath | kAccessFlags | kPathMigState | kMinRnrTimer,
        kCurState | kAltPath | kAccessFlags | kPathMigState, kCurState | kQkey);
  t[S(Q::kRts)][S(Q::kRts)] = rts_rts;
  t[S(Q::kSqd)][S(Q::kRts)] = rts_rts;
  t[S(Q::kRts)][S(Q::kSqd)] = T(0, 0, 0, kEnSqdAsyncNotify, kEnSqdAsyncNotify, kEnSqdAsyncNotify);
  t[S(Q::kSqd)][S(Q::kSqd)] =
      T(0, 0, 0,
        kPort | kAv | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic | kMaxDestRdAtomic | kAltPath |
            kAccessFlags | kPkeyIndex | kMinRnrTimer | kPathMigState,
        kAv | kAltPath | kAccessFlags | kPkeyIndex | kPathMigState, kPkeyIndex | kQkey);
  t[S(Q::kSqe)][S(Q::kRts)] = T(0, 0, 0, 0, kCurState | kAccessFlags, kCurState | kQkey);
  return t;
}

constexpr auto kTable = make_table();

// The invariants of qp_state_table.md, pinned at compile time.
static_assert(!kTable[S(QpState::kReset)][S(QpState::kErr)].valid);
static_assert(!kTable[S(QpState::kRtr)][S(QpState::kRtr)].valid);
static_assert(!kTable[S(QpState::kSqe)][S(QpState::kSqe)].valid);
static_assert(kTable[S(QpState::kErr)][S(QpState::kErr)].valid);
static_assert(kTable[S(QpState::kReset)][S(QpState::kReset)].valid);

// Attribute values (beyond the mask): what rxe_qp_chk_attr and the verbs layer reject.
std::error_code check_values(const QpImpl& qp, const QpAttr& a, uint32_t mask) {
  const Engine& e = *qp.eng;
  if ((mask & kPort) && a.port_num != kPortNum) return errc(EINVAL);
  if ((mask & kPkeyIndex) && a.pkey_index >= e.pattr.pkey_tbl_len) return errc(EINVAL);
  if ((mask & kPathMtu) &&
      (static_cast<uint8_t>(a.path_mtu) < 1 || static_cast<uint8_t>(a.path_mtu) > static_cast<uint8_t>(e.pattr.max_mtu)))
    return errc(EINVAL);
  if ((mask & kTimeout) && a.timeout > 31) return errc(EINVAL);
  if ((mask & kRetryCnt) && a.retry_cnt > 7) return errc(EINVAL);
  if ((mask & kRnrRetry) && a.rnr_retry > 7) return errc(EINVAL);
  if ((mask & kMinRnrTimer) && a.min_rnr_timer > 31) return errc(EINVAL);
  if ((mask & kMaxQpRdAtomic) && a.max_rd_atomic > e.dattr.max_qp_init_rd_atom) return errc(EINVAL);
  if ((mask & kMaxDestRdAtomic) && a.max_dest_rd_atomic > e.dattr.max_qp_rd_atom) return errc(EINVAL);
  if ((mask & kAccessFlags) &&
      (a.qp_access_flags & ~(access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                             access::kRemoteAtomic | access::kMwBind)))
    return errc(EINVAL);
  if ((mask & kAv) &&
      (!a.ah_attr.is_global || a.ah_attr.sgid_index != 0 || a.ah_attr.port_num > kPortNum))
    return errc(EINVAL);  // RoCE needs a GRH; only GID index 0 is in use
  if ((mask & kPathMigState) && static_cast<uint8_t>(a.path_mig_state) > 2) return errc(EINVAL);
  if ((mask & kEnSqdAsyncNotify) && a.en_sqd_async_notify > 1) return errc(EINVAL);
  return {};
}

// Effects of entering a state.
void enter(QpImpl& qp, QpState from, QpState to) {
  switch (to) {
    case QpState::kReset:
      // IBTA 10.3.1: RESET empties both queues without completions.
      qp.comp.retrans_timer->cancel();
      qp.comp.rnr_timer->cancel();
      qp.sq_head = qp.sq_tail = 0;
      qp.rq.clear();
      qp.req = Requester{};
      qp.resp.seq = Responder::Seq::kNone;
      qp.resp.have_wqe = qp.resp.ack_pending = qp.resp.nak_sent = qp.resp.uc_drop = false;
      qp.resp.msn = 0;
      for (auto& r : qp.resp.res) r.valid = false;
      set_state(qp, to);
      return;
    case QpState::kErr:
      qp_to_error(qp, false, EventType::kQpFatal);
      return;
    case QpState::kRtr:
      set_state(qp, to);
      return;
    case QpState::kRts:
      set_state(qp, to);
      if (from == QpState::kSqd || from == QpState::kSqe) req_run(qp);
      return;
    case QpState::kSqd:
      set_state(qp, to);
      if (qp.sq_head == qp.req.cur && qp.attr.en_sqd_async_notify) {
        AsyncEvent ev;
        ev.event_type = EventType::kSqDrained;
        ev.qp = &qp;
        qp.eng->raise_async(ev);
      } else {
        qp.sq_drained_notify = qp.attr.en_sqd_async_notify;
      }
      return;
    case QpState::kInit:
    case QpState::kSqe:
      set_state(qp, to);
      return;
  }
}

}  // namespace

const QpTransition& qp_transition(QpState from, QpState to) { return kTable[S(from)][S(to)]; }

bool qp_modify_is_ok(QpState cur, QpState next, QpType type, uint32_t mask) {
  if (static_cast<int>(cur) >= kNumQpStates || static_cast<int>(next) >= kNumQpStates) return false;
  const QpTransition& t = kTable[S(cur)][S(next)];
  if (!t.valid) return false;
  if ((mask & kCurState) && cur != QpState::kRtr && cur != QpState::kRts && cur != QpState::kSqd &&
      cur != QpState::kSqe)
    return false;
  const int ti = type_index(type);
  if ((mask & t.req[ti]) != t.req[ti]) return false;
  if (mask & ~(t.req[ti] | t.opt[ti] | kState)) return false;
  return true;
}

std::error_code Qp::modify(const QpAttr& a, uint32_t mask) {
  auto& qp = *static_cast<QpImpl*>(this);
  Engine& e = *qp.eng;
  std::lock_guard lk(e.mu);
  // Check everything ...
  if ((mask & kCurState) && a.cur_qp_state != qp.state_) return errc(EINVAL);
  const QpState cur = qp.state_;
  const QpState next = (mask & kState) ? a.qp_state : cur;
  if (!qp_modify_is_ok(cur, next, qp.type_, mask)) return errc(EINVAL);
  if (auto ec = check_values(qp, a, mask)) return ec;

  // ... then apply everything.
  QpAttr& s = qp.attr;
  if (mask & kEnSqdAsyncNotify) s.en_sqd_async_notify = a.en_sqd_async_notify;
  if (mask & kAccessFlags) s.qp_access_flags = a.qp_access_flags;
  if (mask & kPkeyIndex) s.pkey_index = a.pkey_index;
  if (mask & kPort) s.port_num = a.port_num;
  if (mask & kQkey) s.qkey = a.qkey;
  if (mask & kAv) {
    s.ah_attr = a.ah_attr;
    qp.dst = wire::IpAddr::from_gid(a.ah_attr.dgid);
  }
  if (mask & kPathMtu) s.path_mtu = a.path_mtu;
  if (mask & kTimeout) s.timeout = a.timeout;
  if (mask & kRetryCnt) {
    s.retry_cnt = a.retry_cnt;
    qp.comp.retry_left = a.retry_cnt;
  }
  if (mask & kRnrRetry) {
    s.rnr_retry = a.rnr_retry;
    qp.comp.rnr_retry_left = a.rnr_retry;
  }
  if (mask & kRqPsn) {
    s.rq_psn = a.rq_psn & wire::kMask24;
    qp.resp.epsn = Psn(s.rq_psn);
  }
  if (mask & kMaxQpRdAtomic) s.max_rd_atomic = a.max_rd_atomic;
  if (mask & kAltPath) {
    s.alt_ah_attr = a.alt_ah_attr;
    s.alt_pkey_index = a.alt_pkey_index;
    s.alt_port_num = a.alt_port_num;
    s.alt_timeout = a.alt_timeout;
  }
  if (mask & kMinRnrTimer) s.min_rnr_timer = a.min_rnr_timer;
  if (mask & kSqPsn) {
    s.sq_psn = a.sq_psn & wire::kMask24;
    qp.req.next_psn = Psn(s.sq_psn);
    qp.comp.psn = Psn(s.sq_psn);
  }
  if (mask & kMaxDestRdAtomic) {
    s.max_dest_rd_atomic = a.max_dest_rd_atomic;
    qp.resp.res.assign(std::max<size_t>(a.max_dest_rd_atomic, 1), RdAtomicRes{});
    qp.resp.res_next = 0;
  }
  if (mask & kPathMigState) s.path_mig_state = a.path_mig_state;
  if (mask & kDestQpn) s.dest_qp_num = a.dest_qp_num & wire::kMask24;
  if (mask & kRateLimit) s.rate_limit = a.rate_limit;
  if (next != cur || next == QpState::kReset) enter(qp, cur, next);
  e.tx_flush();
  return {};
}

}  // namespace rocelab::emu
