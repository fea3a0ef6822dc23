#include "emu/connect.h"

namespace rocelab::emu {

using namespace qp_attr;

std::error_code qp_to_init(Qp& qp, const ConnectOptions& o) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = kPortNum;
  if (qp.type() == QpType::kUD) {
    a.qkey = o.qkey;
    return qp.modify(a, kState | kPkeyIndex | kPort | kQkey);
  }
  a.qp_access_flags = o.access;
  return qp.modify(a, kState | kPkeyIndex | kPort | kAccessFlags);
}

std::error_code qp_to_rtr(Qp& qp, const Gid& rgid, uint32_t rqpn, uint32_t rq_psn, const ConnectOptions& o) {
  QpAttr a;
  a.qp_state = QpState::kRtr;
  if (qp.type() == QpType::kUD) return qp.modify(a, kState);
  a.path_mtu = o.path_mtu;
  a.dest_qp_num = rqpn;
  a.rq_psn = rq_psn;
  a.ah_attr.dgid = rgid;
  a.ah_attr.is_global = true;
  a.ah_attr.hop_limit = 64;
  a.ah_attr.traffic_class = o.traffic_class;
  a.ah_attr.port_num = kPortNum;
  uint32_t mask = kState | kAv | kPathMtu | kDestQpn | kRqPsn;
  if (qp.type() == QpType::kRC || qp.type() == QpType::kXrcTgt) {  // the responder's attributes
    a.max_dest_rd_atomic = o.max_rd_atomic;
    a.min_rnr_timer = o.min_rnr_timer;
    mask |= kMaxDestRdAtomic | kMinRnrTimer;
  }
  return qp.modify(a, mask);
}

std::error_code qp_to_rts(Qp& qp, uint32_t sq_psn, const ConnectOptions& o) {
  QpAttr a;
  a.qp_state = QpState::kRts;
  a.sq_psn = sq_psn;
  uint32_t mask = kState | kSqPsn;
  if (qp.type() == QpType::kXrcTgt) {  // a target sends only responses
    a.timeout = o.timeout;
    mask |= kTimeout;
  } else if (qp.type() == QpType::kRC || qp.type() == QpType::kXrcIni) {
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = o.max_rd_atomic;
    mask |= kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic;
  }
  return qp.modify(a, mask);
}

std::error_code connect_pair(Device& da, Qp& a, Device& db, Qp& b, const ConnectOptions& o) {
  Gid ga{}, gb{};
  if (auto ec = da.query_gid(kPortNum, 0, &ga)) return ec;
  if (auto ec = db.query_gid(kPortNum, 0, &gb)) return ec;
  if (auto ec = qp_to_init(a, o)) return ec;
  if (auto ec = qp_to_init(b, o)) return ec;
  if (auto ec = qp_to_rtr(a, gb, b.qp_num(), o.psn_b, o)) return ec;
  if (auto ec = qp_to_rtr(b, ga, a.qp_num(), o.psn_a, o)) return ec;
  if (auto ec = qp_to_rts(a, o.psn_a, o)) return ec;
  return qp_to_rts(b, o.psn_b, o);
}

}  // namespace rocelab::emu
