// DCQCN's reaction point (cc/dcqcn.h) and the check of its parameters (cc/dcqcn_params.h).
#include "cc/dcqcn.h"

#include <algorithm>
#include <cmath>

namespace rocelab::cc {
namespace {

constexpr double kMbps = 1e6;
constexpr Nanos kNever = Nanos::max();

Nanos us(uint32_t v) { return std::chrono::microseconds(v); }

}  // namespace

bool check_dcqcn_params(const DcqcnParams& p, std::string* error) {
  auto fail = [&](const char* why) {
    if (error) *error = why;
    return false;
  };
  if (p.dce_tcp_rtt == 0) return fail("dce_tcp_rtt (the alpha update period) must be at least 1 us");
  if (p.dce_tcp_g > 1023) return fail("dce_tcp_g must be 0..1023 ((1 - g) in 1024ths)");
  if (p.initial_alpha_value == 0 || p.initial_alpha_value > 1024)
    return fail("initial_alpha_value must be 1..1024 (alpha in 1024ths)");
  if (p.rpg_gd > 31) return fail("rpg_gd must be 0..31");
  if (p.rpg_min_dec_fac > 100) return fail("rpg_min_dec_fac must be 0..100 (%)");
  if (p.rpg_min_rate == 0) return fail("rpg_min_rate must be at least 1 Mb/s");
  if (p.rpg_time_reset == 0) return fail("rpg_time_reset (the rate-increase timer) must be at least 1 us");
  if (p.rpg_threshold > 31) return fail("rpg_threshold must be 0..31");
  return true;
}

Dcqcn::Dcqcn(const DcqcnParams& p, uint64_t line_rate_bps)
    : line_(static_cast<double>(line_rate_bps)),
      ceiling_(p.rpg_max_rate == 0 ? line_ : std::min(line_, p.rpg_max_rate * kMbps)),
      min_rate_(std::min(line_, p.rpg_min_rate * kMbps)),
      first_rate_(p.rate_to_set_on_first_cnp * kMbps),
      ai_(p.rpg_ai_rate * kMbps),
      hai_(p.rpg_hai_rate * kMbps),
      g_((1024.0 - p.dce_tcp_g) / 1024.0),
      alpha0_(p.initial_alpha_value / 1024.0),
      cut_scale_(std::ldexp(1.0, 10 - static_cast<int>(p.rpg_gd))),
      max_cut_((100.0 - p.rpg_min_dec_fac) / 100.0),
      // A zero period would never let advance() finish; check_dcqcn_params refuses it, and
      // the 1 ns floor only keeps a caller who skipped the check from spinning.
      k_(std::max(us(p.dce_tcp_rtt), Nanos(1))),
      monitor_(us(p.rate_reduce_monitor_period)),
      t_(std::max(us(p.rpg_time_reset), Nanos(1))),
      b_(uint64_t{p.rpg_byte_reset} * 64),
      f_(p.rpg_threshold),
      clamp_(p.clamp_tgt_rate),
      clamp_after_timer_(p.clamp_tgt_rate_after_time_inc),
      rc_(line_),
      rt_(line_) {}

void Dcqcn::on_cnp(Nanos now) {
  advance(now);
  now = last_;
  ++counters_.rp_cnp_handled;
  if (!throttled_) {
    first_cnp(now);
    return;
  }
  alpha_cnp_ = true;
  if (monitor_ == Nanos(0)) {
    cut(now);
    return;
  }
  if (cut_pending_) return;  // this period's cut is already due
  // The first grid boundary at or after `now`, and after the last cut: one cut per period.
  Nanos since = now - first_cnp_at_;
  Nanos at = first_cnp_at_ + ((since + monitor_ - Nanos(1)) / monitor_) * monitor_;
  if (last_cut_ != Nanos::min() && at <= last_cut_) at = last_cut_ + monitor_;
  if (at == now) {
    cut(now);
  } else {
    cut_pending_ = true;
    cut_at_ = at;
  }
}

void Dcqcn::first_cnp(Nanos now) {
  throttled_ = true;
  first_cnp_at_ = now;
  alpha_ = alpha0_;
  alpha_cnp_ = false;  // the first CNP sets alpha; it does not raise it again (as mlx5 does)
  alpha_at_ = now + k_;
  if (first_rate_ > 0) {
    rc_ = rt_ = std::clamp(first_rate_, min_rate_, line_);
    last_cut_ = now;
    ++counters_.rate_cuts;
    restart_increase(now);
  } else {
    cut(now);
  }
}

void Dcqcn::cut(Nanos at) {
  // R_T = R_C, unless mlx5's clamp rules keep the target of an earlier cut: without
  // clamp_tgt_rate, only an increase since that cut (by bytes, or by the timer when
  // clamp_tgt_rate_after_time_inc) moves the target down to R_C.
  if (clamp_ || byte_stage_ > 0 || (clamp_after_timer_ && timer_stage_ > 0)) rt_ = rc_;
  double reduction = std::min(rc_ * alpha_ * cut_scale_, rc_ * max_cut_);
  rc_ = std::max(rc_ - reduction, min_rate_);
  cut_pending_ = false;
  last_cut_ = at;
  ++counters_.rate_cuts;
  restart_increase(at);
}

void Dcqcn::restart_increase(Nanos at) {
  timer_stage_ = byte_stage_ = 0;
  bytes_ = 0;
  increase_at_ = at + t_;
  recovering_ = true;
}

void Dcqcn::increase(Counter by) {
  if (std::min(timer_stage_, byte_stage_) > f_) {
    rt_ += hai_;
    ++counters_.hyper_increase;
  } else if (std::max(timer_stage_, byte_stage_) >= f_) {
    rt_ += ai_;
    ++counters_.additive_increase;
  } else {
    ++counters_.fast_recovery;
  }
  rt_ = std::min(rt_, ceiling_);
  rc_ = (rc_ + rt_) / 2;
  if (by == Counter::kTimer) {
    ++timer_stage_;
  } else {
    ++byte_stage_;
  }
  // Halving the gap never closes it in floating point; within a bit per second of the
  // ceiling the QP has recovered. At rpg_max_rate it is no longer rate limited at all
  // (mlx5: "once this limit is reached, RP is no longer rate limited").
  if (rt_ >= ceiling_ && ceiling_ - rc_ < 1.0) {
    rc_ = rt_ = (ceiling_ < line_) ? line_ : ceiling_;
    recovering_ = false;
    bytes_ = 0;
  }
}

void Dcqcn::alpha_to(Nanos t) {
  while (alpha_at_ <= t) {
    if (alpha_cnp_) {
      alpha_ = (1 - g_) * alpha_ + g_;
      alpha_cnp_ = false;
      alpha_at_ += k_;
    } else {
      // Every boundary from here to t is one without a CNP: (1-g)^k at once.
      int64_t k = (t - alpha_at_) / k_ + 1;
      alpha_ *= std::pow(1 - g_, static_cast<double>(k));
      alpha_at_ += k * k_;
    }
  }
}

void Dcqcn::advance(Nanos now) {
  if (now < last_) now = last_;
  last_ = now;
  if (!throttled_) return;
  for (;;) {
    Nanos cut_t = cut_pending_ ? cut_at_ : kNever;
    Nanos inc_t = recovering_ ? increase_at_ : kNever;
    Nanos t = std::min(cut_t, inc_t);
    if (t > now) break;
    alpha_to(t);  // at equal times alpha's update comes first: a cut uses the new alpha
    if (cut_t <= inc_t) {
      cut(cut_t);  // restarts the timer: an expiry at the same instant is superseded
    } else {
      increase_at_ = inc_t + t_;
      ++counters_.timer_expiries;
      increase(Counter::kTimer);
    }
  }
  alpha_to(now);
}

void Dcqcn::on_sent(Nanos now, uint32_t bytes) {
  advance(now);
  if (!recovering_ || b_ == 0) return;
  bytes_ += bytes;
  while (bytes_ >= b_ && recovering_) {
    bytes_ -= b_;
    ++counters_.byte_counter_expiries;
    increase(Counter::kBytes);
  }
}

Nanos Dcqcn::next_timer() const {
  if (!throttled_) return kNever;
  return std::min(cut_pending_ ? cut_at_ : kNever, recovering_ ? increase_at_ : kNever);
}

}  // namespace rocelab::cc
