// `rocelab sim SCENARIO`: runs a teaching scenario (proto/scenario.proto, as
// textproto) deterministically on the simulated fabric and prints its ladder
// diagram; on a switched network (a topology) also the network's totals, and
// on request its time series as JSON lines (--json, instead of the text) and
// as line charts (--plots, and on the --html page). Exit: 0 every expectation
// held, 1 one did not (expected vs got is printed), 2 the scenario does not
// parse, names an unknown object, or an output cannot be written.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "plot/line_chart.h"
#include "present/json.h"
#include "sim/fabric_report.h"
#include "sim/ladder.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

struct SimCmdOptions {
  std::string scenario;
  std::string pcap, events, svg, html, plots;
  bool quiet = false;
  bool json = false;
  bool step = false;
};

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f.flush());
}

int run(const SimCmdOptions& o) {
  std::string error;
  auto sc = sim::load_scenario(o.scenario, &error);
  if (!sc) {
    std::fprintf(stderr, "rocelab sim: %s\n", error.c_str());
    return 2;
  }
  sim::SimOptions opt;
  opt.pcap_path = o.pcap;
  opt.events_path = o.events;
  sim::SimResult res;
  if (!sim::run_scenario(*sc, opt, &res, &error)) {
    std::fprintf(stderr, "rocelab sim: %s\n", error.c_str());
    return 2;
  }
  if (!o.plots.empty() && !res.fabric) {
    std::fprintf(stderr, "rocelab sim: %s has no topology: no network to plot (--plots)\n", o.scenario.c_str());
    return 2;
  }
  if (o.json) {
    if (res.fabric)
      for (const present::Json& j : sim::fabric_json(*res.fabric)) std::printf("%s\n", present::json_line(j).c_str());
    std::printf("%s\n", present::json_line({{"type", "result"},
                                            {"expectations", res.expectations},
                                            {"failures", res.failures}})
                             .c_str());
  } else if (!o.quiet) {
    if (!sc->s.title().empty()) std::printf("%s\n\n", sc->s.title().c_str());
    const std::string ladder = sim::render_text(res.ladder);
    if (!o.step) {
      std::fputs(ladder.c_str(), stdout);
    } else {
      // One line of the ladder per Enter ("q" and Enter: the rest at once). On
      // a terminal the Enter itself ends the line; from a pipe we end it.
      const bool tty = ::isatty(0) != 0;
      bool rest = false;
      size_t at = ladder.find('\n') + 1;
      std::fwrite(ladder.data(), 1, at, stdout);
      while (at < ladder.size()) {
        const size_t nl = ladder.find('\n', at);
        const size_t end = nl == std::string::npos ? ladder.size() : nl + 1;
        std::fwrite(ladder.data() + at, 1, end - at - 1, stdout);
        std::fflush(stdout);
        at = end;
        if (!rest) {
          char line[64];
          if (!std::fgets(line, sizeof line, stdin) || line[0] == 'q') rest = true;
          if (rest || !tty) std::fputc('\n', stdout);
        } else {
          std::fputc('\n', stdout);
        }
      }
    }
    if (res.fabric) std::printf("\n%s", sim::fabric_text(*res.fabric).c_str());
  }
  if (!o.svg.empty() && !write_file(o.svg, sim::render_svg(res.ladder))) {
    std::fprintf(stderr, "rocelab sim: cannot write %s\n", o.svg.c_str());
    return 2;
  }
  if (!o.plots.empty() && !write_file(o.plots, plot::render_svg_stack(sim::fabric_charts(*res.fabric)))) {
    std::fprintf(stderr, "rocelab sim: cannot write %s\n", o.plots.c_str());
    return 2;
  }
  if (!o.html.empty()) {
    sim::HtmlExtras extras;
    if (res.fabric) {
      extras.heading = "The network";
      extras.text = sim::fabric_text(*res.fabric);
      const auto charts = sim::fabric_charts(*res.fabric);
      const auto ids = sim::fabric_chart_ids();
      for (size_t i = 0; i < charts.size(); ++i) {
        plot::SvgOptions so;
        so.cursor = true;
        so.id = ids[i] + "-svg";
        extras.figures.push_back({ids[i], plot::render_svg(charts[i], so)});
      }
    }
    const std::string title = sc->s.title().empty() ? o.scenario : sc->s.title();
    if (!write_file(o.html, sim::render_html(res.ladder, title, res.fabric ? &extras : nullptr))) {
      std::fprintf(stderr, "rocelab sim: cannot write %s\n", o.html.c_str());
      return 2;
    }
  }
  if (o.json) return res.failures.empty() ? 0 : 1;
  if (res.failures.empty()) {
    std::printf("\n%zu expectation%s, all hold\n", res.expectations, res.expectations == 1 ? "" : "s");
    return 0;
  }
  std::printf("\n%zu of %zu expectations failed:\n", res.failures.size(), res.expectations);
  for (const auto& f : res.failures) std::printf("  %s\n", f.c_str());
  return 1;
}

}  // namespace

void register_sim(CLI::App& app) {
  auto o = std::make_shared<SimCmdOptions>();
  auto* cmd = app.add_subcommand(
      "sim", "Run a teaching scenario (textproto, see docs/labs) on the simulated fabric and draw its ladder");
  cmd->add_option("scenario", o->scenario, "the scenario file (.textproto)")->required();
  cmd->add_option("--pcap", o->pcap, "write every packet to this pcap file");
  cmd->add_option("--events", o->events, "write the engine's event log (rocelab events reads it)");
  cmd->add_option("--svg", o->svg, "draw the ladder as SVG into FILE");
  cmd->add_option("--html", o->html, "write a self-contained step-through page (open it in a browser; #step=N)");
  cmd->add_option("--plots", o->plots,
                  "draw the network's time series (rate, queues, pauses, CNPs, ECN marks) as SVG charts into FILE");
  cmd->add_flag("--json", o->json,
                "print JSON lines instead of the text: per port, flow and node, the network's totals and time "
                "series (with a topology), and the result");
  cmd->add_flag("-q,--quiet", o->quiet, "print only whether the expectations hold");
  cmd->add_flag("--step", o->step, "print the ladder one line per Enter (q: the rest at once)");
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace rocelab::tools
