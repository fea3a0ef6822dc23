// `rocelab loopback`: the command line of src/loopback's workload — two
// emulated devices in one process run traffic over the UDP transport
// (127.0.0.x) or the simulated fabric and verify every byte. Exit 0 only when
// every operation completed with the expected status and data; 1 when one did
// not (the run stops at the first failed operation: its QP is in the error
// state, as on a NIC) or the run could not start.
#include <cstdio>
#include <memory>
#include <string>

#include "loopback/loopback.h"
#include "tools/commands.h"
#include "tools/fault_options.h"

namespace rocelab::tools {
namespace {

void print(const loopback::Options& o, const loopback::Summary& s) {
  std::printf("loopback: transport %s, qp %s, op %s, size %u, count %u, mtu %u\n", o.transport.c_str(),
              o.qp_type.c_str(), o.op.c_str(), o.size, o.count, o.mtu);
  std::printf("operations %llu, bytes %llu, errors %llu, %.3f s\n", static_cast<unsigned long long>(s.ops),
              static_cast<unsigned long long>(s.bytes), static_cast<unsigned long long>(s.errors), s.seconds);
  if (!s.stop_reason.empty())
    std::printf("stopped at the first failed operation (%s): %llu operations not run\n", s.stop_reason.c_str(),
                static_cast<unsigned long long>(s.not_run));
  if (s.lossy)
    std::printf("%s does not retransmit: delivered %llu, lost %llu, repeated %llu (every delivered message checked byte for byte)\n",
                o.qp_type == "uc" ? "UC" : "UD", static_cast<unsigned long long>(s.delivered),
                static_cast<unsigned long long>(s.lost), static_cast<unsigned long long>(s.repeated));
  for (const auto& d : s.counters) {
    std::printf("%s counters:", d.device.c_str());
    for (const auto& [name, v] : d.nonzero) std::printf(" %s=%llu", name.c_str(), static_cast<unsigned long long>(v));
    std::printf("\n");
  }
  if (o.counters || o.faults.active()) {
    for (const emu::FaultStats& st : s.faults)
      std::printf("faults: dropped %llu, duplicated %llu, corrupted %llu, delayed %llu, reordered %llu\n",
                  static_cast<unsigned long long>(st.tx.dropped + st.rx.dropped),
                  static_cast<unsigned long long>(st.tx.duplicated + st.rx.duplicated),
                  static_cast<unsigned long long>(st.tx.corrupted + st.rx.corrupted),
                  static_cast<unsigned long long>(st.tx.delayed + st.rx.delayed),
                  static_cast<unsigned long long>(st.tx.reordered + st.rx.reordered));
  }
}

int run(loopback::Options o) {
  o.on_failure = [](const std::string& what) { std::fprintf(stderr, "loopback: %s\n", what.c_str()); };
  loopback::Summary s;
  std::string error;
  if (!loopback::run(o, &s, &error)) {
    std::fflush(stdout);
    std::fprintf(stderr, "rocelab: %s\n", error.c_str());
    return 1;
  }
  print(o, s);
  return s.errors == 0 ? 0 : 1;
}

}  // namespace

void register_loopback(CLI::App& app) {
  auto o = std::make_shared<loopback::Options>();
  CLI::App* c = app.add_subcommand("loopback", "two emulated devices in one process run traffic and verify every byte");
  c->add_option("--transport", o->transport, "udp (127.0.0.x sockets) or sim (simulated fabric)")
      ->check(CLI::IsMember({"udp", "sim"}));
  c->add_option("--qp-type", o->qp_type, "rc, uc or ud")->check(CLI::IsMember({"rc", "uc", "ud"}));
  c->add_option("--op", o->op, "send, write, read, atomic or all")
      ->check(CLI::IsMember({"send", "write", "read", "atomic", "all"}));
  c->add_option("--size", o->size, "message size in bytes")->check(CLI::Range(0u, 0x800000u));
  c->add_option("--count", o->count, "operations of each kind")->check(CLI::Range(1u, 100000000u));
  c->add_option("--mtu", o->mtu, "path MTU: 256, 512, 1024, 2048 or 4096")
      ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  c->add_option("--pcap", o->pcap, "write every packet to this pcap file");
  c->add_option("--events", o->events, "write the engine event log (length-delimited Protobuf) here");
  c->add_option("--pcap-at", o->pcap_at, "where --pcap records: tx (as sent, default) or rx (as received)")
      ->check(CLI::IsMember({"tx", "rx"}));
  c->add_option("--fault-log", o->fault_log,
                "write what the fault injectors did, a line per packet: time_ns device dir actions opcode psn qpn");
  c->add_flag("--counters", o->counters, "print the devices' counters");
  c->add_option("--retry-cnt", o->retry_cnt, "RC retry_cnt (0-7): retries in a row without progress before RETRY_EXC_ERR (default 7)")->check(CLI::Range(0, 7));
  c->add_flag("--retry-forever", o->retry_forever, "read retry_cnt 7 as Soft-RoCE does: retry forever (unless the peer is gone)");
  c->add_option("--timeout", o->timeout, "RC local ACK timeout exponent (0-31; 0 = infinite)")->check(CLI::Range(0, 31));
  add_fault_options(*c, o->faults);
  c->callback([o] { exit_code() = run(*o); });
}

}  // namespace rocelab::tools
