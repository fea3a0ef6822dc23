// The DCQCN fluid model's integration and its fixed point (cc/fluid_model.h).
#include "cc/fluid_model.h"

#include <algorithm>
#include <cmath>

namespace rocelab::cc {
namespace {

using std::chrono::nanoseconds;

double seconds(nanoseconds t) { return std::chrono::duration<double>(t).count(); }

// The parameters in the model's units: packets, packets/s, seconds.
struct Model {
  explicit Model(const FluidParams& p)
      : n(p.flows),
        pkt_bits(8.0 * p.packet_bytes),
        c(p.capacity_bps / pkt_bits),
        line(p.line_rate_bps / pkt_bits),
        min_rate(p.dcqcn.rpg_min_rate * 1e6 / pkt_bits),
        kmin(p.kmin_bytes / p.packet_bytes),
        kmax(p.kmax_bytes / p.packet_bytes),
        pmax(p.pmax),
        tau(seconds(p.cnp_interval)),
        tau_alpha(seconds(std::chrono::microseconds(p.dcqcn.dce_tcp_rtt))),
        timer(seconds(std::chrono::microseconds(p.dcqcn.rpg_time_reset))),
        bytes(p.dcqcn.rpg_byte_reset * 64.0 / p.packet_bytes),
        f(p.dcqcn.rpg_threshold),
        g((1024.0 - p.dcqcn.dce_tcp_g) / 1024.0),
        r_ai(p.dcqcn.rpg_ai_rate * 1e6 / pkt_bits),
        cut_scale(std::ldexp(1.0, 10 - static_cast<int>(p.dcqcn.rpg_gd))),
        alpha0(p.dcqcn.initial_alpha_value / 1024.0) {}

  double n, pkt_bits, c, line, min_rate, kmin, kmax, pmax;
  double tau, tau_alpha, timer, bytes, f, g, r_ai, cut_scale, alpha0;

