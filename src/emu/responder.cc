// The responder (IBTA 9.7.4 / 9.7.5 responder side, rxe_resp.c): checks each
// request, executes it, and answers with ACK/NAK, READ responses or ATOMIC
// ACKs. One function per state; error states are named after the IBTA class
// they carry out (B: NAK and drop; C: NAK, error CQE, QP to ERR).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "emu/engine.h"
#include "emu/roles.h"

namespace rocelab::emu {
namespace {

using wire::Hdr;
using wire::NakCode;
using wire::OpClass;
namespace op = wire::op;

enum class RespState : uint8_t {
  kGetReq, kChkPsn, kChkOpSeq, kChkOpValid, kChkResource, kChkLength, kChkRkey, kExecute,
  kComplete, kAcknowledge, kDone,
  kDuplicate, kErrPsnOutOfSeq, kErrRnr, kErrInvalidRequest, kErrRemoteAccess, kErrRemoteOp,
  kErrLength, kErrInvalidate, kDrop,
};
// As rxe_resp.c names them (resp_state_name[]); the event log shows them.
constexpr std::string_view kRespStateNames[] = {
    "get_req", "chk_psn", "chk_op_seq", "chk_op_valid", "chk_resource", "chk_length", "chk_rkey", "execute",
    "complete", "acknowledge", "done",
    "duplicate_request", "err_psn_out_of_seq", "err_rnr", "err_invalid_request", "err_remote_access",
    "err_remote_operation", "err_length", "err_invalidate", "drop",
};
static_assert(std::size(kRespStateNames) == static_cast<size_t>(RespState::kDrop) + 1);

// Per-packet scratch data, owned by the driver loop.
struct Scratch {
  const wire::RocePacket& pkt;
  const wire::OpInfo& info;
  const Datagram& d;
  Psn psn;
  uint32_t len = 0;  // payload bytes
  MrImpl* mr = nullptr;
  uint64_t mr_va = 0;  // the request's address in mr's iova space (a window translates it)
  std::byte* target = nullptr;
  std::string_view reason;
  uint64_t Counters::*drop_ctr = &Counters::rcvd_hdr_err;  // null: counted already
};

uint32_t host_to_be(uint32_t v) { return std::endian::native == std::endian::little ? __builtin_bswap32(v) : v; }

bool is_send(const wire::OpInfo& i) { return i.is(OpClass::kSend); }
bool is_write(const wire::OpInfo& i) { return i.is(OpClass::kWrite); }
bool is_read(const wire::OpInfo& i) { return i.is(OpClass::kRead); }
bool is_atomic(const wire::OpInfo& i) { return i.is(OpClass::kAtomic); }
bool is_first(const wire::OpInfo& i) { return i.is(OpClass::kFirst); }
bool is_last(const wire::OpInfo& i) { return i.is(OpClass::kLast); }
// A packet that starts a message (FIRST or ONLY) or is a whole one (READ, atomic).
bool starts_message(const wire::OpInfo& i) { return is_first(i) || is_read(i) || is_atomic(i); }

// ---- sending responses ----

// The opcode of a response on this QP's transport (an XRC target answers
// with XRC opcodes: ACK 0xB1, READ responses 0xAD-0xB0, ATOMIC ACK 0xB2).
uint8_t resp_op(const QpImpl& qp, uint8_t rc_op) {
  return qp.type_ == QpType::kXrcTgt ? wire::for_transport(wire::Transport::kXRC, rc_op).value_or(rc_op) : rc_op;
}

void send_ack(QpImpl& qp, Psn psn, wire::Aeth aeth) {
  wire::RoceHeaders h;
  h.bth.opcode = resp_op(qp, op::kRcAck);
  h.bth.dest_qpn = wire::Qpn(qp.attr.dest_qp_num);
  h.bth.psn = psn;
  h.aeth = aeth;
  qp.eng->emit(qp, qp.ip_to(qp.dst), h, 0, [](std::byte*) {});
}

// READ responses for [va, va+len) starting at PSN psn (IBTA 9.4.4: FIRST and
// MIDDLE carry exactly the path MTU, LAST 1..MTU; AETH on FIRST, LAST, ONLY).
void send_read_responses(QpImpl& qp, Psn psn, const std::byte* src, uint32_t len, uint32_t msn) {
  const uint32_t pmtu = qp.pmtu();
  const uint32_t n = packets_for(len, pmtu);
  const wire::IpUdpInfo ip = qp.ip_to(qp.dst);
  for (uint32_t k = 0; k < n; ++k) {
    wire::RoceHeaders h;
    h.bth.opcode = resp_op(qp, n == 1 ? op::kRcReadRespOnly
                               : k == 0 ? op::kRcReadRespFirst
                               : k + 1 == n ? op::kRcReadRespLast
                                            : op::kRcReadRespMiddle);
    h.bth.dest_qpn = wire::Qpn(qp.attr.dest_qp_num);
    h.bth.psn = psn + k;
    h.aeth = wire::Aeth::ack(msn);
    const uint32_t plen = std::min(pmtu, len - k * pmtu);
    const std::byte* p = src ? src + uint64_t{k} * pmtu : nullptr;
    qp.eng->emit(qp, ip, h, len == 0 ? 0 : plen, [&](std::byte* dst) { std::memcpy(dst, p, plen); });
  }
}

void send_atomic_ack(QpImpl& qp, Psn psn, uint64_t orig, uint32_t msn) {
  wire::RoceHeaders h;
  h.bth.opcode = resp_op(qp, op::kRcAtomicAck);
  h.bth.dest_qpn = wire::Qpn(qp.attr.dest_qp_num);
  h.bth.psn = psn;
  h.aeth = wire::Aeth::ack(msn);
  h.atomic_ack_eth.orig = orig;
  qp.eng->emit(qp, qp.ip_to(qp.dst), h, 0, [](std::byte*) {});
}

// The ACK an earlier request asked for is now implied by a response: drop it.
void cancel_pending_ack(QpImpl& qp) { qp.resp.ack_pending = false; }

// ---- receive WQEs ----

bool take_recv_wqe(QpImpl& qp) {
  if (SrqImpl* srq = qp.type_ == QpType::kXrcTgt ? qp.resp.xrc_srq : qp.srq_) {
    if (!srq_take(*srq, &qp.resp.wqe)) return false;
  } else {
    if (qp.rq.empty()) return false;
    const RecvWqe& w = qp.rq.front();
    qp.resp.wqe.wr_id = w.wr_id;
    qp.resp.wqe.num_sge = w.num_sge;
    std::copy_n(w.sge.begin(), w.num_sge, qp.resp.wqe.sge.begin());
    qp.rq.pop();
  }
  qp.resp.have_wqe = true;
  qp.resp.offset = 0;
  return true;
}

// Writes bytes at offset off of the current receive WQE after checking its
// SGEs (lkey of this PD, local write, in range). 0 ok, 1 too long, 2 bad SGE.
int recv_write(QpImpl& qp, uint64_t off, const std::byte* src, uint32_t n) {
  Engine& e = *qp.eng;
  const RecvWqe& w = qp.resp.wqe;
  for (uint32_t i = 0; i < w.num_sge && n > 0; ++i) {
    const Sge& s = w.sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    MrImpl* mr = e.find_mr(s.lkey);
    std::byte* p = mr && mr->pd == qp.rx_pd() && (mr->access & access::kLocalWrite) ? mr->at(s.addr, s.length) : nullptr;
    if (!p) return 2;
    const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(s.length - off, n));
    std::memcpy(p + off, src, k);
    src += k;
    n -= k;
    off = 0;
  }
  return n > 0 ? 1 : 0;
}

uint64_t recv_capacity(const RecvWqe& w) {
  uint64_t c = 0;
  for (uint32_t i = 0; i < w.num_sge; ++i) c += w.sge[i].length;
  return c;
}

void complete_recv(QpImpl& qp, const Scratch& s, WcStatus status, WcOpcode opcode, uint32_t byte_len) {
  Wc wc;
  wc.wr_id = qp.resp.wqe.wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = byte_len;
  wc.qp_num = qp.qpn;
  wc.src_qp = qp.type_ == QpType::kUD ? s.pkt.hdr.deth.src_qpn.value() : qp.attr.dest_qp_num;
  if (s.info.carries(Hdr::kImmDt)) {
    wc.wc_flags |= wc_flags::kWithImm;
    wc.imm_data = host_to_be(s.pkt.hdr.immdt.imm);
  }
  if (s.info.carries(Hdr::kIeth)) {
    wc.wc_flags |= wc_flags::kWithInv;
    wc.imm_data = s.pkt.hdr.ieth.rkey;
  }
  if (qp.type_ == QpType::kUD) wc.wc_flags |= wc_flags::kGrh;
  qp.resp.have_wqe = false;
  if (status == WcStatus::kSuccess && opcode == WcOpcode::kRecv) {
    qp.ctr.rdma_recvs++;
    qp.eng->counters.rdma_recvs++;
  }
  post_recv_cqe(qp, wc, s.pkt.hdr.bth.se);
}

// ---- states (RC and UC) ----

RespState chk_psn(QpImpl& qp, Scratch& s) {
  const int32_t d = s.psn.distance(qp.resp.epsn);
  if (qp.type_ == QpType::kUC) {
    // IBTA 9.8.3: UC has no retries; on a gap drop until the next FIRST/ONLY.
    if (d != 0 || qp.resp.uc_drop) {
      // Counted also for the FIRST/ONLY that ends the gap: after a lost LAST it
      // is the only sign of the loss the responder gets.
      if (d > 0) {
        qp.ctr.out_of_seq_request++;
        qp.eng->counters.out_of_seq_request++;
      } else if (d < 0) {
        qp.ctr.duplicate_request++;
        qp.eng->counters.duplicate_request++;
      }
      if (!is_first(s.info)) {
        qp.resp.uc_drop = true;
        qp.resp.seq = Responder::Seq::kNone;
        s.reason = "UC: out of sequence";
        s.drop_ctr = nullptr;
        return RespState::kDrop;
      }
      qp.resp.uc_drop = false;
      qp.resp.seq = Responder::Seq::kNone;  // an unfinished message is abandoned
      qp.resp.offset = 0;
      qp.resp.epsn = s.psn;
    }
    return RespState::kChkOpSeq;
  }
  if (d > 0) {
    qp.ctr.out_of_seq_request++;
    qp.eng->counters.out_of_seq_request++;
    if (qp.resp.nak_sent) {
      s.reason = "out of sequence (NAK already sent)";
      s.drop_ctr = nullptr;
      return RespState::kDrop;
    }
    return RespState::kErrPsnOutOfSeq;
  }
  if (d < 0) {
    qp.ctr.duplicate_request++;
    qp.eng->counters.duplicate_request++;
    return RespState::kDuplicate;
  }
  qp.resp.nak_sent = false;
  return RespState::kChkOpSeq;
}

RespState error_for(QpImpl& qp, Scratch& s, RespState rc_error, std::string_view why) {
  s.reason = why;
  if (qp.reliable()) return rc_error;
  qp.resp.uc_drop = true;
  qp.resp.seq = Responder::Seq::kNone;
  return RespState::kDrop;
}

RespState chk_op_seq(QpImpl& qp, Scratch& s) {
  using Seq = Responder::Seq;
  bool ok = false;
  switch (qp.resp.seq) {
    case Seq::kSend: ok = is_send(s.info) && !is_first(s.info); break;
    case Seq::kWrite: ok = is_write(s.info) && !is_first(s.info); break;
    case Seq::kNone: ok = starts_message(s.info); break;
  }
  // A missing FIRST or LAST is an invalid request (IBTA 9.8.3.1; rxe's
  // check_op_seq answers RC the same: NAK invalid request).
  if (!ok) return error_for(qp, s, RespState::kErrInvalidRequest, "opcode sequence");
  return RespState::kChkOpValid;
}

RespState chk_op_valid(QpImpl& qp, Scratch& s) {
  if (qp.type_ == QpType::kXrcTgt) {
    // XRC: the XRCETH names an XRC SRQ of this target's domain; the message's
    // WQE, PD and CQ are that SRQ's; a message keeps the SRQ it started with.
    std::string_view why;
    SrqImpl* srq = xrc_srq_for(qp, s.pkt.hdr.xrceth.srqn, &why);
    if (!srq) return error_for(qp, s, RespState::kErrInvalidRequest, why);
    if (!starts_message(s.info) && qp.resp.xrc_srq != srq)
      return error_for(qp, s, RespState::kErrInvalidRequest, "XRCETH changes SRQ within a message");
    qp.resp.xrc_srq = srq;
  }
  const unsigned a = qp.attr.qp_access_flags;
  // IBTA 10.2.4.4: the QP's remote access flags gate each operation class.
  if ((is_write(s.info) && !(a & access::kRemoteWrite)) || (is_read(s.info) && !(a & access::kRemoteRead)) ||
      (is_atomic(s.info) && !(a & access::kRemoteAtomic)))
    return error_for(qp, s, RespState::kErrInvalidRequest, "operation not enabled on the QP");
  return RespState::kChkResource;
}

RespState chk_resource(QpImpl& qp, Scratch& s) {
  const bool needs_wqe = (is_send(s.info) && is_first(s.info)) ||
                         (is_write(s.info) && is_last(s.info) && s.info.carries(Hdr::kImmDt));
  if (needs_wqe && !qp.resp.have_wqe && !take_recv_wqe(qp)) {
    s.reason = "no receive WQE";
    if (qp.reliable()) return RespState::kErrRnr;
    qp.resp.uc_drop = true;
    qp.resp.seq = Responder::Seq::kNone;
    return RespState::kDrop;
  }
  return RespState::kChkLength;
}

RespState chk_length(QpImpl& qp, Scratch& s) {
  const uint32_t pmtu = qp.pmtu();
  if (is_send(s.info) || is_write(s.info)) {
    // IBTA 9.7.4.1.x: FIRST and MIDDLE carry exactly the MTU, LAST 1..MTU, ONLY 0..MTU.
    const bool first = is_first(s.info), last = is_last(s.info);
    bool ok = s.len <= pmtu;
    if (!last && s.len != pmtu) ok = false;
    if (last && !first && s.len == 0) ok = false;
    if (is_write(s.info)) {
      if (first) {
        const uint32_t dma = s.pkt.hdr.reth.dma_len;
        if (last ? s.len != dma : dma <= s.len) ok = false;
      } else if (s.len > qp.resp.resid || (last && s.len != qp.resp.resid)) {
        ok = false;
      }
    }
    if (!ok) return error_for(qp, s, RespState::kErrInvalidRequest, "length");
  } else if (is_read(s.info) && s.pkt.hdr.reth.dma_len > qp.eng->dattr.max_msg_sz) {
    return error_for(qp, s, RespState::kErrInvalidRequest, "READ length");
  }
  return RespState::kChkRkey;
}

// IBTA 10.6.3.2 / C9-88: the R_Key names an MR or a bound memory window of the
// QP's PD, with the access, covering [va, va+len) (resolve_rkey, mw.cc). A
// zero-length request checks nothing.
RespState check_rkey(QpImpl& qp, Scratch& s, uint32_t rkey, uint64_t va, uint32_t len, unsigned need) {
  if (len == 0) return RespState::kExecute;
  MrImpl* mr = nullptr;
  uint64_t mr_va = 0;
  if (!resolve_rkey(qp, rkey, va, len, need, &mr, &mr_va))
    return error_for(qp, s, RespState::kErrRemoteAccess, "R_Key");
  s.mr = mr;
  s.mr_va = mr_va;
  s.target = mr->at(mr_va, len);
  return RespState::kExecute;
}

RespState chk_rkey(QpImpl& qp, Scratch& s) {
  const auto& h = s.pkt.hdr;
  if (is_write(s.info) && is_first(s.info))
    return check_rkey(qp, s, h.reth.rkey, h.reth.va, h.reth.dma_len, access::kRemoteWrite);
  if (is_read(s.info)) return check_rkey(qp, s, h.reth.rkey, h.reth.va, h.reth.dma_len, access::kRemoteRead);
  if (is_atomic(s.info)) {
    // IBTA 9.4.5: atomics need an 8-byte aligned address.
    if (h.atomic_eth.va % 8 != 0) return error_for(qp, s, RespState::kErrInvalidRequest, "misaligned atomic");
    RespState r = check_rkey(qp, s, h.atomic_eth.rkey, h.atomic_eth.va, 8, access::kRemoteAtomic);
    if (r == RespState::kExecute && reinterpret_cast<uintptr_t>(s.target) % 8 != 0)
      return error_for(qp, s, RespState::kErrInvalidRequest, "misaligned atomic");
    return r;
  }
  return RespState::kExecute;
}

RdAtomicRes& next_res(QpImpl& qp) {
  RdAtomicRes& r = qp.resp.res[qp.resp.res_next];
  qp.resp.res_next = (qp.resp.res_next + 1) % qp.resp.res.size();
  return r;
}

RespState execute(QpImpl& qp, Scratch& s) {
  using Seq = Responder::Seq;
  const auto& h = s.pkt.hdr;
  if (is_send(s.info)) {
    if (is_first(s.info)) qp.resp.offset = 0;
    const int r = recv_write(qp, qp.resp.offset, s.pkt.payload.data(), s.len);
    if (r == 1) return error_for(qp, s, RespState::kErrLength, "receive buffer too small");
    if (r == 2) return error_for(qp, s, RespState::kErrRemoteOp, "bad receive SGE");
    qp.resp.offset += s.len;
  } else if (is_write(s.info)) {
    if (is_first(s.info)) {
      qp.resp.mr = s.mr;
      qp.resp.va = s.mr_va;
      qp.resp.resid = h.reth.dma_len;
      qp.resp.write_len = 0;
      s.target = s.mr ? s.target : nullptr;
    } else {
      s.target = qp.resp.mr ? qp.resp.mr->at(qp.resp.va, s.len) : nullptr;
      if (!s.target && s.len > 0) return error_for(qp, s, RespState::kErrRemoteAccess, "MR gone");
    }
    if (s.len > 0) std::memcpy(s.target, s.pkt.payload.data(), s.len);
    qp.resp.va += s.len;
    qp.resp.resid -= s.len;
    qp.resp.write_len += s.len;
  } else if (is_read(s.info)) {
    qp.resp.msn = (qp.resp.msn + 1) & wire::kMask24;  // rxe: MSN counts a READ at arrival
    const uint32_t n = packets_for(h.reth.dma_len, qp.pmtu());
    RdAtomicRes& r = next_res(qp);
    r = {true, false, s.psn, s.psn + (n - 1), 0, qp.resp.msn};
    cancel_pending_ack(qp);
    send_read_responses(qp, s.psn, s.target, h.reth.dma_len, qp.resp.msn);
    qp.resp.epsn = s.psn + n;
    return RespState::kDone;
  } else if (is_atomic(s.info)) {
    std::atomic_ref<uint64_t> target(*reinterpret_cast<uint64_t*>(s.target));
    uint64_t orig;
    if (wire::rc_relative(h.bth.opcode) == op::kRcCmpSwap) {
      orig = h.atomic_eth.compare;
      target.compare_exchange_strong(orig, h.atomic_eth.swap_add);
    } else {
      orig = target.fetch_add(h.atomic_eth.swap_add);
    }
    qp.resp.msn = (qp.resp.msn + 1) & wire::kMask24;
    RdAtomicRes& r = next_res(qp);
    r = {true, true, s.psn, s.psn, orig, qp.resp.msn};
    cancel_pending_ack(qp);
    send_atomic_ack(qp, s.psn, orig, qp.resp.msn);
    qp.resp.epsn = s.psn + 1;
    return RespState::kDone;
  }
  qp.resp.epsn = s.psn + 1;
  if (is_last(s.info)) {
    qp.resp.seq = Seq::kNone;
    qp.resp.msn = (qp.resp.msn + 1) & wire::kMask24;
  } else {
    qp.resp.seq = is_send(s.info) ? Seq::kSend : Seq::kWrite;
  }
  return RespState::kComplete;
}

RespState complete(QpImpl& qp, Scratch& s) {
  if (!is_last(s.info)) return RespState::kAcknowledge;
  // SEND with Invalidate (IBTA 9.4.1.1.1 / rxe): the R_Key in the IETH names a
  // bound type 2 window of this PD, which becomes free before the receive completes.
  if (s.info.carries(Hdr::kIeth) && !invalidate_rkey(qp, s.pkt.hdr.ieth.rkey)) {
    s.reason = "SEND_WITH_INV: R_Key names no window to invalidate";
    return RespState::kErrInvalidate;
  }
  if (is_send(s.info)) {
    complete_recv(qp, s, WcStatus::kSuccess, WcOpcode::kRecv, qp.resp.offset);
  } else if (s.info.carries(Hdr::kImmDt)) {
    complete_recv(qp, s, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm, qp.resp.write_len);
  }
  return RespState::kAcknowledge;
}

RespState acknowledge(QpImpl& qp, Scratch& s) {
  if (!qp.reliable() || !s.pkt.hdr.bth.ack_req) return RespState::kDone;
  // One ACK per QP per receive batch: a later one covers the earlier (rxe ack_deferred).
  if (qp.resp.ack_pending) {
    qp.ctr.ack_deferred++;
    qp.eng->counters.ack_deferred++;
  } else {
    Engine& e = *qp.eng;
    qp.resp.ack_pending = true;
    qp.resp.ack_due = Nanos(0);
    if (e.cfg.ack_hold.count() > 0) {
      const Nanos now = e.transport->now();
      if (qp.last_post != Nanos::min() && now - qp.last_post < DeviceConfig::kRecentPost)
        qp.resp.ack_due = now + e.cfg.ack_hold;
    }
    if (!qp.resp.ack_listed) {
      qp.resp.ack_listed = true;
      e.ack_list.push_back(&qp);
    }
  }
  qp.resp.ack_psn = s.psn;
  return RespState::kDone;
}

// IBTA 9.9.3.1.1: a duplicate SEND/WRITE is acknowledged again, never re-executed;
// a duplicate READ is served again; a duplicate atomic is answered from the saved result.
RespState duplicate(QpImpl& qp, Scratch& s) {
  if (is_send(s.info) || is_write(s.info)) {
    send_ack(qp, qp.resp.epsn - 1, wire::Aeth::ack(qp.resp.msn));
    return RespState::kDone;
  }
  for (const RdAtomicRes& r : qp.resp.res) {
    if (!r.valid || s.psn.before(r.first_psn) || s.psn.after(r.last_psn)) continue;
    if (is_atomic(s.info)) {
      if (r.atomic && r.first_psn == s.psn) send_atomic_ack(qp, s.psn, r.orig, r.msn);
      return RespState::kDone;
    }
    if (r.atomic) break;
    const auto& reth = s.pkt.hdr.reth;
    // A READ resent from a PSN inside the original (a resumed READ) may ask
    // for less than the original, never for more: its responses must end at
    // the original's last PSN (as rxe replays the saved resource).
    const uint64_t room = (uint64_t(r.last_psn.distance(s.psn)) + 1) * qp.pmtu();
    if (reth.dma_len > room) {
      s.reason = "duplicate READ longer than the original";
      s.drop_ctr = nullptr;
      return RespState::kDrop;
    }
    MrImpl* mr = nullptr;
    uint64_t mr_va = 0;
    if (!resolve_rkey(qp, reth.rkey, reth.va, reth.dma_len, access::kRemoteRead, &mr, &mr_va)) break;
    const std::byte* p = mr ? mr->at(mr_va, reth.dma_len) : nullptr;
    send_read_responses(qp, s.psn, p, reth.dma_len, r.msn);
    return RespState::kDone;
  }
  s.reason = "duplicate without a saved response";
  s.drop_ctr = nullptr;
  return RespState::kDrop;
}

RespState err_psn_out_of_seq(QpImpl& qp, Scratch&) {
  // Class B: one NAK with the expected PSN, then drop until it arrives.
  send_ack(qp, qp.resp.epsn, wire::Aeth::nak(qp.resp.msn, NakCode::kPsnSeqError));
  qp.resp.nak_sent = true;
  return RespState::kDone;
}

RespState err_rnr(QpImpl& qp, Scratch& s) {
  qp.ctr.send_rnr_err++;
  qp.eng->counters.send_rnr_err++;
  send_ack(qp, s.psn, wire::Aeth::rnr_nak(qp.resp.msn, qp.attr.min_rnr_timer));
  return RespState::kDone;
}

// Class C (RC): NAK, the receive WQE in progress completes in error, QP to ERR.
RespState class_c(QpImpl& qp, Scratch& s, NakCode code, WcStatus recv_status, EventType ev) {
  send_ack(qp, s.psn, wire::Aeth::nak(qp.resp.msn, code));
  if (qp.resp.have_wqe) complete_recv(qp, s, recv_status, WcOpcode::kRecv, qp.resp.offset);
  qp_to_error(qp, true, ev);
  return RespState::kDone;
}

RespState err_length(QpImpl& qp, Scratch& s) {
  if (!qp.reliable()) {
    // UC: the receive WQE completes with a length error; the message is dropped.
    if (qp.resp.have_wqe) complete_recv(qp, s, WcStatus::kLocLenErr, WcOpcode::kRecv, qp.resp.offset);
    return RespState::kDrop;
  }
  return class_c(qp, s, NakCode::kInvalidRequest, WcStatus::kLocLenErr, EventType::kQpReqErr);
}

void resp_ud(QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d) {
  Engine& e = *qp.eng;
  const auto& h = pkt.hdr;
  // IBTA 10.2.4.1 C10-15: the Q_Key must match the QP's.
  if (h.deth.qkey != qp.attr.qkey) return e.drop(&qp, d, "Q_Key", &Counters::qkey_viol);
  const uint32_t len = static_cast<uint32_t>(pkt.payload.size());
  if (len > qp.pmtu()) return e.drop(&qp, d, "UD payload above the MTU", &Counters::rcvd_hdr_err);
  if (!take_recv_wqe(qp)) return e.drop(&qp, d, "no receive WQE", &Counters::rcvd_hdr_err);
  Scratch s{pkt, pkt.hdr.info(), d, h.bth.psn};
  // IBTA 11.4.1.1 / rxe: the first 40 bytes receive the GRH; for IPv4 the IP
  // header sits in bytes 20..39 and bytes 0..19 are zero.
  std::array<std::byte, 40 + wire::kUdpHeaderLen> ip{};
  if (d.ip.dst.v6) {
    wire::write_ip_udp(ip.data(), d.ip, d.payload.size());
  } else {
    wire::write_ip_udp(ip.data() + 20, d.ip, d.payload.size());
  }
  if (recv_capacity(qp.resp.wqe) < uint64_t{len} + 40)
    return complete_recv(qp, s, WcStatus::kLocLenErr, WcOpcode::kRecv, 0);
  if (recv_write(qp, 0, ip.data(), 40) != 0 || recv_write(qp, 40, pkt.payload.data(), len) != 0)
    return complete_recv(qp, s, WcStatus::kLocProtErr, WcOpcode::kRecv, 0);
  complete_recv(qp, s, WcStatus::kSuccess, WcOpcode::kRecv, len + 40);
}

}  // namespace

