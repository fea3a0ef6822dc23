// `rocelab replay CAPTURE`: re-enact the requester side of a captured RC/UC
// connection against a live emulated responder and compare its answers with
// the capture's (src/replay; docs/replay.md, "Replay"). Exit: 0 no behavioural
// difference (policy and network differences are listed, not wrong), 1 some,
// 2 a file that cannot be read as a capture (or is damaged), bad arguments, or
// a capture without a connection to replay.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "present/fields.h"
#include "present/json.h"
#include "replay/replay.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

using present::Json;
using present::json_line;

struct ReplayCmdOptions {
  std::string capture, role = "requester", qp, from, pcap, to_scenario;
  double speed = 1.0;
  bool afap = false, json = false;
  uint32_t mtu = 0;
  size_t max_differences = 50;
  uint64_t max_memory_mib = 1024;
  uint64_t max_span_gib = 1024;
};

// A connection as the options that choose it, then what it is:
// "--qp 0x000011 --from 10.0.0.1  10.0.0.1 qp 0x000011 -> ...  RC, 12 requests".
std::string choice_text(const replay::ConnectionChoice& c) {
  return "--qp " + present::qpn_text(c.qpn) + (c.from.empty() ? "" : " --from " + c.from) + "  " + c.text;
}

// The library's error, and the option that moves the limit it names.
std::string error_text(const replay::ReplayResult& r) {
  if (r.limit == "max_memory") return r.error + " (set with --max-memory MIB)";
  if (r.limit == "max_span") return r.error + " (set with --max-span GIB)";
  return r.error;
}

