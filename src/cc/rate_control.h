// Congestion control at the endpoints: a sender's (reaction point's) per-QP
// rate control, behind one small interface so that algorithms can sit side by
// side (DCQCN now; a window-based one later). The engine owns one RateControl
// per QP and tells it three things: a CNP arrived, bytes went on the wire, its
// timer fired. It asks one: the rate the QP may send at.
//
// Pure and clock-free: every call carries the current time `now` on the
// transport's clock (virtual on the simulated fabric); nothing reads a clock,
// nothing allocates after construction, nothing is thread-safe (the engine
// calls under its own lock). `now` never goes backwards: an earlier `now` is
// taken as the latest one seen.
//
// The timer contract: after any call, next_timer() is the time at which the
// algorithm must next be called through on_timer() for its own timers
// (Nanos::max() when none). The engine keeps one timer per QP armed at
// next_timer(). on_timer(now) applies every expiry up to `now`, so a timer
// that fires late, early or twice is harmless: the state is the same as if
// each expiry had been handled on time.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cc/dcqcn_params.h"

namespace rocelab::cc {

using Nanos = std::chrono::nanoseconds;

enum class Algorithm {
  kNone,   // line rate forever; CNPs are counted and ignored
  kDcqcn,  // DCQCN as mlx5 implements it (cc/dcqcn.h)
};

// "none", "dcqcn": the words of the command line and of name().
std::string_view algorithm_name(Algorithm a);
// The inverse of algorithm_name; other text is an error naming the accepted words.
std::optional<Algorithm> parse_algorithm(std::string_view text, std::string* error);

// What one QP's rate control did. rp_cnp_handled and rp_cnp_ignored are mlx5's hardware
// counter names (rdma statistic); the rest are per event of the algorithm.
struct Counters {
  uint64_t rp_cnp_handled = 0;         // CNPs the algorithm acted on
  uint64_t rp_cnp_ignored = 0;         // CNPs it did not (kNone)
  uint64_t rate_cuts = 0;              // rate decreases (CNPs within one monitor period: one)
  uint64_t timer_expiries = 0;         // rate-increase timer expiries (stages of T)
  uint64_t byte_counter_expiries = 0;  // byte-counter expiries (stages of B)
  uint64_t fast_recovery = 0;          // increases by stage: R_C = (R_T + R_C) / 2
  uint64_t additive_increase = 0;      //   R_T += R_AI first
  uint64_t hyper_increase = 0;         //   R_T += R_HAI first
};

class RateControl {
 public:
  virtual ~RateControl() = default;

  // The algorithm's word ("none", "dcqcn").
  virtual std::string_view name() const = 0;
  // The rate the QP may send at now, bits/s, rounded down: between line rate and the
  // algorithm's floor. Changes only in the calls below.
  virtual uint64_t rate_bps() const = 0;

  // A CNP arrived for this QP.
  virtual void on_cnp(Nanos now) = 0;
  // The QP put `bytes` on the wire (headers included, as the byte counter counts).
  virtual void on_sent(Nanos now, uint32_t bytes) = 0;
  // When on_timer must next be called; Nanos::max() when nothing is pending.
  virtual Nanos next_timer() const = 0;
  // The QP's timer fired (or any time at all: expiries after `now` wait).
  virtual void on_timer(Nanos now) = 0;

  virtual const Counters& counters() const = 0;
};

// The rate control for one QP whose NIC sends at `line_rate_bps`. `dcqcn` is read by kDcqcn.
// nullptr with a line in *error when the parameters fail check_dcqcn_params, the line rate is
// 0 or below rpg_min_rate.
std::unique_ptr<RateControl> make_rate_control(Algorithm algorithm, const DcqcnParams& dcqcn,
                                               uint64_t line_rate_bps, std::string* error);

}  // namespace rocelab::cc
