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

  // XRC (qp_state_table.md; Linux qp_state_table): the initiator is RC without
  // the responder's attributes, the target RC without the requester's.
  auto xrc = [&](Q from, Q to, uint32_t ini_req, uint32_t tgt_req, uint32_t ini_opt, uint32_t tgt_opt) {
    QpTransition& x = t[S(from)][S(to)];
    x.req[3] = ini_req; x.req[4] = tgt_req;
    x.opt[3] = ini_opt; x.opt[4] = tgt_opt;
  };
  xrc(Q::kReset, Q::kInit, kPkeyIndex | kPort | kAccessFlags, kPkeyIndex | kPort | kAccessFlags, 0, 0);
  xrc(Q::kInit, Q::kInit, 0, 0, kPkeyIndex | kPort | kAccessFlags, kPkeyIndex | kPort | kAccessFlags);
  xrc(Q::kInit, Q::kRtr, kAv | kPathMtu | kDestQpn | kRqPsn,
      kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
      kAltPath | kAccessFlags | kPkeyIndex, kAltPath | kAccessFlags | kPkeyIndex);
  xrc(Q::kRtr, Q::kRts, kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxQpRdAtomic, kTimeout | kSqPsn,
      kCurState | kAltPath | kAccessFlags | kPathMigState,
      kCurState | kAltPath | kAccessFlags | kMinRnrTimer | kPathMigState);
  for (Q from : {Q::kRts, Q::kSqd})
    xrc(from, Q::kRts, 0, 0, kCurState | kAltPath | kAccessFlags | kPathMigState,
        kCurState | kAltPath | kAccessFlags | kPathMigState | kMinRnrTimer);
  xrc(Q::kRts, Q::kSqd, 0, 0, kEnSqdAsyncNotify, kEnSqdAsyncNotify);
  xrc(Q::kSqd, Q::kSqd, 0, 0,
      kPort | kAv | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic | kAltPath | kAccessFlags | kPkeyIndex |
          kPathMigState,
      kPort | kAv | kTimeout | kMaxDestRdAtomic | kAltPath | kAccessFlags | kPkeyIndex | kMinRnrTimer |
          kPathMigState);
  return t;
}

constexpr auto kTable = make_table();

// The invariants of qp_state_table.md, pinned at compile time.
static_assert(!kTable[S(QpState::kReset)][S(QpState::kErr)].valid);
static_assert(!kTable[S(QpState::kRtr)][S(QpState::kRtr)].valid);
static_assert(!kTable[S(QpState::kSqe)][S(QpState::kSqe)].valid);
static_assert(kTable[S(QpState::kErr)][S(QpState::kErr)].valid);
static_assert(kTable[S(QpState::kReset)][S(QpState::kReset)].valid);

