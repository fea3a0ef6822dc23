// The factory, the algorithm names, and kNone (a QP at line rate forever).
#include "cc/rate_control.h"

#include "cc/dcqcn.h"

namespace rocelab::cc {
namespace {

class LineRate final : public RateControl {
 public:
  explicit LineRate(uint64_t line_rate_bps) : rate_(line_rate_bps) {}
  std::string_view name() const override { return "none"; }
  uint64_t rate_bps() const override { return rate_; }
  void on_cnp(Nanos) override { ++counters_.rp_cnp_ignored; }
  void on_sent(Nanos, uint32_t) override {}
  Nanos next_timer() const override { return Nanos::max(); }
  void on_timer(Nanos) override {}
  const Counters& counters() const override { return counters_; }

 private:
  uint64_t rate_;
  Counters counters_;
};

}  // namespace

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kNone:
      return "none";
    case Algorithm::kDcqcn:
      return "dcqcn";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view text, std::string* error) {
  for (Algorithm a : {Algorithm::kNone, Algorithm::kDcqcn}) {
    if (text == algorithm_name(a)) return a;
  }
  if (error) *error = "unknown congestion control '" + std::string(text) + "' (none, dcqcn)";
  return std::nullopt;
}

std::unique_ptr<RateControl> make_rate_control(Algorithm algorithm, const DcqcnParams& dcqcn,
                                               uint64_t line_rate_bps, std::string* error) {
  if (line_rate_bps == 0) {
    if (error) *error = "line rate must be above 0 b/s";
    return nullptr;
  }
  switch (algorithm) {
    case Algorithm::kNone:
      return std::make_unique<LineRate>(line_rate_bps);
    case Algorithm::kDcqcn:
      if (!check_dcqcn_params(dcqcn, error)) return nullptr;
      if (static_cast<double>(dcqcn.rpg_min_rate) * 1e6 > static_cast<double>(line_rate_bps)) {
        if (error) *error = "rpg_min_rate is above the line rate";
        return nullptr;
      }
      return std::make_unique<Dcqcn>(dcqcn, line_rate_bps);
  }
  if (error) *error = "unknown congestion control";
  return nullptr;
}

}  // namespace rocelab::cc