  double marking(double q) const {
    if (q <= kmin) return 0;
    if (q <= kmax) return (q - kmin) / (kmax - kmin) * pmax;
    return 1;
  }
};

// The probability terms of the equations at marking probability p and delayed rate r, in a
// form that stays accurate for small p (log1p / expm1) and takes the limits at p = 0, p = 1
// and tau = 0 (a CNP for every marked packet).
struct Terms {
  double cnps;    // A / tau: CNPs per second
  double alpha;   // 1 - (1-p)^(tau' r): alpha's input
  double b, b2;   // b, b'
  double d, d2;   // d, d'
};

Terms terms(const Model& m, double p, double r) {
  Terms t{};
  if (p <= 0) {
    t.b = t.b2 = m.bytes > 0 ? 1 / m.bytes : 0;
    t.d = t.d2 = r > 0 ? 1 / (m.timer * r) : 0;
    return t;
  }
  if (p >= 1) {
    t.cnps = m.tau > 0 ? 1 / m.tau : r;
    t.alpha = 1;
    return t;
  }
  const double l = std::log1p(-p);  // log(1 - p), negative
  t.cnps = m.tau > 0 ? -std::expm1(m.tau * r * l) / m.tau : -r * l;
  t.alpha = -std::expm1(m.tau_alpha * r * l);
  if (m.bytes > 0) {
    t.b = p / std::expm1(-m.bytes * l);
    t.b2 = t.b * std::exp(m.f * m.bytes * l);
  }
  if (r > 0) {
    t.d = p / std::expm1(-m.timer * r * l);
    t.d2 = t.d * std::exp(m.f * m.timer * r * l);
  }
  return t;
}

}  // namespace

std::vector<FluidSample> run_fluid_model(const FluidParams& params, nanoseconds duration,
                                         nanoseconds sample_every) {
  const Model m(params);
  const nanoseconds step = std::max(params.step, nanoseconds(1));
  const double h = seconds(step);
  const int64_t steps = duration / step;
  const int64_t every = std::max<int64_t>(1, sample_every / step);
  // The delayed terms read R_C and q from this many steps back (a ring of past values).
  const size_t delay = static_cast<size_t>(params.feedback_delay / step);

  double rc = m.line, rt = m.line, alpha = m.alpha0, q = 0;
  std::vector<double> past_rc(delay + 1, rc), past_q(delay + 1, q);

  std::vector<FluidSample> out;
  out.reserve(static_cast<size_t>(steps / every) + 1);
  auto sample = [&](int64_t i) {
    out.push_back({step * i, rc * m.pkt_bits, rt * m.pkt_bits, alpha, q * params.packet_bytes,
                   m.marking(q)});
  };
  for (int64_t i = 0; i <= steps; ++i) {
    if (i % every == 0) sample(i);
    if (i == steps) break;
    const size_t now_slot = static_cast<size_t>(i) % (delay + 1);
    past_rc[now_slot] = rc;
    past_q[now_slot] = q;
    // Slot i - delay: with the ring's size delay + 1 that is the slot written next.
    const size_t old_slot = (now_slot + 1) % (delay + 1);
    const double rc_d = delay ? past_rc[old_slot] : rc;
    const double p = m.marking(delay ? past_q[old_slot] : q);
    const Terms t = terms(m, p, rc_d);

    double d_alpha = m.g / m.tau_alpha * (t.alpha - alpha);
    double d_rt = -(rt - rc) * t.cnps + m.r_ai * rc_d * (t.b2 + t.d2);
    double d_rc = -rc * alpha * m.cut_scale * t.cnps + (rt - rc) / 2 * rc_d * (t.b + t.d);
    double d_q = m.n * rc - m.c;

    alpha = std::clamp(alpha + h * d_alpha, 0.0, 1.0);
    rt = std::min(rt + h * d_rt, m.line);
    rc = std::clamp(rc + h * d_rc, m.min_rate, m.line);
    rt = std::max(rt, rc);  // the equations keep R_T >= R_C; the floor of R_C might not
    q = std::max(q + h * d_q, 0.0);
  }
  return out;
}

std::optional<FluidFixedPoint> fluid_fixed_point(const FluidParams& params) {
  const Model m(params);
  if (m.n * m.line <= m.c) {
    // No queue builds, nothing is marked: line rate, and alpha has decayed to 0.
    return FluidFixedPoint{0, 0, params.line_rate_bps, params.line_rate_bps, 0};
  }
  const double r = m.c / m.n;
  // f(p) = 2s alpha(p) (A(p)/tau)^2 - R_AI r (b' + d')(b + d), s the cut scale (1/2 in the
  // paper, where this is the header's equation divided by tau^2): negative as p -> 0 (the
  // left side vanishes as p^3), positive as p -> 1 (the increase terms vanish). Written
  // with A/tau so that tau = 0 is its limit.
  auto f = [&](double p) {
    const Terms t = terms(m, p, r);
    return 2 * m.cut_scale * t.alpha * t.cnps * t.cnps - m.r_ai * r * (t.b2 + t.d2) * (t.b + t.d);
  };
  double lo = 0, hi = 1;
  for (int i = 0; i < 200 && hi - lo > 1e-16; ++i) {
    const double mid = (lo + hi) / 2;
    (f(mid) < 0 ? lo : hi) = mid;
  }
  const double p = (lo + hi) / 2;
  if (p > m.pmax) return std::nullopt;
  const Terms t = terms(m, p, r);
  // R_T - R_C from dR_T/dt = 0.
  const double gap = m.r_ai * r * (t.b2 + t.d2) / t.cnps;
  FluidFixedPoint fp;
  fp.p = p;
  fp.queue_bytes = (m.kmin + p / m.pmax * (m.kmax - m.kmin)) * params.packet_bytes;
  fp.rate_bps = r * m.pkt_bits;
  fp.target_bps = (r + gap) * m.pkt_bits;
  fp.alpha = t.alpha;
  return fp;
}

}  // namespace rocelab::cc