// Attribute values (beyond the mask): what rxe_qp_chk_attr and the verbs layer
// reject. nullptr when every value is acceptable, else why not.
const char* check_values(const QpImpl& qp, const QpAttr& a, uint32_t mask) {
  const Engine& e = *qp.eng;
  if ((mask & kPort) && a.port_num != kPortNum) return "PORT: the device has one port, 1";
  if ((mask & kPkeyIndex) && a.pkey_index >= e.pattr.pkey_tbl_len) return "PKEY_INDEX past the P_Key table";
  if ((mask & kPathMtu) &&
      (static_cast<uint8_t>(a.path_mtu) < 1 || static_cast<uint8_t>(a.path_mtu) > static_cast<uint8_t>(e.pattr.max_mtu)))
    return "PATH_MTU is not an MTU this port supports (256..4096)";
  if ((mask & kTimeout) && a.timeout > 31) return "TIMEOUT above 31";
  if ((mask & kRetryCnt) && a.retry_cnt > 7) return "RETRY_CNT above 7";
  if ((mask & kRnrRetry) && a.rnr_retry > 7) return "RNR_RETRY above 7";
  if ((mask & kMinRnrTimer) && a.min_rnr_timer > 31) return "MIN_RNR_TIMER above 31";
  if ((mask & kMaxQpRdAtomic) && a.max_rd_atomic > e.dattr.max_qp_init_rd_atom)
    return "MAX_QP_RD_ATOMIC above the device's max_qp_init_rd_atom";
  if ((mask & kMaxDestRdAtomic) && a.max_dest_rd_atomic > e.dattr.max_qp_rd_atom)
    return "MAX_DEST_RD_ATOMIC above the device's max_qp_rd_atom";
  if ((mask & kAccessFlags) &&
      (a.qp_access_flags & ~(access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                             access::kRemoteAtomic | access::kMwBind)))
    return "ACCESS_FLAGS has an unknown bit";
  if ((mask & kAv) && !a.ah_attr.is_global) return "AV without a GRH: RoCE addresses peers by GID (is_global 1)";
  if ((mask & kAv) && (a.ah_attr.sgid_index != 0 || a.ah_attr.port_num > kPortNum))
    return "AV: only GID index 0 of port 1 is in use";
  if ((mask & kPathMigState) && static_cast<uint8_t>(a.path_mig_state) > 2) return "PATH_MIG_STATE unknown";
  if ((mask & kEnSqdAsyncNotify) && a.en_sqd_async_notify > 1) return "EN_SQD_ASYNC_NOTIFY must be 0 or 1";
  return nullptr;
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
      // The device's in-flight budget gets this QP's share back (requester.cc).
      qp.eng->inflight_psns -= qp.req.counted;
      if (qp.req.starved) std::erase(qp.eng->starved, &qp);
      qp.req = Requester{};
      qp.resp.seq = Responder::Seq::kNone;
      qp.resp.have_wqe = qp.resp.ack_pending = qp.resp.nak_sent = qp.resp.uc_drop = false;
      qp.resp.msn = 0;
      for (auto& r : qp.resp.res) r.valid = false;
      cc_init(qp);  // a new connection starts at line rate
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

// Every state change goes through here: the event log records it.
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
  if (qp.req.counted != 0) req_budget_sync(qp);  // ERR and RESET give the QP's share back
}

std::string Qp::last_refusal() const {
  auto& qp = *static_cast<const QpImpl*>(this);
  std::lock_guard lk(qp.eng->mu);
  return qp.refusal;
}

const QpTransition& qp_transition(QpState from, QpState to) { return kTable[S(from)][S(to)]; }

bool qp_modify_is_ok(QpState cur, QpState next, QpType type, uint32_t mask) {
  return check_qp_modify(cur, next, type, mask).ok;
}

QpModifyVerdict check_qp_modify(QpState cur, QpState next, QpType type, uint32_t mask) {
  QpModifyVerdict v;
  if (static_cast<int>(cur) >= kNumQpStates || static_cast<int>(next) >= kNumQpStates) return v;
  const QpTransition& t = kTable[S(cur)][S(next)];
  if (!t.valid) return v;
  v.valid_transition = true;
  v.cur_state_refused = (mask & kCurState) && cur != QpState::kRtr && cur != QpState::kRts &&
                        cur != QpState::kSqd && cur != QpState::kSqe;
  const int ti = type_index(type);
  v.missing = t.req[ti] & ~mask;
  v.not_allowed = mask & ~(t.req[ti] | t.opt[ti] | kState);
  if (v.cur_state_refused) v.not_allowed &= ~kCurState;  // said once, as its own reason
  v.ok = !v.cur_state_refused && v.missing == 0 && v.not_allowed == 0;
  return v;
}

namespace {
std::string bit_list(uint32_t bits) {
  std::string s;
  for (int b = 0; b < kNumBits; ++b) {
    if (!(bits & (1u << b))) continue;
    if (!s.empty()) s += ", ";
    const std::string_view n = bit_name(1u << b);
    s += n.empty() ? "bit " + std::to_string(b) : std::string(n);
  }
  return s;
}
}  // namespace

