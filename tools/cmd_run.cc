// `rocelab run [options] [fault options] -- PROG ARGS...`: runs an unmodified verbs program on
// emulated RoCE devices. Sets LD_PRELOAD to the shim (build/lib next to
// build/bin) and the ROCELAB_* configuration (docs/shim.md), then execs the
// program, so its exit status is rocelab's.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "emu/transport/fault_config.h"
#include "tools/commands.h"
#include "tools/fault_options.h"
#include "verbs_shim/config.h"

namespace rocelab::tools {
namespace {

struct RunOptions {
  std::string devices;
  std::string ip;
  uint32_t mtu = 0;
  std::string pcap;
  std::string events;
  emu::FaultConfig faults;
  bool explain = false;
  bool retry_forever = false;
  bool counters = false;
  bool wire_exact = false;
  bool share_address = false;
  std::string cc, line_rate;
  std::optional<uint32_t> cnp_interval_us;
  std::vector<std::string> command;
};

std::filesystem::path self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path();
}

void set(const char* name, const std::string& value) {
  if (setenv(name, value.c_str(), 1) != 0) throw std::runtime_error(std::string("setenv ") + name);
}

int run(RunOptions& o) {
  if (!o.command.empty() && o.command.front() == "--") o.command.erase(o.command.begin());
  if (o.command.empty()) throw CLI::ValidationError("run", "no program given (rocelab run -- PROG ARGS...)");

  std::filesystem::path shim = shim_library_path();
  if (!o.devices.empty()) set("ROCELAB_DEVICES", o.devices);
  if (!o.ip.empty()) set("ROCELAB_IP", o.ip);
  if (o.mtu != 0) set("ROCELAB_MTU", std::to_string(o.mtu));
  if (!o.pcap.empty()) set("ROCELAB_PCAP", std::filesystem::absolute(o.pcap).string());
  if (!o.events.empty()) set("ROCELAB_EVENTS", std::filesystem::absolute(o.events).string());
  if (o.explain) set("ROCELAB_EXPLAIN", "1");
  if (o.retry_forever) set("ROCELAB_RETRY_FOREVER", "1");
  if (o.counters) set("ROCELAB_COUNTERS", "1");
  if (o.wire_exact) set("ROCELAB_WIRE_EXACT", "1");
  if (o.share_address) set("ROCELAB_SHARED_ADDRESS", "1");
  if (!o.cc.empty()) set("ROCELAB_CC", o.cc);
  if (!o.line_rate.empty()) set("ROCELAB_LINE_RATE", o.line_rate);
  if (o.cnp_interval_us) set("ROCELAB_CNP_INTERVAL_US", std::to_string(*o.cnp_interval_us));

  // Fault flags given on this command line replace any ROCELAB_* fault
  // variables already in the environment; without flags those pass through.
  if (!(o.faults == emu::FaultConfig{})) {
    for (const auto& [name, value] : emu::to_env(o.faults)) set(name.c_str(), value);
  }

  // Refuse a bad configuration here, with its message, rather than have the
  // shim fall back to no emulated devices inside the program.
  std::string error;
  if (!verbs_shim::config_from_env(error)) {
    // Name the flag the user typed, not the variable it became.
    for (const auto& [var, flag, given] : {std::tuple{"ROCELAB_DEVICES=", "--devices ", !o.devices.empty()},
                                           std::tuple{"ROCELAB_IP=", "--ip ", !o.ip.empty()},
                                           std::tuple{"ROCELAB_MTU=", "--mtu ", o.mtu != 0}}) {
      if (given && error.rfind(var, 0) == 0) error = flag + error.substr(std::string(var).size());
    }
    throw CLI::ValidationError("run", error);
  }
  (void)emu::from_env(&error);
  if (!error.empty()) throw CLI::ValidationError("run", error);

  const char* old = std::getenv("LD_PRELOAD");
  // The verbs shim first, then the rdma_cm shim (docs/rdma-cm.md): both come
  // before the real libibverbs and librdmacm in the search order.
  std::string preload = shim.string() + ":" + rdmacm_shim_library_path().string();
  if (old && *old) preload += std::string(":") + old;
  set("LD_PRELOAD", preload);

  std::vector<char*> argv;
  for (std::string& a : o.command) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(argv[0], argv.data());
  int e = errno;
  std::fprintf(stderr, "rocelab run: cannot run %s: %s\n", argv[0], std::strerror(e));
  return e == ENOENT ? 127 : 126;  // as shells report it
}

}  // namespace