void resp_flush_ack(QpImpl& qp) {
  if (!qp.resp.ack_pending) return;
  qp.resp.ack_pending = false;
  if (qp.state_ == QpState::kErr || qp.state_ == QpState::kReset) return;
  send_ack(qp, qp.resp.ack_psn, wire::Aeth::ack(qp.resp.msn));
}

std::string_view resp_state_name(uint8_t s) {
  return s < std::size(kRespStateNames) ? kRespStateNames[s] : "?";
}

void resp_on_request(QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d) {
  if (qp.type_ == QpType::kUD) return resp_ud(qp, pkt, d);
  Scratch s{pkt, pkt.hdr.info(), d, pkt.hdr.bth.psn};
  s.len = static_cast<uint32_t>(pkt.payload.size());
  RespState st = RespState::kGetReq;
  RoleSteps steps;
  steps.role = Role::kResponder;
  // The states this request went through, logged when the run ends.
  auto log_steps = [&] {
    if (!qp.eng->logging()) return;
    EngineEvent e;
    e.kind = EventKind::kRoleSteps;
    e.qpn = qp.qpn;
    e.psn = s.psn.value();
    e.steps = steps;
    qp.eng->log(e);
  };
  for (;;) {
    steps.add(static_cast<uint8_t>(st));
    switch (st) {
      case RespState::kGetReq: st = RespState::kChkPsn; break;
      case RespState::kChkPsn: st = chk_psn(qp, s); break;
      case RespState::kChkOpSeq: st = chk_op_seq(qp, s); break;
      case RespState::kChkOpValid: st = chk_op_valid(qp, s); break;
      case RespState::kChkResource: st = chk_resource(qp, s); break;
      case RespState::kChkLength: st = chk_length(qp, s); break;
      case RespState::kChkRkey: st = chk_rkey(qp, s); break;
      case RespState::kExecute: st = execute(qp, s); break;
      case RespState::kComplete: st = complete(qp, s); break;
      case RespState::kAcknowledge: st = acknowledge(qp, s); break;
      case RespState::kDuplicate: st = duplicate(qp, s); break;
      case RespState::kErrPsnOutOfSeq: st = err_psn_out_of_seq(qp, s); break;
      case RespState::kErrRnr: st = err_rnr(qp, s); break;
      case RespState::kErrInvalidRequest:
        st = class_c(qp, s, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, EventType::kQpReqErr);
        break;
      case RespState::kErrRemoteAccess:
        st = class_c(qp, s, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, EventType::kQpAccessErr);
        break;
      case RespState::kErrRemoteOp:
        st = class_c(qp, s, NakCode::kRemoteOpError, WcStatus::kLocProtErr, EventType::kQpFatal);
        break;
      case RespState::kErrLength: st = err_length(qp, s); break;
      case RespState::kErrInvalidate:
        // rxe: the receive completes with REM_INV_REQ_ERR and the QP goes to ERR.
        st = class_c(qp, s, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, EventType::kQpReqErr);
        break;
      case RespState::kDrop:
        log_steps();
        qp.eng->drop(&qp, d, s.reason, s.drop_ctr);
        return;
      case RespState::kDone:
        log_steps();
        return;
    }
  }
}

}  // namespace rocelab::emu
