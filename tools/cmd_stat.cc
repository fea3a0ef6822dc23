// `rocelab stat`: every emulated device of the processes running under
// `rocelab run` on this host (network namespace), read from their registry
// entries (src/stat): per device its address, objects and counters, per QP its
// state, peer, PSNs and retries. `--json` prints stat.proto's Host; `--watch`
// refreshes; `rocelab stat qp N` shows one QP in full.
// Exit: 0 all read; 1 an entry could not be read (another rocelab version, no
// answer: said on stderr, the others are shown) or `qp N` found no such QP;
// 2 bad arguments or a registry directory that cannot be read.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>

#include "host/runtime_dir.h"
#include "present/fields.h"
#include "stat/client.h"
#include "stat/registry.h"
#include "stat/report.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

struct StatOptions {
  bool json = false;
  bool watch = false;
  double interval = 1.0;
  unsigned count = 0;  // refreshes with --watch; 0: until interrupted
  int timeout_ms = 1000;
  std::string qpn;  // `stat qp N`
};

// One reading of the registry; *rc becomes 1 on a problem and 2 when it
// cannot be read. Stale entries are removed and said on stderr, once each.
bool read_host(const StatOptions& o, stat::Host* out, int* rc) {
  auto net = host::net_dir();
  if (!net) {
    std::fprintf(stderr, "rocelab stat: the runtime directory: %s\n", net.error().message().c_str());
    *rc = 2;
    return false;
  }
  const std::string dir = stat::registry_dir(*net);
  auto entries = stat::read_registry(dir, o.timeout_ms);
  if (!entries) {
    std::fprintf(stderr, "rocelab stat: %s: %s\n", dir.c_str(), entries.error().message().c_str());
    *rc = 2;
    return false;
  }
  for (const stat::Entry& e : *entries) {
    if (e.status == stat::Entry::Status::kStale) {
      std::fprintf(stderr, "rocelab stat: note: %s\n", e.message.c_str());
    } else if (e.status != stat::Entry::Status::kLive) {
      std::fprintf(stderr, "rocelab stat: %s\n", e.message.c_str());
      *rc = 1;
    }
  }
  *out = stat::host_of(*entries);
  return true;
}

bool parse_qpn(const std::string& text, uint32_t* out) {
  try {
    size_t used = 0;
    unsigned long v = std::stoul(text, &used, 0);  // decimal or 0x...
    if (used != text.size() || v > 0xFFFFFF) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

int show_once(const StatOptions& o) {
  int rc = 0;
  stat::Host h;
  if (!read_host(o, &h, &rc)) return rc;
  if (!o.qpn.empty()) {
    uint32_t qpn = 0;
    if (!parse_qpn(o.qpn, &qpn)) {
      std::fprintf(stderr, "rocelab stat qp: %s is not a QP number (decimal or 0x hex, 24 bits)\n",
                   o.qpn.c_str());
      return 2;
    }
    if (o.json) {
      // The processes and devices that hold such a QP, with that QP alone.
      stat::Host only;
      *only.mutable_problems() = h.problems();
      for (const stat::Process& p : h.processes()) {
        stat::Process kept = p;
        kept.clear_devices();
        for (const stat::Device& d : p.devices()) {
          stat::Device dk = d;
          dk.clear_qps();
          for (const stat::Qp& q : d.qps())
            if (q.qpn() == qpn) *dk.add_qps() = q;
          if (dk.qps_size() > 0) *kept.add_devices() = dk;
        }
        if (kept.devices_size() > 0) *only.add_processes() = kept;
      }
      std::printf("%s\n", stat::host_json(only).c_str());
      if (only.processes().empty()) rc = 1;
      return rc;
    }
    const std::string text = stat::qp_detail(h, qpn);
    if (text.empty()) {
      std::fprintf(stderr, "rocelab stat qp: no QP %s on this host\n", present::qpn_text(qpn).c_str());
      return 1;
    }
    std::fputs(text.c_str(), stdout);
    return rc;
  }
  if (o.json) {
    std::printf("%s\n", stat::host_json(h).c_str());
  } else if (h.processes().empty()) {
    std::printf("no process on this host has an emulated device open\n");
  } else {
    std::fputs(stat::host_table(h).c_str(), stdout);
  }
  return rc;
}

int run_stat(const StatOptions& o) {
  if (!o.watch) return show_once(o);
  const bool tty = ::isatty(STDOUT_FILENO) && !o.json;
  int worst = 0;
  for (unsigned i = 0; o.count == 0 || i < o.count; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.interval));
    if (tty) std::fputs("\033[H\033[2J", stdout);  // home, clear: a table in place
    if (!o.json) {
      const std::time_t now = std::time(nullptr);
      char when[32];
      std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&now));
      std::printf("rocelab stat, every %gs: %s\n", o.interval, when);
    }
    const int rc = show_once(o);
    if (rc == 2) return rc;
    if (!tty) std::printf("\n");
    std::fflush(stdout);
    worst = std::max(worst, rc);
  }
  return worst;
}

}  // namespace

void register_stat(CLI::App& app) {
  auto o = std::make_shared<StatOptions>();
  CLI::App* cmd = app.add_subcommand(
      "stat", "Every emulated device of the programs running under `rocelab run` on this host: QPs, CQs, "
              "MRs, SRQs, multicast groups, counters");
  cmd->add_flag("--json", o->json, "stat.proto's Host in Protobuf's JSON mapping (with --watch: one per line)");
  CLI::Option* watch = cmd->add_flag("--watch", o->watch, "Refresh until interrupted (or --count times)");
  cmd->add_option("--interval", o->interval, "Seconds between refreshes with --watch")
      ->check(CLI::Range(0.05, 3600.0))
      ->needs(watch);
  cmd->add_option("--count", o->count, "With --watch: this many refreshes, then exit")->needs(watch);
  cmd->add_option("--timeout-ms", o->timeout_ms, "How long to wait for each process's answer")
      ->check(CLI::Range(1, 60000));
  cmd->footer(
      "Exit: 0 every process answered; 1 one could not be read (another rocelab version, no answer) or qp N "
      "found no such QP; 2 bad arguments or a runtime directory that cannot be read or trusted. docs/stat.md.");
  CLI::App* qp = cmd->add_subcommand("qp", "One QP in full: rocelab stat qp N (decimal or 0x hex)");
  qp->add_option("qpn", o->qpn, "The QP number")->required();
  qp->fallthrough();  // `stat qp N --json`: the options of stat after the number
  cmd->callback([o] { exit_code() = run_stat(*o); });
}

}  // namespace rocelab::tools
