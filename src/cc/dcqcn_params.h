// DCQCN's reaction-point parameters (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015), named and scaled as mlx5
// names them: the sysfs files under /sys/class/net/<dev>/ecn/roce_rp/, the
// firmware's mlxconfig keys (RPG_TIME_RESET_P1 ...), the driver's
// cong_control_r_roce_ecn_rp fields (mlx5_ifc.h). A value read from one of
// those can be copied here as it is. Each field's comment gives its unit and
// the paper's symbol; docs/congestion.md has the table with both sets of
// defaults and their sources.
//
// Two sets of defaults: kDcqcnMlx5Defaults (what a ConnectX ships with) and
// kDcqcnPaperDefaults (the paper's). Where they differ the difference is
// large: mlx5 updates alpha every microsecond with a small gain, the paper
// every 55 us with g = 1/256; mlx5 leaves fast recovery after one stage, the
// paper after five.
#pragma once
#include <cstdint>
#include <string>

namespace rocelab::cc {

struct DcqcnParams {
  // --- Alpha (the paper's alpha: the RP's estimate of how congested the path is) ---
  // Alpha update period, us. The paper's K (55 us). Alpha is updated once per period:
  // alpha = (1 - g) alpha + g if a CNP arrived in the period, alpha = (1 - g) alpha if none did.
  uint32_t dce_tcp_rtt = 1;
  // (1 - g) in 10-bit fixed point: g = (1024 - dce_tcp_g) / 1024. The paper's g = 1/256
  // is dce_tcp_g = 1020; mlx5's 1019 is g = 5/1024.
  uint32_t dce_tcp_g = 1019;
  // Alpha set by the QP's first CNP, in 1024ths. The paper starts alpha at 1, which is 1024
  // here (mlx5 accepts 1..1023, so its alpha starts just below 1).
  uint32_t initial_alpha_value = 1023;

  // --- Rate decrease (on CNP: R_T = R_C; R_C = R_C (1 - alpha/2)) ---
  // A CNP is acted on at the next boundary of a grid of this period, us, started by the QP's
  // first CNP: CNPs within one period make one cut. 0: every CNP cuts at once (the paper,
  // whose notification point already spaces CNPs N = 50 us apart).
  uint32_t rate_reduce_monitor_period = 4;
  // log2 of the divisor of alpha, with alpha in 1024ths: a cut is R_C * alpha / 2^(rpg_gd - 10).
  // 11 is the paper's alpha/2.
  uint32_t rpg_gd = 11;
  // A cut leaves at least this percentage of R_C (a bound on one decrease), %. 50 never binds
  // alpha/2; the paper has no such bound.
  uint32_t rpg_min_dec_fac = 50;
  // Floor of R_C, Mb/s. The paper names none.
  uint32_t rpg_min_rate = 1;
  // R_C = R_T = this on the QP's first CNP instead of a cut, Mb/s; 0: the first CNP cuts like
  // the others.
  uint32_t rate_to_set_on_first_cnp = 0;
  // R_T = R_C on every cut (the paper). When false, R_T is set only if a rate increase happened
  // since the last cut (by the byte counter; by the timer only with clamp_tgt_rate_after_time_inc),
  // so back-to-back cuts keep the target at the rate before the first of them.
  bool clamp_tgt_rate = false;
  bool clamp_tgt_rate_after_time_inc = true;

  // --- Rate increase (the paper's fast recovery, additive and hyper increase) ---
  // Rate-increase timer period, us: the paper's T (55 us). Restarted by every cut; each expiry
  // is a stage of the timer counter.
  uint32_t rpg_time_reset = 300;
  // Byte counter, in 64-byte units: the paper's B (10 MB). Restarted by every cut; every B bytes
  // sent is a stage of the byte counter. 0: no byte counter.
  uint32_t rpg_byte_reset = 32767;
  // The paper's F (5): a rate increase is fast recovery while both counters are below F,
  // hyper increase once both exceed F, additive increase in between.
  uint32_t rpg_threshold = 1;
  // R_AI, Mb/s: the target's step in additive increase (the paper's 40 Mb/s).
  uint32_t rpg_ai_rate = 5;
  // R_HAI, Mb/s: the target's step in hyper increase.
  uint32_t rpg_hai_rate = 50;
  // Ceiling of the rate increase, Mb/s; when R_C reaches it the QP is no longer rate limited
  // and sends at line rate again. 0: the line rate.
  uint32_t rpg_max_rate = 0;

