// Names for the verbs enums, as libibverbs and the IBTA spell them.
#include <array>

#include "emu/records.h"
#include "emu/roles.h"
#include "emu/verbs_types.h"
#include "emu/wr_opcode_table.h"

namespace rocelab::emu {

std::string_view to_string(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kErr: return "ERR";
  }
  return "?";
}

std::string_view to_string(QpType t) {
  switch (t) {
    case QpType::kRC: return "RC";
    case QpType::kUC: return "UC";
    case QpType::kUD: return "UD";
    case QpType::kXrcIni: return "XRC_INI";
    case QpType::kXrcTgt: return "XRC_TGT";
  }
  return "?";
}

std::string_view qp_attr::bit_name(uint32_t bit) {
  static constexpr std::array<std::string_view, kNumBits> kNames = {
      "STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT", "QKEY",
      "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC",
      "ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP",
      "DEST_QPN", "", "", "", "", "RATE_LIMIT"};
  for (uint32_t i = 0; i < kNames.size(); ++i) {
    if (bit == (1u << i)) return kNames[i];
  }
  return "";
}

std::string_view to_string(WrOpcode o) {
  const WrOpInfo& i = wr_op_info(o);
  return i.valid ? i.name : "?";
}

std::string_view to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess: return "SUCCESS";
    case WcStatus::kLocLenErr: return "LOC_LEN_ERR";
    case WcStatus::kLocQpOpErr: return "LOC_QP_OP_ERR";
    case WcStatus::kLocEecOpErr: return "LOC_EEC_OP_ERR";
    case WcStatus::kLocProtErr: return "LOC_PROT_ERR";
    case WcStatus::kWrFlushErr: return "WR_FLUSH_ERR";
    case WcStatus::kMwBindErr: return "MW_BIND_ERR";
    case WcStatus::kBadRespErr: return "BAD_RESP_ERR";
    case WcStatus::kLocAccessErr: return "LOC_ACCESS_ERR";
    case WcStatus::kRemInvReqErr: return "REM_INV_REQ_ERR";
    case WcStatus::kRemAccessErr: return "REM_ACCESS_ERR";
    case WcStatus::kRemOpErr: return "REM_OP_ERR";
    case WcStatus::kRetryExcErr: return "RETRY_EXC_ERR";
    case WcStatus::kRnrRetryExcErr: return "RNR_RETRY_EXC_ERR";
    case WcStatus::kLocRddViolErr: return "LOC_RDD_VIOL_ERR";
    case WcStatus::kRemInvRdReqErr: return "REM_INV_RD_REQ_ERR";
    case WcStatus::kRemAbortErr: return "REM_ABORT_ERR";
    case WcStatus::kInvEecnErr: return "INV_EECN_ERR";
    case WcStatus::kInvEecStateErr: return "INV_EEC_STATE_ERR";
    case WcStatus::kFatalErr: return "FATAL_ERR";
    case WcStatus::kRespTimeoutErr: return "RESP_TIMEOUT_ERR";
    case WcStatus::kGeneralErr: return "GENERAL_ERR";
  }
  return "?";
}

std::string_view to_string(WcOpcode o) {
  switch (o) {
    case WcOpcode::kSend: return "SEND";
    case WcOpcode::kRdmaWrite: return "RDMA_WRITE";
    case WcOpcode::kRdmaRead: return "RDMA_READ";
    case WcOpcode::kCompSwap: return "COMP_SWAP";
    case WcOpcode::kFetchAdd: return "FETCH_ADD";
    case WcOpcode::kBindMw: return "BIND_MW";
    case WcOpcode::kLocalInv: return "LOCAL_INV";
    case WcOpcode::kRecv: return "RECV";
    case WcOpcode::kRecvRdmaWithImm: return "RECV_RDMA_WITH_IMM";
  }
  return "?";
}