int run(const ReplayCmdOptions& c) {
  if (c.role != "requester") {
    std::fprintf(stderr, "rocelab replay: --role %s is not built; only the requester side is replayed\n",
                 c.role.c_str());
    return 2;
  }
  replay::ReplayOptions o;
  o.capture = c.capture;
  if (!c.qp.empty()) {
    size_t used = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(c.qp, &used, 0);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != c.qp.size() || v > 0xFFFFFF) {
      std::fprintf(stderr, "rocelab replay: --qp %s is not a QP number (24 bits, decimal or 0x...)\n", c.qp.c_str());
      return 2;
    }
    o.qp = static_cast<uint32_t>(v);
  }
  o.from = c.from;
  o.speed = c.speed;
  o.as_fast_as_possible = c.afap;
  o.pcap = c.pcap;
  o.mtu = c.mtu;
  o.max_listed = c.max_differences;
  o.max_memory = std::min<uint64_t>(c.max_memory_mib, uint64_t{1} << 40) << 20;
  o.max_span = std::min<uint64_t>(c.max_span_gib, uint64_t{1} << 30) << 30;
  // A progress line on a terminal, for long captures.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto last = std::chrono::steady_clock::now();
  auto begin = last;
  bool drew = false, started = false;
  if (tty) {
    o.progress = [&](uint64_t done, uint64_t total) {
      if (total < 100000) return;
      const auto now = std::chrono::steady_clock::now();
      if (!started) {  // the rate of the replay pass, from its first frames
        started = true;
        begin = now;
        return;
      }
      if (done < total && now - last < std::chrono::milliseconds(250)) return;
      last = now;
      const double s = std::chrono::duration<double>(now - begin).count();
      std::fprintf(stderr, "\rrocelab replay: %llu / %llu frames, %.0f frames/s ", static_cast<unsigned long long>(done),
                   static_cast<unsigned long long>(total), s > 0 ? static_cast<double>(done) / s : 0.0);
      drew = true;
    };
  }
  if (!c.to_scenario.empty()) {
    const replay::ReplayResult r = replay::to_scenario(o, c.to_scenario);
    if (r.status == 2) {
      std::fprintf(stderr, "rocelab replay: %s: %s\n", c.capture.c_str(), error_text(r).c_str());
      for (const replay::ConnectionChoice& s : r.choices) std::fprintf(stderr, "  %s\n", choice_text(s).c_str());
      return 2;
    }
    std::printf("%s: %llu work requests of %s (%s) written to %s", c.capture.c_str(),
                static_cast<unsigned long long>(r.requests), r.connection.c_str(), r.transport.c_str(),
                c.to_scenario.c_str());
    if (r.requests_skipped) std::printf(" (the first ones; %llu more left out)", static_cast<unsigned long long>(r.requests_skipped));
    std::printf("\n  run it: rocelab sim %s\n", c.to_scenario.c_str());
    return 0;
  }
  bool header = false;
  o.on_difference = [&](const replay::Difference& d) {
    if (drew) {
      std::fputs("\r\033[K", stderr);
      drew = false;
    }
    if (c.json) {
      const Json j = {{"type", "difference"},
                      {"file", c.capture},
                      {"class", replay::to_string(d.cls)},
                      {"kind", d.kind},
                      {"psn", d.psn},
                      {"frame", d.frame},
                      {"capture", d.capture},
                      {"live", d.live},
                      {"text", d.text}};
      std::puts(json_line(j).c_str());
      return;
    }
    if (!header) {
      header = true;
      std::printf("%s: differences (PSN+: relative to the connection's first message)\n", c.capture.c_str());
      std::printf("  %-8s %-8s %-9s %-20s %s\n", "frame", "PSN+", "class", "kind", "capture | live: why");
    }
    std::printf("  %-8s %-8lld %-9s %-20s capture: %s | live: %s: %s\n",
                d.frame ? ("#" + std::to_string(d.frame)).c_str() : "-", static_cast<long long>(d.psn),
                std::string(replay::to_string(d.cls)).c_str(), std::string(d.kind).c_str(), d.capture.c_str(),
                d.live.c_str(), d.text.c_str());
  };
  const replay::ReplayResult r = replay::replay_capture(o);
  if (drew) std::fputs("\r\033[K", stderr);
  if (r.status == 2 && r.requests == 0) {
    std::fprintf(stderr, "rocelab replay: %s: %s\n", c.capture.c_str(), error_text(r).c_str());
    if (!r.choices.empty()) {
      std::fprintf(stderr, "the connections (requester -> responder):\n");
      for (const replay::ConnectionChoice& s : r.choices) std::fprintf(stderr, "  %s\n", choice_text(s).c_str());
    }
    return 2;
  }
  if (!r.damaged.empty())
    std::fprintf(stderr, "rocelab replay: %s: damaged capture: %s (replayed up to there)\n", c.capture.c_str(),
                 r.damaged.c_str());
  if (!r.error.empty() && r.status == 2)
    std::fprintf(stderr, "rocelab replay: %s: %s\n", c.capture.c_str(), error_text(r).c_str());
  const double rate = r.wall_seconds > 0 ? static_cast<double>(r.frames) / r.wall_seconds : 0;
  if (c.json) {
    const Json j = {{"type", "result"},
                    {"file", c.capture},
                    {"connection", r.connection},
                    {"transport", r.transport},
                    {"frames", r.frames},
                    {"packets", r.packets},
                    {"requests", r.requests},
                    {"requests_skipped", r.requests_skipped},
                    {"captured_responses", r.captured_responses},
                    {"live_responses", r.live_responses},
                    {"reads_compared", r.reads_compared},
                    {"reads_undetermined", r.reads_undetermined},
                    {"read_bytes_compared", r.read_bytes_compared},
                    {"atomics_compared", r.atomics_compared},
                    {"atomics_undetermined", r.atomics_undetermined},
                    {"behaviour", r.behaviour},
                    {"policy", r.policy},
                    {"network", r.network},
                    {"not_listed", r.not_listed},
                    {"mtu", r.mtu},
                    {"live_qpn", r.live_qpn},
                    {"mrs", r.mrs},
                    {"mr_bytes", r.mr_bytes},
                    {"memory_written", r.memory_written},
                    {"virtual_time_ns", r.virtual_time.count()},
                    {"status", r.status}};
    std::puts(json_line(j).c_str());
    return r.status;
  }
  std::printf("%s%s: the requests of one connection replayed to a live emulated responder\n", header ? "\n" : "",
              c.capture.c_str());
  std::printf("  connection   %s (%s), the capture's PSN %u is PSN 0 here\n", r.connection.c_str(),
              r.transport.c_str(), r.start_psn);
  if (r.other_direction) std::printf("  other way    %s\n", choice_text(*r.other_direction).c_str());
  std::printf("  responder    live QP 0x%06x, MTU %u, %llu MR%s spanning %llu bytes (%llu bytes of pages written), "
              "%llu receives posted\n",
              r.live_qpn, r.mtu, static_cast<unsigned long long>(r.mrs), r.mrs == 1 ? "" : "s",
              static_cast<unsigned long long>(r.mr_bytes), static_cast<unsigned long long>(r.memory_written),
              static_cast<unsigned long long>(r.receives));
  std::printf("  requests     %llu sent", static_cast<unsigned long long>(r.requests));
  if (r.requests_skipped)
    std::printf(", %llu skipped (before the first message start)", static_cast<unsigned long long>(r.requests_skipped));
  std::printf("\n  responses    %llu in the capture, %llu live\n", static_cast<unsigned long long>(r.captured_responses),
              static_cast<unsigned long long>(r.live_responses));
  std::printf("  READ data    %llu responses compared (%llu bytes the capture determines), %llu not determined\n",
              static_cast<unsigned long long>(r.reads_compared), static_cast<unsigned long long>(r.read_bytes_compared),
              static_cast<unsigned long long>(r.reads_undetermined));
  std::printf("  atomics      %llu original values compared, %llu not determined by the capture\n",
              static_cast<unsigned long long>(r.atomics_compared), static_cast<unsigned long long>(r.atomics_undetermined));
  char gaps[64];
  std::snprintf(gaps, sizeof gaps, "the capture's gaps / %g", c.speed);
  std::printf("  time         %.3f ms on the fabric's clock (%s), %.3f s here, %.0f frames/s\n",
              static_cast<double>(r.virtual_time.count()) / 1e6,
              c.afap ? "as fast as possible" : gaps,
              r.wall_seconds, rate);
  std::printf("\n  %llu behavioural, %llu policy, %llu network difference%s",
              static_cast<unsigned long long>(r.behaviour), static_cast<unsigned long long>(r.policy),
              static_cast<unsigned long long>(r.network), r.network == 1 ? "" : "s");
  if (r.not_listed) std::printf(" (%llu not listed)", static_cast<unsigned long long>(r.not_listed));
  std::printf("\n");
  return r.status;
}

}  // namespace

