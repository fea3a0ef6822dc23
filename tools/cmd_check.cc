// `rocelab check CAPTURE...`: protocol analysis per connection and per PSN
// space (src/trace): each finding with its rule id, the packet numbers and a
// line of explanation, then a summary table per connection. Exit: 0 nothing
// wrong (notices of loss, retransmission or congestion are not wrong), 1 a
// rule is broken, 2 a file cannot be read as a capture (or is damaged).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "present/json.h"
#include "tools/commands.h"
#include "trace/capture.h"
#include "trace/check.h"

namespace rocelab::tools {
namespace {

using present::Json;
using present::json_line;

struct CheckCmdOptions {
  std::vector<std::string> captures;
  bool json = false;
  bool list_rules = false;
  uint32_t mtu = 0;
  size_t max_findings = 50;
};

std::string us(trace::Nanos t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", static_cast<double>(t.count()) / 1000.0);
  return b;
}

std::string packets_text(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t n : v) s += (s.empty() ? "#" : ",#") + std::to_string(n);
  return s;
}

int run(const CheckCmdOptions& o) {
  if (o.list_rules) {
    for (const trace::Rule& r : trace::all_rules())
      std::printf("%-22s %-6s %s\n", std::string(r.id).c_str(),
                  r.severity == trace::Severity::kError ? "error" : "notice", std::string(r.what).c_str());
    return 0;
  }
  if (o.captures.empty()) {
    std::fprintf(stderr, "rocelab check: which capture?\n");
    return 2;
  }
  int status = 0;
  for (const std::string& path : o.captures) {
    trace::CheckOptions co;
    co.mtu = o.mtu;
    co.max_findings_per_rule = o.max_findings;
    trace::Analyzer an(co);
    std::string error;
    const trace::CaptureRead rd = trace::analyze_capture(path, an, &error);
    const uint64_t packets = rd.packets;
    if (!rd.readable) {
      std::fprintf(stderr, "rocelab check: %s: cannot read as a capture: %s\n", path.c_str(), error.c_str());
      status = 2;
      continue;
    }
    if (!rd.damaged.empty()) {
      std::fprintf(stderr, "rocelab check: %s: damaged capture after frame %llu: %s\n", path.c_str(),
                   static_cast<unsigned long long>(rd.frames), rd.damaged.c_str());
      status = 2;
    }
    an.finish();
    const auto spaces = an.spaces();
    auto space_name = [&](int i) {
      if (i < 0) return std::string("-");
      const auto& s = spaces[static_cast<size_t>(i)];
      return s.requester + " -> " + s.responder;
    };
    if (o.json) {
      for (const trace::Finding& f : an.findings()) {
        const Json j = {{"type", "finding"},
                        {"file", path},
                        {"rule", f.rule},
                        {"severity", f.severity == trace::Severity::kError ? "error" : "notice"},
                        {"packets", f.packets},
                        {"psn_space", space_name(f.space)},
                        {"text", f.text}};
        std::puts(json_line(j).c_str());
      }
      for (size_t i = 0; i < spaces.size(); ++i) {
        const auto& s = spaces[i];
        const Json j = {{"type", "psn_space"},
                        {"file", path},
                        {"requester", s.requester},
                        {"responder", s.responder},
                        {"transport", s.transport},
                        {"requests", s.requests},
                        {"responses", s.responses},
                        {"bytes", s.bytes},
                        {"gaps", s.gaps},
                        {"retransmissions", s.retransmissions},
                        {"network_duplicates", s.duplicates},
                        {"naks", s.naks},
                        {"rnr_naks", s.rnr_naks},
                        {"duplicate_acks", s.dup_acks},
                        {"errors", s.errors},
                        {"notices", s.notices},
                        {"rtt_samples", s.rtt_samples},
                        {"rtt_min_ns", s.rtt_min.count()},
                        {"rtt_median_ns", s.rtt_median.count()},
                        {"rtt_max_ns", s.rtt_max.count()},
                        {"recoveries", s.recoveries},
                        {"recovery_min_ns", s.recovery_min.count()},
                        {"recovery_max_ns", s.recovery_max.count()}};
        std::puts(json_line(j).c_str());
      }
      const Json j = {{"type", "result"},
                      {"file", path},
                      {"packets", packets},
                      {"errors", an.errors()},
                      {"notices", an.notices()}};
      std::puts(json_line(j).c_str());
    } else {
      std::printf("%s: %llu RoCEv2 packets\n", path.c_str(), static_cast<unsigned long long>(packets));
      for (const trace::Finding& f : an.findings())
        std::printf("  %-8s %-20s %s  %s\n", packets_text(f.packets).c_str(), std::string(f.rule).c_str(),
                    f.severity == trace::Severity::kError ? "ERROR " : "notice", f.text.c_str());
      std::printf("\n  %-44s %-4s %8s %8s %10s %5s %6s %5s %4s %4s  %s\n", "PSN space (requester -> responder)", "",
                  "requests", "response", "bytes", "gaps", "retrans", "dups", "NAKs", "RNR", "RTT min/median/max us");
      for (size_t i = 0; i < spaces.size(); ++i) {
        const auto& s = spaces[i];
        std::string rtt = s.rtt_samples ? us(s.rtt_min) + "/" + us(s.rtt_median) + "/" + us(s.rtt_max) : "-";
        if (s.recoveries)
          rtt += "  recovered " + std::to_string(s.recoveries) + "x in " + us(s.recovery_min) + ".." +
                 us(s.recovery_max) + " us";
        std::printf("  %-44s %-4s %8llu %8llu %10llu %5llu %6llu %5llu %4llu %4llu  %s\n", space_name(static_cast<int>(i)).c_str(),
                    s.transport.c_str(), static_cast<unsigned long long>(s.requests),
                    static_cast<unsigned long long>(s.responses), static_cast<unsigned long long>(s.bytes),
                    static_cast<unsigned long long>(s.gaps), static_cast<unsigned long long>(s.retransmissions),
                    static_cast<unsigned long long>(s.duplicates), static_cast<unsigned long long>(s.naks),
                    static_cast<unsigned long long>(s.rnr_naks), rtt.c_str());
        if (s.findings_not_kept)
          std::printf("  %44s (%llu more findings not listed)\n", "",
                      static_cast<unsigned long long>(s.findings_not_kept));
      }
      std::printf("\n  %llu error%s, %llu notice%s\n", static_cast<unsigned long long>(an.errors()),
                  an.errors() == 1 ? "" : "s", static_cast<unsigned long long>(an.notices()),
                  an.notices() == 1 ? "" : "s");
    }
    if (an.errors() && status == 0) status = 1;
  }
  return status;
}

}  // namespace

void register_check(CLI::App& app) {
  auto o = std::make_shared<CheckCmdOptions>();
  auto* cmd = app.add_subcommand(
      "check", "Judge captures against the RoCEv2 protocol, per connection and PSN space (docs/replay.md)");
  cmd->add_option("captures", o->captures, "pcap or pcapng files");
  cmd->add_flag("--json", o->json, "one JSON object per finding, per PSN space and per file");
  cmd->add_option("--mtu", o->mtu, "the path MTU (default: learned from First/Middle packets)")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  cmd->add_option("--max-findings", o->max_findings,
                  "list at most N findings per rule and PSN space, count the rest (0: list all; default 50)");
  cmd->add_flag("--list-rules", o->list_rules, "print every rule with its severity and what it checks");
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace rocelab::tools
