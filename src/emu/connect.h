// Bringing two QPs up against each other (RESET -> INIT -> RTR -> RTS) through
// the public verbs API, as an out-of-band exchange would. Used by `rocelab
// loopback` and the tests.
#pragma once
#include <cstdint>
#include <system_error>

#include "emu/device.h"

namespace rocelab::emu {

struct ConnectOptions {
  Mtu path_mtu = Mtu::k1024;
  uint32_t psn_a = 0, psn_b = 0;  // initial send PSN of a and of b
  uint8_t timeout = 14;           // 4.096 us * 2^14 = 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 12;     // 0.64 ms
  uint8_t max_rd_atomic = 16;
  unsigned access = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
  uint32_t qkey = 0x11111111;     // UD
  uint8_t traffic_class = 0;      // the AV's: DSCP << 2 | ECN (2: ECT(0))
};

// RESET -> INIT (mask and values for the QP's type).
std::error_code qp_to_init(Qp& qp, const ConnectOptions& o);
// INIT -> RTR towards remote QP number rqpn at GID rgid.
std::error_code qp_to_rtr(Qp& qp, const Gid& rgid, uint32_t rqpn, uint32_t rq_psn, const ConnectOptions& o);
// RTR -> RTS.
std::error_code qp_to_rts(Qp& qp, uint32_t sq_psn, const ConnectOptions& o);

// Connects a (on device da) and b (on db): both end in RTS. For XRC, a is
// the initiator and b the target QP (or the other way round).
std::error_code connect_pair(Device& da, Qp& a, Device& db, Qp& b, const ConnectOptions& o);

}  // namespace rocelab::emu