std::string QpModifyVerdict::text(QpState from, QpState to, QpType type) const {
  std::string s = "modify_qp " + std::string(to_string(from)) + "->" + std::string(to_string(to)) + " on " +
                  std::string(to_string(type)) + ": ";
  if (ok) return s + "allowed";
  if (!valid_transition) return s + "no such transition (IBTA 10.3.1)";
  std::string why;
  auto add = [&](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (missing) add("missing " + bit_list(missing));
  if (not_allowed) add("not allowed " + bit_list(not_allowed));
  if (cur_state_refused) add("CUR_STATE only from RTR, RTS, SQD or SQE");
  return s + why;
}

std::string_view qp_attr_purpose(uint32_t bit) {
  switch (bit) {
    case kState: return "the state to move to";
    case kCurState: return "the state the caller believes the QP is in (a check, from RTR/RTS/SQD/SQE only)";
    case kEnSqdAsyncNotify: return "raise SQ_DRAINED when the send queue has drained (entering SQD)";
    case kAccessFlags: return "what remote peers may do here: REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC";
    case kPkeyIndex: return "which P_Key (partition) of the port the QP belongs to";
    case kPort: return "the port the QP sends and receives on";
    case kQkey: return "the Q_Key a UD QP accepts (and sends when the WR names none)";
    case kAv: return "the peer's address (GID, hop limit, traffic class): where packets go";
    case kPathMtu: return "the largest payload per packet on the path: how messages are segmented";
    case kTimeout: return "how long the requester waits for an ACK before retransmitting (4.096 us x 2^timeout)";
    case kRetryCnt: return "how many times the requester retransmits after timeouts before RETRY_EXC_ERR";
    case kRnrRetry: return "how many RNR NAKs the requester accepts before RNR_RETRY_EXC_ERR (7: forever)";
    case kRqPsn: return "the first PSN the responder expects: where the receive side starts";
    case kMaxQpRdAtomic: return "READs/atomics this QP may have outstanding as requester";
    case kAltPath: return "an alternate path for automatic path migration";
    case kMinRnrTimer: return "how long a peer must wait after this responder's RNR NAK";
    case kSqPsn: return "the first PSN the requester sends: where the send side starts";
    case kMaxDestRdAtomic: return "READs/atomics this QP accepts in flight as responder (its resources)";
    case kPathMigState: return "the path migration state (MIGRATED, REARM, ARMED)";
    case kCap: return "queue sizes (not modifiable on this device)";
    case kDestQpn: return "the peer QP's number: which QP receives what this one sends";
    case kRateLimit: return "a packet pacing rate";
    default: return "";
  }
}

std::error_code Qp::modify(const QpAttr& a, uint32_t mask) {
  auto& qp = *static_cast<QpImpl*>(this);
  Engine& e = *qp.eng;
  std::lock_guard lk(e.mu);
  // Check everything (a refusal records why: Qp::last_refusal) ...
  const QpState cur = qp.state_;
  if ((mask & kCurState) && a.cur_qp_state != cur) {
    qp.refusal = "modify_qp: CUR_STATE says " + std::string(to_string(a.cur_qp_state)) + ", the QP is in " +
                 std::string(to_string(cur));
    return errc(EINVAL);
  }
  const QpState next = (mask & kState) ? a.qp_state : cur;
  if (static_cast<int>(next) >= kNumQpStates) {
    qp.refusal = "modify_qp: no such state " + std::to_string(static_cast<int>(next));
    return errc(EINVAL);
  }
  const QpModifyVerdict v = check_qp_modify(cur, next, qp.type_, mask);
  if (!v.ok) {
    qp.refusal = v.text(cur, next, qp.type_);
    return errc(EINVAL);
  }
  if (const char* why = check_values(qp, a, mask)) {
    qp.refusal = "modify_qp " + std::string(to_string(cur)) + "->" + std::string(to_string(next)) + " on " +
                 std::string(to_string(qp.type_)) + ": " + why;
    return errc(EINVAL);
  }

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
    qp.req.sent_psn = Psn(s.sq_psn);
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
  // An ACK held for the QP's reply leaves before the QP changes (a program
  // that has its completion may move the QP to RESET or ERR at once).
  if (next != cur) resp_flush_ack(qp);
  if (next != cur || next == QpState::kReset) enter(qp, cur, next);
  e.tx_flush();
  return {};
}

}  // namespace rocelab::emu
