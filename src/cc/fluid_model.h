// The DCQCN fluid model: N identical flows through one bottleneck of capacity
// C with RED/ECN marking, as delay-differential equations integrated with a
// fixed step. The oracle a packet-level run (the simulated fabric with
// cc/dcqcn.h at the senders) is compared against.
//
// The equations are those of Zhu et al., SIGCOMM 2015 §5 (the DCQCN fluid
// model), in the form of Zhu, Ghobadi, Misra, Padhye, "ECN or Delay: Lessons
// Learnt from Analysis of DCQCN and TIMELY", CoNEXT 2016 (its DCQCN model). Rates
// R are in packets/s, the queue q and the byte counter B in packets, and every
// quantity marked (t - tau*) is the value one feedback delay ago:
//
//   p(q)   = 0 for q <= Kmin; (q - Kmin)/(Kmax - Kmin) Pmax up to Kmax; 1 above
//   dq/dt  = N R_C - C                                                  (queue, q >= 0)
//   da/dt  = g/tau' [ (1 - (1-p)^(tau' R_C(t-tau*))) - a ]              (alpha)
//   dR_T/dt = -(R_T - R_C) A/tau + R_AI R_C(t-tau*) (b' + d')
//   dR_C/dt = -R_C a A/(2 tau) + (R_T - R_C)/2 R_C(t-tau*) (b + d)
// with p = p(q(t-tau*)) and
//   A  = 1 - (1-p)^(tau R_C(t-tau*))          a CNP in one NP interval tau
//   b  = p / ((1-p)^(-B) - 1)                 byte-counter expiries per packet
//   d  = p / ((1-p)^(-T R_C(t-tau*)) - 1)     timer expiries per packet
//   b' = b (1-p)^(F B),  d' = d (1-p)^(F T R_C(t-tau*))   those past fast recovery
// tau is the NP's CNP interval (min_time_between_cnps), tau' the alpha period
// (dce_tcp_rtt), T the rate-increase timer (rpg_time_reset), g, B, F and R_AI
// the other DcqcnParams. The model has no hyper increase, no
// rate_reduce_monitor_period, no rpg_min_dec_fac and no clamp rule (R_T = R_C
// on every cut); its cut is a (2^(10 - rpg_gd)) R_C, the paper's a/2 at rpg_gd 11.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "cc/dcqcn_params.h"

namespace rocelab::cc {

struct FluidParams {
  uint32_t flows = 2;                // N
  double capacity_bps = 40e9;        // C, the bottleneck
  double line_rate_bps = 40e9;       // each sender's NIC: R_C and R_T stay below it
  uint32_t packet_bytes = 1000;      // the model's packet, the unit of rates, B and q
  std::chrono::nanoseconds feedback_delay = std::chrono::microseconds(4);  // tau*
  // The switch's RED/ECN profile (the paper's recommendation at 40 Gb/s).
  double kmin_bytes = 5e3;
  double kmax_bytes = 200e3;
  double pmax = 0.01;
  std::chrono::nanoseconds cnp_interval = std::chrono::microseconds(50);  // tau (the NP's N)
  DcqcnParams dcqcn = kDcqcnPaperDefaults;
  std::chrono::nanoseconds step = std::chrono::nanoseconds(100);  // forward Euler step
};

// One flow's state (all flows are alike) and the queue, at time t.
struct FluidSample {
  std::chrono::nanoseconds t{0};
  double rate_bps = 0;    // R_C
  double target_bps = 0;  // R_T
  double alpha = 0;
  double queue_bytes = 0;
  double p = 0;           // marking probability at the current queue
};

// Integrates from t = 0 (R_C = R_T = line rate, alpha = initial_alpha_value, q = 0; the same
// before 0 for the delayed terms) to `duration`, one sample every `sample_every` (the first at
// t = 0).
std::vector<FluidSample> run_fluid_model(const FluidParams& p, std::chrono::nanoseconds duration,
                                         std::chrono::nanoseconds sample_every);

// The model's equilibrium: every derivative 0, so N R_C = C, and p solves
//   a A^2 = tau^2 R_AI R_C (b' + d') (b + d)
// (eliminating R_T - R_C between the R_T and R_C equations; a = 1 - (1-p)^(tau' R_C)),
// found by bisection. When the flows fit (N x line rate <= C) it is the empty queue at line
// rate. nullopt when p exceeds Pmax: no equilibrium inside the marking ramp.
struct FluidFixedPoint {
  double p = 0;
  double queue_bytes = 0;
  double rate_bps = 0;    // R_C = C/N
  double target_bps = 0;  // R_T
  double alpha = 0;
};
std::optional<FluidFixedPoint> fluid_fixed_point(const FluidParams& p);

}  // namespace rocelab::cc
