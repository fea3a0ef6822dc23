// DCQCN's reaction point for one QP (Zhu et al., SIGCOMM 2015), as
// ConnectX NICs implement it (the mlx5 parameters of cc/dcqcn_params.h).
//
// State: the current rate R_C (what rate_bps() returns), the target rate R_T,
// alpha, the timer and byte-counter stages T and BC.
//   first CNP   alpha = initial_alpha_value; then a cut, or R_C = R_T =
//               rate_to_set_on_first_cnp. Until then the QP sends at line
//               rate and has no timers.
//   CNP         cut at the next rate_reduce_monitor_period boundary (at once
//               when 0): R_T = R_C (per the clamp rules);
//               R_C = max(R_C (1 - alpha/2), R_C * rpg_min_dec_fac%, min rate);
//               T = BC = 0, timer and byte counter restarted.
//   every K     alpha = (1-g) alpha + g if a CNP arrived in the period, else
//   (dce_tcp_rtt)  (1-g) alpha.
//   every T / every B bytes after a cut: a rate increase, then T++ / BC++:
//               fast recovery   max(T, BC) < F:  R_C = (R_T + R_C) / 2
//               additive        otherwise:       R_T += R_AI, then the same
//               hyper           min(T, BC) > F:  R_T += R_HAI, then the same
//               R_T never exceeds the ceiling (rpg_max_rate or line rate);
//               once R_C reaches it the QP is recovered and its timer stops.
//
// Alpha's timer needs no wake-up: alpha matters only at a cut, and every call
// first brings alpha up to `now` as if its timer had fired at each period.
// next_timer() is therefore only the pending cut or the rate-increase timer.
#pragma once
#include <cstdint>

#include "cc/dcqcn_params.h"
#include "cc/rate_control.h"

namespace rocelab::cc {

class Dcqcn final : public RateControl {
 public:
  // `p` passes check_dcqcn_params and line_rate_bps >= rpg_min_rate (make_rate_control checks both).
  Dcqcn(const DcqcnParams& p, uint64_t line_rate_bps);

  std::string_view name() const override { return "dcqcn"; }
  uint64_t rate_bps() const override { return static_cast<uint64_t>(rc_); }
  void on_cnp(Nanos now) override;
  void on_sent(Nanos now, uint32_t bytes) override;
  Nanos next_timer() const override;
  void on_timer(Nanos now) override { advance(now); }
  const Counters& counters() const override { return counters_; }

  // The state as of the last call, for tests and traces.
  double current_rate_bps() const { return rc_; }  // R_C
  double target_rate_bps() const { return rt_; }   // R_T
  double alpha() const { return alpha_; }
  uint32_t timer_stage() const { return timer_stage_; }  // T
  uint32_t byte_stage() const { return byte_stage_; }    // BC

 private:
  enum class Counter { kTimer, kBytes };

  void advance(Nanos now);  // every expiry up to `now`, in time order
  void alpha_to(Nanos t);   // alpha's updates at its boundaries <= t
  void first_cnp(Nanos now);
  void cut(Nanos at);
  void restart_increase(Nanos at);
  void increase(Counter by);

  // Parameters in SI units (bits/s, ns, bytes).
  double line_;
  double ceiling_;       // rpg_max_rate, or the line rate
  double min_rate_;
  double first_rate_;    // rate_to_set_on_first_cnp; 0: off
  double ai_, hai_;
  double g_;
  double alpha0_;
  double cut_scale_;     // 2^(10 - rpg_gd): a cut is R_C * alpha * cut_scale_
  double max_cut_;       // the largest fraction of R_C one cut removes
  Nanos k_;              // alpha period
  Nanos monitor_;        // 0: cut at each CNP
  Nanos t_;              // rate-increase timer
  uint64_t b_;           // byte counter, bytes; 0: off
  uint32_t f_;
  bool clamp_, clamp_after_timer_;

  // State.
  double rc_, rt_;
  double alpha_ = 0;
  bool throttled_ = false;   // a CNP has arrived
  bool recovering_ = false;  // R_C below the ceiling: the increase timer and byte counter run
  bool alpha_cnp_ = false;   // a CNP arrived in the current alpha period
  bool cut_pending_ = false;
  Nanos last_ = Nanos::min();
  Nanos first_cnp_at_{0};    // origin of the monitor-period grid
  Nanos alpha_at_{0};        // next alpha boundary
  Nanos cut_at_{0};          // the pending cut's boundary
  Nanos last_cut_ = Nanos::min();
  Nanos increase_at_{0};     // next rate-increase timer expiry
  uint64_t bytes_ = 0;       // sent since the last byte-counter stage
  uint32_t timer_stage_ = 0, byte_stage_ = 0;
  Counters counters_;
};

}  // namespace rocelab::cc
