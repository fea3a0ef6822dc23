#include "cc/notification_point.h"

namespace rocelab::cc {

bool NotificationPoint::on_ce_marked(Nanos now) {
  ++counters_.np_ecn_marked_roce_packets;
  // A `now` before the last CNP (a caller's clock going back) answers nothing until the
  // interval has passed from that CNP.
  if (sent_any_ && now - last_cnp_ < interval_) return false;
  sent_any_ = true;
  last_cnp_ = now;
  ++counters_.np_cnp_sent;
  return true;
}

}  // namespace rocelab::cc
