// Internal: the entry points of the engine's roles, each in its own file.
#pragma once
#include "emu/qp_impl.h"
#include "wire/packet.h"

namespace rocelab::emu {

// requester.cc: turns WQEs into request packets while window and limits allow.
void req_run(QpImpl& qp);
// Go-back-N: the next packet sent is the one with PSN psn.
void req_rewind(QpImpl& qp, Psn psn);

// completer.cc: processes an ACK, NAK, READ response or ATOMIC ACK.
void comp_on_response(QpImpl& qp, const wire::RocePacket& pkt);
// requester.cc: the device's in-flight budget. req_budget_sync recounts qp's
// share (after its acknowledged PSN moved, or its state changed: ERR and
// RESET hold none); req_kick_starved lets waiting QPs send while budget lasts
// (progress_locked, after the received packets).
void req_budget_sync(QpImpl& qp);
void req_kick_starved(Engine& e);
// (Re)arms or cancels the retransmit timer after the requester or completer moved.
void comp_update_timer(QpImpl& qp);
void comp_on_retrans_timer(QpImpl& qp);
void comp_on_rnr_timer(QpImpl& qp);

// congestion.cc: DCQCN at the QP (docs/congestion.md, "DCQCN in the engine").
// cc_init gives a QP a fresh rate control (at line rate) and its timer when
// the device runs congestion control: at creation and on entering RESET.
// cc_may_send: the requester may send a packet now; false holds it (the QP's
// timer sends it when the pacer allows). cc_sent: the requester emitted a
// packet (the last of the tx batch). cc_on_ce: qp received a CE-marked packet (answered
// with a CNP as the notification point allows). cc_on_cnp: a CNP arrived.
void cc_init(QpImpl& qp);
bool cc_may_send(QpImpl& qp);
void cc_sent(QpImpl& qp);
void cc_on_ce(QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d);
void cc_on_cnp(Engine& e, const wire::RocePacket& pkt, const Datagram& d);

// The names of the completer's and the responder's states (records.h
// role_state_name); "?" for a value that is no state.
std::string_view comp_state_name(uint8_t s);
std::string_view resp_state_name(uint8_t s);

// responder.cc: checks and executes a request; ACK/NAK.
void resp_on_request(QpImpl& qp, const wire::RocePacket& pkt, const Datagram& d);
// Sends the ACK deferred during the last receive batch.
void resp_flush_ack(QpImpl& qp);

// completion.cc
// Completes the WQE at the send queue head with status (CQE when signaled or in error).
void complete_send(QpImpl& qp, WcStatus status);
// Moves the QP to ERR (flushing every outstanding WR) and raises an async event.
void qp_to_error(QpImpl& qp, bool raise_event, EventType ev);
void post_recv_cqe(QpImpl& qp, const Wc& wc, bool solicited);
void post_send_cqe(QpImpl& qp, const Wc& wc);
// qp_state.cc: sets the state, logging the change.
void set_state(QpImpl& qp, QpState s);
// The WQE at the send queue head failed locally (its local_error): it completes
// in error, and the QP goes to ERR (RC) or SQE (UC, UD).
void fail_send_wqe(QpImpl& qp);

// sge.cc: copies n bytes at offset off of a scatter list to/from dst.
void gather(const Seg* segs, uint32_t nseg, uint64_t off, std::byte* dst, uint32_t n);
void scatter(const Seg* segs, uint32_t nseg, uint64_t off, const std::byte* src, uint32_t n);

}  // namespace rocelab::emu

namespace rocelab::emu {
// xrc.cc: the XRC SRQ an XRC target steers a request to (its XRCETH's
// srqn): one of the target's domain; nullptr and *why otherwise.
SrqImpl* xrc_srq_for(QpImpl& qp, uint32_t srqn, std::string_view* why);
// srq.cc: takes the next WQE of an SRQ into out (whose sge vector is large enough).
bool srq_take(SrqImpl& srq, RecvWqe* out);
// completion.cc: a CQ overflowed: CQ_ERR, and its QPs go to ERR.
void cq_overflow(CqImpl& cq);
}  // namespace rocelab::emu
