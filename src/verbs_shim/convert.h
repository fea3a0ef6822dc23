// ibv_* <-> engine conversions. The engine's enums and flag bits carry
// libibverbs' numeric values (emu/verbs_types.h); the static_asserts below pin
// every one, so the conversions are plain casts.
#pragma once
#include <infiniband/verbs.h>

#include <cstring>
#include <type_traits>

#include "emu/verbs_attrs.h"
#include "emu/verbs_types.h"

namespace rocelab::verbs_shim {

// The integer a program stored in a libibverbs enum field (qp_state, opcode,
// qp_type ...). A program may store any int there; the C enums have no fixed
// type, so loading an out-of-range value as the enum is undefined in C++.
// Read the bytes instead, then check the value before converting.
template <typename E>
auto raw_enum(const E& field) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

#define ROCELAB_SAME(emu_value, ibv_value) \
  static_assert(static_cast<int>(emu_value) == static_cast<int>(ibv_value), #emu_value " != " #ibv_value)

ROCELAB_SAME(emu::QpState::kReset, IBV_QPS_RESET);
ROCELAB_SAME(emu::QpState::kInit, IBV_QPS_INIT);
ROCELAB_SAME(emu::QpState::kRtr, IBV_QPS_RTR);
ROCELAB_SAME(emu::QpState::kRts, IBV_QPS_RTS);
ROCELAB_SAME(emu::QpState::kSqd, IBV_QPS_SQD);
ROCELAB_SAME(emu::QpState::kSqe, IBV_QPS_SQE);
ROCELAB_SAME(emu::QpState::kErr, IBV_QPS_ERR);
ROCELAB_SAME(emu::QpType::kRC, IBV_QPT_RC);
ROCELAB_SAME(emu::QpType::kUC, IBV_QPT_UC);
ROCELAB_SAME(emu::QpType::kUD, IBV_QPT_UD);
ROCELAB_SAME(emu::QpType::kXrcIni, IBV_QPT_XRC_SEND);
ROCELAB_SAME(emu::QpType::kXrcTgt, IBV_QPT_XRC_RECV);
ROCELAB_SAME(emu::SrqType::kBasic, IBV_SRQT_BASIC);
ROCELAB_SAME(emu::SrqType::kXrc, IBV_SRQT_XRC);
ROCELAB_SAME(emu::MigState::kMigrated, IBV_MIG_MIGRATED);
ROCELAB_SAME(emu::MigState::kRearm, IBV_MIG_REARM);
ROCELAB_SAME(emu::MigState::kArmed, IBV_MIG_ARMED);
ROCELAB_SAME(emu::Mtu::k256, IBV_MTU_256);
ROCELAB_SAME(emu::Mtu::k512, IBV_MTU_512);
ROCELAB_SAME(emu::Mtu::k1024, IBV_MTU_1024);
ROCELAB_SAME(emu::Mtu::k2048, IBV_MTU_2048);
ROCELAB_SAME(emu::Mtu::k4096, IBV_MTU_4096);
ROCELAB_SAME(emu::PortState::kNop, IBV_PORT_NOP);
ROCELAB_SAME(emu::PortState::kDown, IBV_PORT_DOWN);
ROCELAB_SAME(emu::PortState::kInit, IBV_PORT_INIT);
ROCELAB_SAME(emu::PortState::kArmed, IBV_PORT_ARMED);
ROCELAB_SAME(emu::PortState::kActive, IBV_PORT_ACTIVE);
ROCELAB_SAME(emu::LinkLayer::kUnspecified, IBV_LINK_LAYER_UNSPECIFIED);
ROCELAB_SAME(emu::LinkLayer::kInfiniband, IBV_LINK_LAYER_INFINIBAND);
ROCELAB_SAME(emu::LinkLayer::kEthernet, IBV_LINK_LAYER_ETHERNET);
ROCELAB_SAME(emu::AtomicCap::kNone, IBV_ATOMIC_NONE);
ROCELAB_SAME(emu::AtomicCap::kHca, IBV_ATOMIC_HCA);
ROCELAB_SAME(emu::AtomicCap::kGlob, IBV_ATOMIC_GLOB);
ROCELAB_SAME(emu::GidType::kIb, IBV_GID_TYPE_IB);
ROCELAB_SAME(emu::GidType::kRoceV1, IBV_GID_TYPE_ROCE_V1);
ROCELAB_SAME(emu::GidType::kRoceV2, IBV_GID_TYPE_ROCE_V2);

ROCELAB_SAME(emu::qp_attr::kState, IBV_QP_STATE);
ROCELAB_SAME(emu::qp_attr::kCurState, IBV_QP_CUR_STATE);
ROCELAB_SAME(emu::qp_attr::kEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY);
ROCELAB_SAME(emu::qp_attr::kAccessFlags, IBV_QP_ACCESS_FLAGS);
ROCELAB_SAME(emu::qp_attr::kPkeyIndex, IBV_QP_PKEY_INDEX);
ROCELAB_SAME(emu::qp_attr::kPort, IBV_QP_PORT);
ROCELAB_SAME(emu::qp_attr::kQkey, IBV_QP_QKEY);
ROCELAB_SAME(emu::qp_attr::kAv, IBV_QP_AV);
ROCELAB_SAME(emu::qp_attr::kPathMtu, IBV_QP_PATH_MTU);
ROCELAB_SAME(emu::qp_attr::kTimeout, IBV_QP_TIMEOUT);
ROCELAB_SAME(emu::qp_attr::kRetryCnt, IBV_QP_RETRY_CNT);
ROCELAB_SAME(emu::qp_attr::kRnrRetry, IBV_QP_RNR_RETRY);
ROCELAB_SAME(emu::qp_attr::kRqPsn, IBV_QP_RQ_PSN);
ROCELAB_SAME(emu::qp_attr::kMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC);
ROCELAB_SAME(emu::qp_attr::kAltPath, IBV_QP_ALT_PATH);
ROCELAB_SAME(emu::qp_attr::kMinRnrTimer, IBV_QP_MIN_RNR_TIMER);
ROCELAB_SAME(emu::qp_attr::kSqPsn, IBV_QP_SQ_PSN);
ROCELAB_SAME(emu::qp_attr::kMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC);
ROCELAB_SAME(emu::qp_attr::kPathMigState, IBV_QP_PATH_MIG_STATE);
ROCELAB_SAME(emu::qp_attr::kCap, IBV_QP_CAP);
ROCELAB_SAME(emu::qp_attr::kDestQpn, IBV_QP_DEST_QPN);
ROCELAB_SAME(emu::qp_attr::kRateLimit, IBV_QP_RATE_LIMIT);

ROCELAB_SAME(emu::access::kLocalWrite, IBV_ACCESS_LOCAL_WRITE);
ROCELAB_SAME(emu::access::kRemoteWrite, IBV_ACCESS_REMOTE_WRITE);
ROCELAB_SAME(emu::access::kRemoteRead, IBV_ACCESS_REMOTE_READ);
ROCELAB_SAME(emu::access::kRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC);
ROCELAB_SAME(emu::access::kMwBind, IBV_ACCESS_MW_BIND);
ROCELAB_SAME(emu::access::kZeroBased, IBV_ACCESS_ZERO_BASED);
ROCELAB_SAME(emu::access::kOnDemand, IBV_ACCESS_ON_DEMAND);
ROCELAB_SAME(emu::access::kHugetlb, IBV_ACCESS_HUGETLB);
ROCELAB_SAME(emu::access::kRelaxedOrdering, IBV_ACCESS_RELAXED_ORDERING);

ROCELAB_SAME(emu::WrOpcode::kRdmaWrite, IBV_WR_RDMA_WRITE);
ROCELAB_SAME(emu::WrOpcode::kRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM);
ROCELAB_SAME(emu::WrOpcode::kSend, IBV_WR_SEND);
ROCELAB_SAME(emu::WrOpcode::kSendWithImm, IBV_WR_SEND_WITH_IMM);
ROCELAB_SAME(emu::WrOpcode::kRdmaRead, IBV_WR_RDMA_READ);
ROCELAB_SAME(emu::WrOpcode::kAtomicCmpAndSwp, IBV_WR_ATOMIC_CMP_AND_SWP);
ROCELAB_SAME(emu::WrOpcode::kAtomicFetchAndAdd, IBV_WR_ATOMIC_FETCH_AND_ADD);
ROCELAB_SAME(emu::WrOpcode::kLocalInv, IBV_WR_LOCAL_INV);
ROCELAB_SAME(emu::WrOpcode::kBindMw, IBV_WR_BIND_MW);
ROCELAB_SAME(emu::WrOpcode::kSendWithInv, IBV_WR_SEND_WITH_INV);
ROCELAB_SAME(emu::MwType::kType1, IBV_MW_TYPE_1);
ROCELAB_SAME(emu::MwType::kType2, IBV_MW_TYPE_2);
ROCELAB_SAME(emu::device_cap::kMemWindow, IBV_DEVICE_MEM_WINDOW);
ROCELAB_SAME(emu::device_cap::kMemWindowType2B, IBV_DEVICE_MEM_WINDOW_TYPE_2B);

ROCELAB_SAME(emu::send_flags::kFence, IBV_SEND_FENCE);
ROCELAB_SAME(emu::send_flags::kSignaled, IBV_SEND_SIGNALED);
ROCELAB_SAME(emu::send_flags::kSolicited, IBV_SEND_SOLICITED);
ROCELAB_SAME(emu::send_flags::kInline, IBV_SEND_INLINE);
ROCELAB_SAME(emu::send_flags::kIpCsum, IBV_SEND_IP_CSUM);

ROCELAB_SAME(emu::WcStatus::kSuccess, IBV_WC_SUCCESS);
ROCELAB_SAME(emu::WcStatus::kLocLenErr, IBV_WC_LOC_LEN_ERR);
ROCELAB_SAME(emu::WcStatus::kLocQpOpErr, IBV_WC_LOC_QP_OP_ERR);
ROCELAB_SAME(emu::WcStatus::kLocEecOpErr, IBV_WC_LOC_EEC_OP_ERR);
ROCELAB_SAME(emu::WcStatus::kLocProtErr, IBV_WC_LOC_PROT_ERR);
ROCELAB_SAME(emu::WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR);
ROCELAB_SAME(emu::WcStatus::kMwBindErr, IBV_WC_MW_BIND_ERR);
ROCELAB_SAME(emu::WcStatus::kBadRespErr, IBV_WC_BAD_RESP_ERR);
ROCELAB_SAME(emu::WcStatus::kLocAccessErr, IBV_WC_LOC_ACCESS_ERR);
ROCELAB_SAME(emu::WcStatus::kRemInvReqErr, IBV_WC_REM_INV_REQ_ERR);
ROCELAB_SAME(emu::WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR);
ROCELAB_SAME(emu::WcStatus::kRemOpErr, IBV_WC_REM_OP_ERR);
ROCELAB_SAME(emu::WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR);
ROCELAB_SAME(emu::WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR);
ROCELAB_SAME(emu::WcStatus::kLocRddViolErr, IBV_WC_LOC_RDD_VIOL_ERR);
ROCELAB_SAME(emu::WcStatus::kRemInvRdReqErr, IBV_WC_REM_INV_RD_REQ_ERR);
ROCELAB_SAME(emu::WcStatus::kRemAbortErr, IBV_WC_REM_ABORT_ERR);
ROCELAB_SAME(emu::WcStatus::kInvEecnErr, IBV_WC_INV_EECN_ERR);
ROCELAB_SAME(emu::WcStatus::kInvEecStateErr, IBV_WC_INV_EEC_STATE_ERR);
ROCELAB_SAME(emu::WcStatus::kFatalErr, IBV_WC_FATAL_ERR);
ROCELAB_SAME(emu::WcStatus::kRespTimeoutErr, IBV_WC_RESP_TIMEOUT_ERR);
ROCELAB_SAME(emu::WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR);

ROCELAB_SAME(emu::WcOpcode::kSend, IBV_WC_SEND);
ROCELAB_SAME(emu::WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE);
ROCELAB_SAME(emu::WcOpcode::kRdmaRead, IBV_WC_RDMA_READ);
ROCELAB_SAME(emu::WcOpcode::kCompSwap, IBV_WC_COMP_SWAP);
ROCELAB_SAME(emu::WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD);
ROCELAB_SAME(emu::WcOpcode::kBindMw, IBV_WC_BIND_MW);
ROCELAB_SAME(emu::WcOpcode::kLocalInv, IBV_WC_LOCAL_INV);
ROCELAB_SAME(emu::WcOpcode::kRecv, IBV_WC_RECV);
ROCELAB_SAME(emu::WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM);

ROCELAB_SAME(emu::wc_flags::kGrh, IBV_WC_GRH);
ROCELAB_SAME(emu::wc_flags::kWithImm, IBV_WC_WITH_IMM);
ROCELAB_SAME(emu::wc_flags::kIpCsumOk, IBV_WC_IP_CSUM_OK);
ROCELAB_SAME(emu::wc_flags::kWithInv, IBV_WC_WITH_INV);

ROCELAB_SAME(emu::EventType::kCqErr, IBV_EVENT_CQ_ERR);
ROCELAB_SAME(emu::EventType::kQpFatal, IBV_EVENT_QP_FATAL);
ROCELAB_SAME(emu::EventType::kQpReqErr, IBV_EVENT_QP_REQ_ERR);
ROCELAB_SAME(emu::EventType::kQpAccessErr, IBV_EVENT_QP_ACCESS_ERR);
ROCELAB_SAME(emu::EventType::kCommEst, IBV_EVENT_COMM_EST);
ROCELAB_SAME(emu::EventType::kSqDrained, IBV_EVENT_SQ_DRAINED);
ROCELAB_SAME(emu::EventType::kPathMig, IBV_EVENT_PATH_MIG);
ROCELAB_SAME(emu::EventType::kPathMigErr, IBV_EVENT_PATH_MIG_ERR);
ROCELAB_SAME(emu::EventType::kDeviceFatal, IBV_EVENT_DEVICE_FATAL);
ROCELAB_SAME(emu::EventType::kPortActive, IBV_EVENT_PORT_ACTIVE);
ROCELAB_SAME(emu::EventType::kPortErr, IBV_EVENT_PORT_ERR);
ROCELAB_SAME(emu::EventType::kLidChange, IBV_EVENT_LID_CHANGE);
ROCELAB_SAME(emu::EventType::kPkeyChange, IBV_EVENT_PKEY_CHANGE);
ROCELAB_SAME(emu::EventType::kSmChange, IBV_EVENT_SM_CHANGE);
ROCELAB_SAME(emu::EventType::kSrqErr, IBV_EVENT_SRQ_ERR);
ROCELAB_SAME(emu::EventType::kSrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED);
ROCELAB_SAME(emu::EventType::kQpLastWqeReached, IBV_EVENT_QP_LAST_WQE_REACHED);
ROCELAB_SAME(emu::EventType::kClientReregister, IBV_EVENT_CLIENT_REREGISTER);
ROCELAB_SAME(emu::EventType::kGidChange, IBV_EVENT_GID_CHANGE);

ROCELAB_SAME(emu::srq_attr::kMaxWr, IBV_SRQ_MAX_WR);
ROCELAB_SAME(emu::srq_attr::kLimit, IBV_SRQ_LIMIT);

ROCELAB_SAME(emu::device_cap::kBadPkeyCntr, IBV_DEVICE_BAD_PKEY_CNTR);
ROCELAB_SAME(emu::device_cap::kBadQkeyCntr, IBV_DEVICE_BAD_QKEY_CNTR);
ROCELAB_SAME(emu::device_cap::kCurrQpStateMod, IBV_DEVICE_CURR_QP_STATE_MOD);
ROCELAB_SAME(emu::device_cap::kShutdownPort, IBV_DEVICE_SHUTDOWN_PORT);
ROCELAB_SAME(emu::device_cap::kPortActiveEvent, IBV_DEVICE_PORT_ACTIVE_EVENT);
ROCELAB_SAME(emu::device_cap::kSysImageGuid, IBV_DEVICE_SYS_IMAGE_GUID);
ROCELAB_SAME(emu::device_cap::kRcRnrNakGen, IBV_DEVICE_RC_RNR_NAK_GEN);
ROCELAB_SAME(emu::device_cap::kSrqResize, IBV_DEVICE_SRQ_RESIZE);
ROCELAB_SAME(emu::device_cap::kNNotifyCq, IBV_DEVICE_N_NOTIFY_CQ);
ROCELAB_SAME(emu::port_cap::kCmSup, IBV_PORT_CM_SUP);
ROCELAB_SAME(emu::port_cap::kIpBasedGids, IBV_PORT_IP_BASED_GIDS);
#undef ROCELAB_SAME

static_assert(sizeof(emu::Gid) == sizeof(ibv_gid::raw));

// Attribute structs, field by field (verbs_attrs.h mirrors libibverbs' names).
void to_ibv(const emu::DeviceAttr& in, ibv_device_attr* out);
void to_ibv(const emu::PortAttr& in, ibv_port_attr* out);
void to_ibv(const emu::AhAttr& in, ibv_ah_attr* out);
emu::AhAttr from_ibv(const ibv_ah_attr& in);
void to_ibv(const emu::QpCap& in, ibv_qp_cap* out);
emu::QpCap from_ibv(const ibv_qp_cap& in);
void to_ibv(const emu::QpAttr& in, ibv_qp_attr* out);
emu::QpAttr from_ibv(const ibv_qp_attr& in);
void to_ibv(const emu::Wc& in, ibv_wc* out);

}  // namespace rocelab::verbs_shim
