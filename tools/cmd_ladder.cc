// `rocelab ladder CAPTURE`: the ladder diagram of a capture (any capture
// `rocelab decode` reads): one lane per address, an arrow per RoCEv2 packet.
// Exit: 0 drawn, 1 the capture is damaged (what was read is drawn) or holds
// undecodable RoCEv2 packets, 2 unreadable / not a capture / bad arguments.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "sim/capture_ladder.h"
#include "sim/ladder.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

struct LadderOptions {
  std::string capture, svg, html;
  size_t max_packets = 2000;
};

int run(const LadderOptions& o) {
  sim::CaptureLadder cl;
  std::string error;
  if (!sim::ladder_from_capture(o.capture, o.max_packets, &cl, &error)) {
    std::fprintf(stderr, "rocelab ladder: %s\n", error.c_str());
    return 2;
  }
  std::fputs(sim::render_text(cl.ladder).c_str(), stdout);
  std::printf("\n%zu RoCEv2 packet%s", cl.roce_packets, cl.roce_packets == 1 ? "" : "s");
  if (cl.not_drawn) std::printf(", %zu not drawn (--max %zu)", cl.not_drawn, o.max_packets);
  if (cl.other_frames) std::printf(", %zu other frame%s skipped", cl.other_frames, cl.other_frames == 1 ? "" : "s");
  if (cl.bad_packets) std::printf(", %zu undecodable", cl.bad_packets);
  std::printf("\n");
  if (!o.svg.empty()) {
    std::ofstream f(o.svg, std::ios::binary);
    f << sim::render_svg(cl.ladder);
    if (!f.flush()) {
      std::fprintf(stderr, "rocelab ladder: cannot write %s\n", o.svg.c_str());
      return 2;
    }
  }
  if (!o.html.empty()) {
    std::ofstream f(o.html, std::ios::binary);
    f << sim::render_html(cl.ladder, o.capture);
    if (!f.flush()) {
      std::fprintf(stderr, "rocelab ladder: cannot write %s\n", o.html.c_str());
      return 2;
    }
  }
  if (!cl.damaged.empty()) {
    std::fprintf(stderr, "rocelab ladder: %s: the capture is damaged after %zu packets: %s\n", o.capture.c_str(),
                 cl.roce_packets + cl.other_frames + cl.bad_packets, cl.damaged.c_str());
    return 1;
  }
  return cl.bad_packets ? 1 : 0;
}

}  // namespace

void register_ladder(CLI::App& app) {
  auto o = std::make_shared<LadderOptions>();
  auto* cmd = app.add_subcommand("ladder", "Draw a capture as a ladder diagram: a lane per address, an arrow per packet");
  cmd->add_option("capture", o->capture, "a pcap or pcapng file")->required();
  cmd->add_option("--svg", o->svg, "draw the ladder as SVG into FILE");
  cmd->add_option("--html", o->html, "write a self-contained step-through page (open it in a browser; #step=N)");
  cmd->add_option("--max", o->max_packets, "draw at most N packets (the rest are counted)")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace rocelab::tools
