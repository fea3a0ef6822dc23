// Plain data the verbs API passes in and out: attributes, work requests and
// work completions. Field names and meanings follow the libibverbs structs of
// the same name (ibv_device_attr, ibv_port_attr, ibv_qp_attr, ibv_send_wr,
// ibv_wc ...), so the shim can mirror them field by field.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "emu/verbs_types.h"

namespace rocelab::emu {

class Ah;
class Cq;
class Mr;
class Mw;
class Qp;
class Srq;
class Xrcd;

using Gid = std::array<uint8_t, 16>;  // network byte order, as ibv_gid.raw

struct DeviceAttr {
  std::string fw_ver;
  uint64_t node_guid = 0;       // host order (ibv_device_attr stores it big-endian)
  uint64_t sys_image_guid = 0;  // host order
  uint64_t max_mr_size = 0;
  uint64_t page_size_cap = 0;
  uint32_t vendor_id = 0, vendor_part_id = 0, hw_ver = 0;
  int max_qp = 0, max_qp_wr = 0;
  unsigned device_cap_flags = 0;  // device_cap::
  int max_sge = 0, max_sge_rd = 0, max_cq = 0, max_cqe = 0, max_mr = 0, max_pd = 0;
  int max_qp_rd_atom = 0, max_ee_rd_atom = 0, max_res_rd_atom = 0, max_qp_init_rd_atom = 0,
      max_ee_init_rd_atom = 0;
  AtomicCap atomic_cap = AtomicCap::kNone;
  int max_ee = 0, max_rdd = 0, max_mw = 0, max_raw_ipv6_qp = 0, max_raw_ethy_qp = 0;
  int max_mcast_grp = 0, max_mcast_qp_attach = 0, max_total_mcast_qp_attach = 0;
  int max_ah = 0, max_fmr = 0, max_map_per_fmr = 0, max_srq = 0, max_srq_wr = 0, max_srq_sge = 0;
  uint16_t max_pkeys = 0;
  uint8_t local_ca_ack_delay = 0;
  uint8_t phys_port_cnt = 0;
  uint32_t max_msg_sz = 0;  // not in ibv_device_attr; equals PortAttr::max_msg_sz
};

struct PortAttr {
  PortState state = PortState::kDown;
  Mtu max_mtu = Mtu::k4096;
  Mtu active_mtu = Mtu::k1024;
  int gid_tbl_len = 0;
  uint32_t port_cap_flags = 0;  // port_cap::
  uint32_t max_msg_sz = 0;
  uint32_t bad_pkey_cntr = 0, qkey_viol_cntr = 0;
  uint16_t pkey_tbl_len = 0;
  uint16_t lid = 0, sm_lid = 0;
  uint8_t lmc = 0, max_vl_num = 0, sm_sl = 0, subnet_timeout = 0, init_type_reply = 0;
  uint8_t active_width = 0, active_speed = 0, phys_state = 0;
  LinkLayer link_layer = LinkLayer::kEthernet;
  uint8_t flags = 0;
  uint16_t port_cap_flags2 = 0;
};

// ibv_ah_attr with its ibv_global_route. RoCE requires is_global and a dgid.
struct AhAttr {
  Gid dgid{};
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0, hop_limit = 64, traffic_class = 0;
  uint16_t dlid = 0;
  uint8_t sl = 0, src_path_bits = 0, static_rate = 0;
  bool is_global = true;
  uint8_t port_num = 1;
};

struct QpCap {
  uint32_t max_send_wr = 0, max_recv_wr = 0, max_send_sge = 0, max_recv_sge = 0,
           max_inline_data = 0;
};

// ibv_qp_attr. Which fields matter is given by a qp_attr:: mask.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  MigState path_mig_state = MigState::kMigrated;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;        // 24 bits
  uint32_t sq_psn = 0;        // 24 bits
  uint32_t dest_qp_num = 0;   // 24 bits
  unsigned qp_access_flags = 0;  // access::kRemote*
  QpCap cap;
  AhAttr ah_attr;
  AhAttr alt_ah_attr;
  uint16_t pkey_index = 0, alt_pkey_index = 0;
  uint8_t en_sqd_async_notify = 0;
  uint8_t sq_draining = 0;
  uint8_t max_rd_atomic = 0;       // outstanding READ/atomic as requester
  uint8_t max_dest_rd_atomic = 0;  // as responder
  uint8_t min_rnr_timer = 0;       // IBTA Table 45 code
  uint8_t port_num = 1;
  uint8_t timeout = 0;    // 4.096 us * 2^timeout; 0 = infinite
  uint8_t retry_cnt = 0;  // 0..7
  uint8_t rnr_retry = 0;  // 0..7, 7 = infinite
  uint8_t alt_port_num = 0, alt_timeout = 0;
  uint32_t rate_limit = 0;
};

// XRC_INI: pd and send_cq (no receive side); XRC_TGT: xrcd only (no PD, CQ
// or queues: its messages land in the XRC SRQs of its domain).
struct QpInitAttr {
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  Xrcd* xrcd = nullptr;
  QpCap cap;
  QpType qp_type = QpType::kRC;
  bool sq_sig_all = false;
};

struct SrqAttr {
  uint32_t max_wr = 0, max_sge = 0, srq_limit = 0;
};

// ibv_sge
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// ibv_send_wr without the list link: post_send takes a span of these.
struct SendWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
  WrOpcode opcode = WrOpcode::kSend;
  unsigned send_flags = 0;  // send_flags::
  uint32_t imm_data = 0;    // network byte order in memory, as ibv_send_wr.imm_data
  uint32_t invalidate_rkey = 0;  // SEND_WITH_INV, LOCAL_INV
  struct {
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
  } rdma;
  struct {
    uint64_t remote_addr = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint32_t rkey = 0;
  } atomic;
  // BIND_MW (ibv_send_wr.bind_mw): binds mw to [addr, addr+length) of mr with
  // access (access::kRemote*, kZeroBased); rkey is the window's new R_Key (its
  // low 8 bits are the new key byte). length 0 (type 1) unbinds.
  struct {
    Mw* mw = nullptr;
    uint32_t rkey = 0;
    Mr* mr = nullptr;
    uint64_t addr = 0;
    uint64_t length = 0;
    unsigned access = 0;
  } bind_mw;
  struct {
    Ah* ah = nullptr;
    uint32_t remote_qpn = 0;
    uint32_t remote_qkey = 0;
  } ud;
  uint32_t xrc_remote_srqn = 0;  // XRC_INI: the target's XRC SRQ (ibv_send_wr.qp_type.xrc.remote_srqn)
};

// ibv_recv_wr without the list link.
struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
};

// ibv_wc
struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // WITH_IMM: network byte order in memory; WITH_INV: the invalidated rkey
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  unsigned wc_flags = 0;  // wc_flags::
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
  // When the completion entered its CQ, in ns on the device's clock
  // (Transport::now: virtual time on the simulated fabric, CLOCK_MONOTONIC on
  // UDP): ibv_wc_read_completion_ts, with hca_core_clock 1 GHz.
  uint64_t timestamp_ns = 0;
};

// ibv_async_event: exactly one of qp/cq/srq is set, or port_num for port events.
struct AsyncEvent {
  EventType event_type = EventType::kPortActive;
  Qp* qp = nullptr;
  Cq* cq = nullptr;
  Srq* srq = nullptr;
  uint8_t port_num = 0;
};

}  // namespace rocelab::emu