void register_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayCmdOptions>();
  auto* cmd = app.add_subcommand(
      "replay", "Re-enact the requests of a captured connection against a live emulated responder and compare (docs/replay.md)");
  cmd->add_option("capture", o->capture, "pcap or pcapng file")->required();
  cmd->add_option("--role", o->role, "which side replay plays: requester (default; the live peer is the responder)");
  cmd->add_option("--qp", o->qp, "the connection: the QPN of its requester (or responder), decimal or 0x...");
  cmd->add_option("--from", o->from, "the connection's requester address (when two hosts use the same --qp)");
  cmd->add_option("--speed", o->speed, "send at the capture's gaps divided by X (default 1; virtual time)")
      ->check(CLI::Range(1e-6, 1e6));
  cmd->add_flag("--as-fast-as-possible", o->afap, "send each request as soon as the previous one is answered");
  cmd->add_option("--pcap", o->pcap, "record the live exchange (as the live responder sees it)");
  cmd->add_option("--to-scenario", o->to_scenario,
                  "instead of replaying, write the connection's work requests as a scenario for rocelab sim");
  cmd->add_flag("--json", o->json, "one JSON object per difference and one for the result");
  cmd->add_option("--mtu", o->mtu, "the path MTU (default: learned from the capture)")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  cmd->add_option("--max-differences", o->max_differences,
                  "list at most N differences of each kind (0: all; default 50); the rest are counted");
  cmd->add_option("--max-memory", o->max_memory_mib,
                  "MiB of pages the replay may write (the live MRs and their shadows; default 1024); with "
                  "--to-scenario, MiB the scenario's MRs may take");
  cmd->add_option("--max-span", o->max_span_gib,
                  "GiB of addresses the live MRs may span together (reserved, not allocated; default 1024)");
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace rocelab::tools