std::string_view to_string(EventType e) {
  switch (e) {
    case EventType::kCqErr: return "CQ_ERR";
    case EventType::kQpFatal: return "QP_FATAL";
    case EventType::kQpReqErr: return "QP_REQ_ERR";
    case EventType::kQpAccessErr: return "QP_ACCESS_ERR";
    case EventType::kCommEst: return "COMM_EST";
    case EventType::kSqDrained: return "SQ_DRAINED";
    case EventType::kPathMig: return "PATH_MIG";
    case EventType::kPathMigErr: return "PATH_MIG_ERR";
    case EventType::kDeviceFatal: return "DEVICE_FATAL";
    case EventType::kPortActive: return "PORT_ACTIVE";
    case EventType::kPortErr: return "PORT_ERR";
    case EventType::kLidChange: return "LID_CHANGE";
    case EventType::kPkeyChange: return "PKEY_CHANGE";
    case EventType::kSmChange: return "SM_CHANGE";
    case EventType::kSrqErr: return "SRQ_ERR";
    case EventType::kSrqLimitReached: return "SRQ_LIMIT_REACHED";
    case EventType::kQpLastWqeReached: return "QP_LAST_WQE_REACHED";
    case EventType::kClientReregister: return "CLIENT_REREGISTER";
    case EventType::kGidChange: return "GID_CHANGE";
  }
  return "?";
}

std::string_view to_string(EventKind k) {
  switch (k) {
    case EventKind::kWrPosted: return "wr_posted";
    case EventKind::kRecvPosted: return "recv_posted";
    case EventKind::kPacketSent: return "packet_sent";
    case EventKind::kPacketReceived: return "packet_received";
    case EventKind::kPacketDropped: return "packet_dropped";
    case EventKind::kTimer: return "timer";
    case EventKind::kCompletion: return "completion";
    case EventKind::kQpStateChange: return "qp_state_change";
    case EventKind::kAsyncEvent: return "async_event";
    case EventKind::kRoleSteps: return "role_steps";
  }
  return "?";
}

std::string_view to_string(Role r) {
  switch (r) {
    case Role::kCompleter: return "completer";
    case Role::kResponder: return "responder";
  }
  return "?";
}

std::string_view role_state_name(Role r, uint8_t s) {
  switch (r) {
    case Role::kCompleter: return comp_state_name(s);
    case Role::kResponder: return resp_state_name(s);
  }
  return "?";
}

uint64_t Counters::dropped(std::string_view reason) const {
  for (size_t i = 0; i < kDropCauseCount; ++i)
    if (kDropCauses[i].reason == reason) return drops[i];
  return 0;
}

Counters& Counters::operator+=(const Counters& o) {
  sent_pkts += o.sent_pkts; rcvd_pkts += o.rcvd_pkts;
  duplicate_request += o.duplicate_request; out_of_seq_request += o.out_of_seq_request;
  rcvd_seq_err += o.rcvd_seq_err; retry_exceeded_err += o.retry_exceeded_err;
  rnr_nak_retry_err += o.rnr_nak_retry_err; send_rnr_err += o.send_rnr_err;
  rcvd_rnr_err += o.rcvd_rnr_err; completer_retry_err += o.completer_retry_err;
  np_ecn_marked_roce_packets += o.np_ecn_marked_roce_packets;
  np_cnp_sent += o.np_cnp_sent;
  rp_cnp_handled += o.rp_cnp_handled;
  rp_cnp_ignored += o.rp_cnp_ignored;
  ack_deferred += o.ack_deferred; rcvd_icrc_err += o.rcvd_icrc_err;
  icrc_ip_recovered += o.icrc_ip_recovered;
  rcvd_hdr_err += o.rcvd_hdr_err; rdma_sends += o.rdma_sends; rdma_recvs += o.rdma_recvs;
  for (size_t i = 0; i < kDropCauseCount; ++i) drops[i] += o.drops[i];
  qkey_viol += o.qkey_viol;
  return *this;
}

}  // namespace rocelab::emu
