// A picture of one device at one instant, for `rocelab stat` (src/stat): its
// QPs, CQs, MRs, SRQs, multicast groups and counters as plain values, copied
// under the device lock. Nothing here is read on the data path: a snapshot is
// taken when someone asks for one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "emu/records.h"
#include "emu/verbs_types.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

struct QpSnapshot {
  uint32_t qpn = 0;
  QpType type = QpType::kRC;
  QpState state = QpState::kReset;
  uint32_t pd = 0;                    // PD handle (0: none, an XRC target)
  uint32_t send_cq = 0, recv_cq = 0;  // CQ numbers (0: none)
  uint32_t srq = 0;                   // SRQ number (0: none)
  Mtu path_mtu = Mtu::k1024;
  // Connected QPs (RC, UC, XRC) from RTR on: the peer. UD QPs have none.
  bool connected = false;
  wire::IpAddr peer{};
  uint32_t dest_qpn = 0;
  // Requester: the PSN of the next new packet and the oldest one not yet
  // acknowledged (they are equal when nothing is in flight); responder: the
  // PSN it expects next.
  uint32_t sq_psn = 0, unacked_psn = 0, epsn = 0;
  // As set (modify_qp) and what is left of them for the oldest packet in flight.
  uint8_t retry_cnt = 0, rnr_retry = 0, retry_left = 0, rnr_retry_left = 0;
  uint8_t timeout = 0;                // 4.096 us * 2^timeout; 0 = infinite
  uint32_t sq_outstanding = 0;        // send WRs posted and not completed
  uint32_t rq_posted = 0;             // receive WRs waiting in its own RQ
  uint32_t max_send_wr = 0, max_recv_wr = 0;
  Counters counters;
};

struct CqSnapshot {
  uint32_t cqn = 0;
  uint32_t capacity = 0;
  uint32_t completions = 0;  // held, not yet polled
  bool has_channel = false;
  bool armed = false;
  bool overflowed = false;
  uint32_t qps = 0;          // QPs that complete on it
};

struct MrSnapshot {
  uint32_t lkey = 0, rkey = 0;
  uint64_t addr = 0, length = 0, iova = 0;
  unsigned access = 0;  // access:: bits
  uint32_t pd = 0;
};

struct SrqSnapshot {
  uint32_t srq_num = 0;
  bool xrc = false;
  uint32_t pd = 0;
  uint32_t max_wr = 0, posted = 0, limit = 0;
  uint32_t qps = 0;
};

struct McastSnapshot {
  wire::IpAddr group{};
  std::vector<uint32_t> qpns;
};

struct DeviceSnapshot {
  std::string name;
  wire::IpAddr address{};
  uint64_t node_guid = 0;
  int qpn_block = -1;  // DeviceConfig::qpn_block
  Mtu active_mtu = Mtu::k1024;
  uint32_t pds = 0, ahs = 0, mws = 0, channels = 0, xrcds = 0;
  int64_t inflight_psns = 0;  // RC PSNs sent and not acknowledged, all QPs
  Counters counters;          // device totals
  std::vector<QpSnapshot> qps;
  std::vector<CqSnapshot> cqs;
  std::vector<MrSnapshot> mrs;
  std::vector<SrqSnapshot> srqs;
  std::vector<McastSnapshot> mcast;
};

}  // namespace rocelab::emu
