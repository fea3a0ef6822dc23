// DCQCN's notification point: the receiver's side. A CE-marked packet that
// arrives for a QP is answered with a CNP to its sender, at most one per
// min_time_between_cnps (mlx5's name; the paper's N = 50 us, SIGCOMM 2015: a
// marked packet for a flow that had no CNP in the last N microseconds gets one
// at once, later marks in those N microseconds none).
//
// One NotificationPoint per QP: the interval is kept per flow, as the paper
// keeps it (and as Azure runs its newer NICs: Bai et al., NSDI 2023).
// The mlx5 driver's debugfs documents np_min_time_between_cnps as "minimum time
// between sending CNPs from the port"; a port-wide limiter is one
// NotificationPoint shared by the port's QPs. Clock-free like the rest of
// src/cc: each call carries `now`.
#pragma once
#include <chrono>
#include <cstdint>

namespace rocelab::cc {

using Nanos = std::chrono::nanoseconds;

// The paper's N, and mlx5's default as a published table of its defaults gives it (the driver's
// debugfs documentation says 0; docs/congestion.md lists the values seen).
inline constexpr Nanos kMinTimeBetweenCnpsPaper = std::chrono::microseconds(50);
inline constexpr Nanos kMinTimeBetweenCnpsMlx5 = std::chrono::microseconds(4);

class NotificationPoint {
 public:
  // mlx5's NP counter names (rdma statistic).
  struct Counters {
    uint64_t np_ecn_marked_roce_packets = 0;  // CE-marked packets seen
    uint64_t np_cnp_sent = 0;                 // CNPs asked for
  };

  // 0: every CE-marked packet is answered.
  explicit NotificationPoint(Nanos min_time_between_cnps) : interval_(min_time_between_cnps) {}

  // A CE-marked packet arrived for this QP at `now`: true when a CNP must be sent for it.
  bool on_ce_marked(Nanos now);

  const Counters& counters() const { return counters_; }

 private:
  Nanos interval_;
  bool sent_any_ = false;
  Nanos last_cnp_{0};
  Counters counters_;
};

}  // namespace rocelab::cc
