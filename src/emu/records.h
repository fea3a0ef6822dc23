// What a device reports about itself: counters (named like Soft-RoCE's
// hw_counters), every packet it sends and receives (PacketTap, e.g. a pcap
// writer) and every engine event (EventSink, e.g. the Protobuf event log).
// Taps and sinks are called with the device lock held: keep them short and
// never call back into the device.
#pragma once
#include <cstddef>
#include <array>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

#include "emu/transport/transport.h"
#include "emu/verbs_types.h"

namespace rocelab::emu {

// Per device and per QP. Names and meanings follow rxe's hw_counters.
// Why the receive path dropped a packet: the reasons Device::Engine::drop is
// given (emu/recv.cc, gsi.cc, responder.cc), each with the counter that counts
// it (drop_*, beside rxe's coarser rcvd_hdr_err / rcvd_icrc_err / qkey_viol).
struct DropCause {
  std::string_view reason;  // as in the event log's PACKET_DROPPED and the warnings
  std::string_view counter;
};
inline constexpr DropCause kDropCauses[] = {
    {"malformed", "drop_malformed"},
    {"bad ICRC", "drop_bad_icrc"},
    {"not our address", "drop_not_our_address"},
    {"P_Key", "drop_pkey"},
    {"unknown QP", "drop_unknown_qp"},
    {"QP state", "drop_qp_state"},
    {"opcode of another transport", "drop_other_transport"},
    {"source address", "drop_source_address"},
    {"response for a PSN never sent", "drop_unsent_psn_response"},
    {"Q_Key", "drop_qkey"},
    {"UD payload above the MTU", "drop_ud_too_long"},
    {"no receive WQE", "drop_no_recv_wqe"},
    {"not a MAD", "drop_not_a_mad"},
    {"XRC request to an initiator QP", "drop_xrc_to_initiator"},
    {"multicast group not joined", "drop_mcast_not_joined"},
    {"multicast to a unicast QPN", "drop_mcast_qpn"},
};
inline constexpr size_t kDropCauseCount = std::size(kDropCauses);

struct Counters {
  uint64_t sent_pkts = 0;           // packets handed to the transport
  uint64_t rcvd_pkts = 0;           // packets that passed the header checks
  uint64_t duplicate_request = 0;   // responder: request with PSN < ePSN
  uint64_t out_of_seq_request = 0;  // responder: request with PSN > ePSN (NAK sent or dropped)
  uint64_t rcvd_seq_err = 0;        // requester: PSN sequence error NAK received
  uint64_t retry_exceeded_err = 0;  // requester: retry_cnt exhausted
  uint64_t rnr_nak_retry_err = 0;   // requester: rnr_retry exhausted
  uint64_t send_rnr_err = 0;        // responder: RNR NAK sent
  uint64_t rcvd_rnr_err = 0;        // requester: RNR NAK received
  uint64_t completer_retry_err = 0; // requester: retransmission started (timeout or NAK)
  uint64_t ack_deferred = 0;        // responder: ACK coalesced into a later one
  uint64_t rcvd_icrc_err = 0;       // dropped: bad ICRC
  uint64_t icrc_ip_recovered = 0;   // accepted: IPv4 ID/DF recovered from the ICRC (not ID 0 + DF)
  uint64_t rcvd_hdr_err = 0;        // dropped: bad headers, unknown QP, wrong state, bad Q_Key ...
  uint64_t rdma_sends = 0;          // SEND messages completed as requester
  uint64_t rdma_recvs = 0;          // SEND messages received
  uint64_t qkey_viol = 0;           // UD: Q_Key mismatch
  uint64_t np_ecn_marked_roce_packets = 0;  // arrived with ECN CE (mlx5's name)
  uint64_t np_cnp_sent = 0;         // notification point: CNPs sent for CE marks (mlx5's name)
  uint64_t rp_cnp_handled = 0;      // reaction point: CNPs the rate control acted on (mlx5's name)
  uint64_t rp_cnp_ignored = 0;      // CNPs received with no congestion control on (mlx5's name)
  std::array<uint64_t, kDropCauseCount> drops{};  // by cause, kDropCauses order
  // The drop_* counter of a reason of kDropCauses (0 for another string).
  uint64_t dropped(std::string_view reason) const;