std::filesystem::path shim_library_path() {
  std::filesystem::path p = self_dir() / ".." / "lib" / "librocelab_verbs.so";
  std::error_code ec;
  std::filesystem::path c = std::filesystem::canonical(p, ec);
  if (ec) throw std::runtime_error("the verbs shim is missing: " + p.string());
  return c;
}

std::filesystem::path rdmacm_shim_library_path() {
  std::filesystem::path p = self_dir() / ".." / "lib" / "librocelab_rdmacm.so";
  std::error_code ec;
  std::filesystem::path c = std::filesystem::canonical(p, ec);
  if (ec) throw std::runtime_error("the rdma_cm shim is missing: " + p.string());
  return c;
}

void register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run an unmodified verbs or rdma_cm program on emulated RoCE devices");
  cmd->add_option("--devices", o->devices, "emulated device names, comma-separated (default rocelab0)");
  cmd->add_option("--ip", o->ip, "IPv4 or IPv6 address per device, comma-separated; an IPv6 link-local one with its interface, fe80::1%eth0 (default: first free 127.0.0.x)");
  cmd->add_option("--mtu", o->mtu, "active MTU of the emulated port (256..4096; default: from the interface MTU, as Soft-RoCE: 4096 on lo, 1024 on a 1500-byte link)")
      ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  cmd->add_option("--pcap", o->pcap, "write every RoCEv2 packet sent and received to this pcap file");
  cmd->add_option("--events", o->events, "write the engine's event log to this file");
  cmd->add_flag("--explain", o->explain,
                "when a verb is refused (ibv_modify_qp), print the engine's reason on stderr; errno is unchanged");
  cmd->add_flag("--counters", o->counters,
                "print each emulated device's counters (rxe's names) on stderr when the program closes it or exits");
  cmd->add_flag("--retry-forever", o->retry_forever,
                "read retry_cnt 7 as Soft-RoCE does: retry forever (unless the peer is gone); default: seven retries");
  cmd->add_flag("--wire-exact", o->wire_exact,
                "one UDP datagram per RoCEv2 packet: no GSO super-datagrams, so a capture of the interface "
                "(tcpdump -i lo) shows each packet as a NIC would send it; slower");
  cmd->add_flag("--share-address", o->share_address,
                "share the --ip address's UDP port 4791 with the other rocelab processes on it (each "
                "datagram is steered to the process that owns its destination QP; docs/host.md); "
                "experimental");
  cmd->add_option("--cc", o->cc,
                  "congestion control: dcqcn makes every QP send ECN-capable packets (ECT(0)), answer CE "
                  "marks with CNPs and pace its requests at the rate DCQCN gives it (docs/congestion.md); "
                  "default none")
      ->check(CLI::IsMember({"none", "dcqcn"}));
  cmd->add_option("--line-rate", o->line_rate,
                  "the emulated port's rate in bits/s, with K, M or G (10G): where DCQCN starts and what it "
                  "never exceeds; default 100G");
  cmd->add_option("--cnp-interval-us", o->cnp_interval_us,
                  "with --cc dcqcn: at most one CNP per QP per this many microseconds (mlx5's "
                  "min_time_between_cnps; default 4)")
      ->check(CLI::Range(0u, 1000000u));
  add_fault_options(*cmd, o->faults);
  cmd->add_option("command", o->command, "the program and its arguments")->required();
  cmd->prefix_command();
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace rocelab::tools