  bool operator==(const DcqcnParams&) const = default;
};

// mlx5's defaults. Sources: NVIDIA's "DCQCN CC Parameters" page (DOCA / MLNX_OFED
// documentation, ConnectX-4 and later); the same values as firmware defaults in mlxconfig
// queries of ConnectX cards (RPG_*_P1, DCE_TCP_*_P1 ...); rpg_max_rate from the mlx5
// driver's debugfs documentation ("rp_max_rate ... Default = 0 (full speed)",
// drivers/infiniband/hw/mlx5/cong.c).
inline constexpr DcqcnParams kDcqcnMlx5Defaults = {
    .dce_tcp_rtt = 1,                      // NVIDIA: 1 us (1..131071)
    .dce_tcp_g = 1019,                     // NVIDIA: 1019 (g = 5/1024)
    .initial_alpha_value = 1023,           // NVIDIA: 1023 (alpha = 1023/1024)
    .rate_reduce_monitor_period = 4,       // NVIDIA: 4 us
    .rpg_gd = 11,                          // NVIDIA: 11 (alpha/2)
    .rpg_min_dec_fac = 50,                 // NVIDIA: 50 %
    .rpg_min_rate = 1,                     // NVIDIA: 1 Mb/s
    .rate_to_set_on_first_cnp = 0,         // NVIDIA: 0 (off)
    .clamp_tgt_rate = false,               // mlxconfig CLAMP_TGT_RATE: False
    .clamp_tgt_rate_after_time_inc = true, // mlxconfig CLAMP_TGT_RATE_AFTER_TIME_INC: True
    .rpg_time_reset = 300,                 // mlxconfig RPG_TIME_RESET: 300 us
    .rpg_byte_reset = 32767,               // mlxconfig RPG_BYTE_RESET: 32767 (x 64 B, NVIDIA's unit: 2 MiB)
    .rpg_threshold = 1,                    // mlxconfig RPG_THRESHOLD: 1
    .rpg_ai_rate = 5,                      // mlxconfig RPG_AI_RATE: 5 Mb/s (QCN's R_AI)
    .rpg_hai_rate = 50,                    // mlxconfig RPG_HAI_RATE: 50 Mb/s (QCN's R_HAI)
    .rpg_max_rate = 0,                     // mlx5 debugfs: 0, full speed
};
static_assert(DcqcnParams{} == kDcqcnMlx5Defaults, "a default DcqcnParams is mlx5's");

// The paper's values (SIGCOMM 2015: the parameters it settles on with its fluid model, as
// public reimplementations of the paper carry them), in mlx5's units.
inline constexpr DcqcnParams kDcqcnPaperDefaults = {
    .dce_tcp_rtt = 55,                     // paper: K = 55 us (mlx5: 1 us)
    .dce_tcp_g = 1020,                     // paper: g = 1/256 = 4/1024 (mlx5: 5/1024)
    .initial_alpha_value = 1024,           // paper: alpha starts at 1 (mlx5: 1023/1024)
    .rate_reduce_monitor_period = 0,       // paper: every CNP cuts (mlx5: one cut per 4 us)
    .rpg_gd = 11,                          // paper: R_C (1 - alpha/2)
    .rpg_min_dec_fac = 0,                  // paper: no bound on one cut
    .rpg_min_rate = 1,                     // the paper names no floor; mlx5's 1 Mb/s
    .rate_to_set_on_first_cnp = 0,         // paper: the first CNP cuts like the others
    .clamp_tgt_rate = true,                // paper: R_T = R_C on every cut
    .clamp_tgt_rate_after_time_inc = true, // (implied by clamp_tgt_rate)
    .rpg_time_reset = 55,                  // paper: T = 55 us (mlx5: 300 us)
    .rpg_byte_reset = 156250,              // paper: B = 10 MB = 156250 x 64 B (mlx5: 2 MiB)
    .rpg_threshold = 5,                    // paper: F = 5 (mlx5: 1)
    .rpg_ai_rate = 40,                     // paper: R_AI = 40 Mb/s (mlx5: 5 Mb/s)
    .rpg_hai_rate = 400,                   // QCN's R_HAI = 10 R_AI (mlx5's 5 -> 50); see docs/congestion.md
    .rpg_max_rate = 0,                     // the line rate
};

// Whether `p` can drive a QP: false with a line saying why (a zero period, a gain or alpha out
// of range, a percentage over 100, a zero floor).
bool check_dcqcn_params(const DcqcnParams& p, std::string* error);

}  // namespace rocelab::cc