  Counters& operator+=(const Counters& o);
  // Calls f(name, value) for every counter, in declaration order.
  template <typename F>
  void for_each(F&& f) const {
    f("sent_pkts", sent_pkts); f("rcvd_pkts", rcvd_pkts);
    f("duplicate_request", duplicate_request); f("out_of_seq_request", out_of_seq_request);
    f("rcvd_seq_err", rcvd_seq_err); f("retry_exceeded_err", retry_exceeded_err);
    f("rnr_nak_retry_err", rnr_nak_retry_err); f("send_rnr_err", send_rnr_err);
    f("rcvd_rnr_err", rcvd_rnr_err); f("completer_retry_err", completer_retry_err);
    f("ack_deferred", ack_deferred); f("rcvd_icrc_err", rcvd_icrc_err);
    f("icrc_ip_recovered", icrc_ip_recovered);
    f("rcvd_hdr_err", rcvd_hdr_err); f("rdma_sends", rdma_sends); f("rdma_recvs", rdma_recvs);
    f("qkey_viol", qkey_viol); f("np_ecn_marked_roce_packets", np_ecn_marked_roce_packets);
    f("np_cnp_sent", np_cnp_sent); f("rp_cnp_handled", rp_cnp_handled); f("rp_cnp_ignored", rp_cnp_ignored);
    for (size_t i = 0; i < kDropCauseCount; ++i) f(kDropCauses[i].counter, drops[i]);
  }
};

enum class Direction : uint8_t { kTx, kRx };

// Sees every datagram the device sends (after building) and receives (before
// any check, bad ICRC included). The datagram is valid only during the call.
class PacketTap {
 public:
  virtual ~PacketTap() = default;
  virtual void on_packet(Direction dir, Nanos time, const Datagram& d) = 0;
  // The engine finished a batch (a progress round, a send): what was recorded
  // should reach its file now, so that a process killed after it loses nothing.
  virtual void on_batch_end() {}
};

enum class EventKind : uint8_t {
  kWrPosted, kRecvPosted, kPacketSent, kPacketReceived, kPacketDropped, kTimer,
  kCompletion, kQpStateChange, kAsyncEvent, kRoleSteps,
};
std::string_view to_string(EventKind k);

// The state machines of a QP's roles (IBTA 9.7; rxe_comp.c, rxe_resp.c). Each
// run of one (a received response, a received request) is one kRoleSteps
// event listing the states it went through, by name.
enum class Role : uint8_t { kCompleter, kResponder };
std::string_view to_string(Role r);
// The name of state s of role r ("check_psn", "chk_rkey", ...), as rxe names it.
std::string_view role_state_name(Role r, uint8_t s);

// The states one run went through, in order (at most kMax; `truncated` past that).
struct RoleSteps {
  static constexpr size_t kMax = 24;
  Role role = Role::kResponder;
  uint8_t n = 0;
  bool truncated = false;
  uint8_t state[kMax] = {};
  void add(uint8_t s) {
    if (n < kMax) state[n++] = s;
    else truncated = true;
  }
};

// One engine event. Only the fields that belong to `kind` are meaningful.
struct EngineEvent {
  Nanos time{0};  // transport clock
  EventKind kind = EventKind::kWrPosted;
  uint32_t qpn = 0;
  uint64_t wr_id = 0;            // kWrPosted, kRecvPosted, kCompletion
  WrOpcode wr_opcode = WrOpcode::kSend;  // kWrPosted
  uint32_t length = 0;           // bytes: WR length, packet length, byte_len
  uint8_t bth_opcode = 0;        // packets
  uint32_t psn = 0;              // packets
  uint32_t dest_qpn = 0;         // packets
  WcStatus status = WcStatus::kSuccess;  // kCompletion
  WcOpcode wc_opcode = WcOpcode::kSend;  // kCompletion
  QpState from = QpState::kReset, to = QpState::kReset;  // kQpStateChange
  EventType async = EventType::kPortActive;               // kAsyncEvent
  std::string_view reason;       // kPacketDropped, kTimer: why (static string)
  RoleSteps steps;               // kRoleSteps
  // Packets to or from QP 1 (a MAD): its management class, its attribute's
  // name for the CM ("ConnectRequest", wire/cm_mad.h; "" for other classes)
  // and its transaction ID, so a log names the CM exchange as decode does.
  uint8_t mad_class = 0;
  std::string_view mad_attr;
  uint64_t mad_tid = 0;
};

// Fills e's MAD fields from the 256 bytes of a MAD (left empty if they are not one).
void describe_mad(std::span<const std::byte> mad, EngineEvent& e);

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_event(const EngineEvent& e) = 0;
  virtual void on_batch_end() {}  // as PacketTap::on_batch_end
};

}  // namespace rocelab::emu
