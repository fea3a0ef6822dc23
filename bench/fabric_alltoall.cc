// fabric_alltoall: the simulated fabric's speed on a data-centre workload, for
// `make bench` (bench/run.sh). 64 hosts on a leaf-spine at 100 Gb/s (8 leaves
// of 8 hosts, 8 spines: every leaf has as much capacity up as down), every
// host's device with one RC QP to every other host, every QP one RDMA WRITE
// of 1 MiB at MTU 4096, run in virtual time until all 4,032 have completed
// (bench/alltoall.h says what is checked and how memory stays bounded).
// Prints what it measured, then one line that bench/run.sh reads:
//   fabric_alltoall: result ... packets=N wall_s=S mpps=M peak_rss_mib=R ...
// mpps: packets the engines sent (requests, ACKs, any resends) per second of
// wall time of the simulation, in millions.
//
// Exit codes: 0 every WRITE completed with success and memory holds what was
// sent; 1 something was wrong (said on stderr); 2 bad arguments.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "bench/alltoall.h"
#include "emu/transport/datagram_pool.h"

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rocelab;
  bench::AlltoallOptions o;
  uint32_t mtu = 4096;
  double gbps = 100, fabric_gbps = 0, deadline_ms = 1000;
  bool no_pfc = false, no_ecn = false;
  std::string driver = "due", cc = "none";
  CLI::App app{"fabric_alltoall: an all-to-all of RDMA WRITEs across a simulated leaf-spine"};
  app.add_option("--leaves", o.leaves, "leaf switches")->capture_default_str();
  app.add_option("--spines", o.spines, "spine switches")->capture_default_str();
  app.add_option("--hosts-per-leaf", o.hosts_per_leaf, "hosts on each leaf")->capture_default_str();
  app.add_option("--gbps", gbps, "every host link's rate [Gb/s]")->capture_default_str();
  app.add_option("--fabric-gbps", fabric_gbps, "every leaf-spine link's rate [Gb/s] (default: --gbps)");
  app.add_option("--message", o.message, "bytes per WRITE (a multiple of the MTU)")->capture_default_str();
  app.add_option("--mtu", mtu, "256, 512, 1024, 2048 or 4096")->capture_default_str();
  app.add_option("--verified", o.verified,
                 "per destination host, senders whose WRITEs land in a buffer of their own, checked byte for byte")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "ECN draws and ECMP hash")->capture_default_str();
  app.add_option("--deadline-ms", deadline_ms, "virtual time to give up after")->capture_default_str();
  app.add_option("--driver", driver,
                 "due: each round polls the devices the fabric lists with work (a timer due, a datagram arrived); "
                 "every: every device, every round")
      ->check(CLI::IsMember({"due", "every"}))
      ->capture_default_str();
  app.add_option("--cc", cc, "the devices' congestion control: none or dcqcn")->capture_default_str();
  app.add_flag("--no-pfc", no_pfc, "switches without PFC (drops instead of pauses)");
  app.add_flag("--no-ecn", no_ecn, "switches without ECN marking");
  CLI11_PARSE(app, argc, argv);
  if (!emu::mtu_from_bytes(mtu, &o.mtu)) {
    std::cerr << "fabric_alltoall: --mtu " << mtu << ": not an IB MTU\n";
    return 2;
  }
  o.host_bps = uint64_t(gbps * 1e9);
  o.fabric_bps = uint64_t((fabric_gbps > 0 ? fabric_gbps : gbps) * 1e9);
  o.deadline = std::chrono::duration_cast<bench::Nanos>(std::chrono::duration<double, std::milli>(deadline_ms));
  std::string why;
  if (auto a = cc::parse_algorithm(cc, &why)) {
    o.cc = *a;
  } else {
    std::cerr << "fabric_alltoall: --cc: " << why << "\n";
    return 2;
  }
  o.driver = driver == "every" ? bench::Driver::kEveryDevice : bench::Driver::kDueDevices;
  o.pfc = !no_pfc;
  o.ecn = !no_ecn;

  if (o.leaves * o.hosts_per_leaf < 2 || o.spines == 0 || o.message == 0 || o.message % mtu != 0 ||
      o.host_bps == 0 || o.fabric_bps == 0) {
    std::cerr << "fabric_alltoall: need two hosts or more, a spine, non-zero rates and a message that is a "
                 "non-zero multiple of the MTU\n";
    return 2;
  }

  const double rss_before = peak_rss_mib();
  const bench::AlltoallResult r = bench::run_alltoall(o);
  const double rss = peak_rss_mib();
  if (r.qps == 0) {  // the set-up failed
    std::cerr << "fabric_alltoall: " << r.error << "\n";
    return 1;
  }
  const double mpps = r.run_wall_s > 0 ? double(r.packets) / r.run_wall_s / 1e6 : 0;
  const double cpu_mpps = r.run_cpu_s > 0 ? double(r.packets) / r.run_cpu_s / 1e6 : 0;
  const double sim_ms = std::chrono::duration<double, std::milli>(r.sim_time).count();
  // The all-to-all's bound: every host sends (and receives) hosts - 1
  // messages through its one link; a frame is the payload, BTH, ICRC, IPv4
  // and UDP headers and Ethernet's 38 bytes (a first packet's RETH aside).
  const double frame_bits = 8.0 * (double(mtu) + 12 + 4 + 28 + 38);
  const double bound_ms = double(r.hosts - 1) * double(o.message / mtu) * frame_bits / double(o.host_bps) * 1e3;
  std::printf("%u hosts (%u leaves x %u, %u spines), %zu RC QPs, one %zu-byte WRITE each at MTU %u, %g Gb/s, "
              "congestion control %s\n",
              r.hosts, o.leaves, o.hosts_per_leaf, o.spines, r.qps, o.message, mtu, gbps, cc.c_str());
  std::printf("  completed %zu of %zu (%zu failed); verified byte for byte %zu (%zu bad); shared-sink chunks %zu "
              "(%zu bad)\n",
              r.completions, r.qps, r.failed, r.verified_writes, r.verified_bad, r.sink_chunks, r.sink_chunks_bad);
  std::printf("  virtual time %.3f ms (line-rate bound about %.3f ms)\n", sim_ms, bound_ms);
  std::printf("  packets sent by the engines %lu (requests a lossless run needs %lu, ACKs and resends %lu); "
              "delivered %lu; frames over all links %lu\n",
              (unsigned long)r.packets, (unsigned long)r.data_packets,
              (unsigned long)(r.packets - std::min(r.packets, r.data_packets)), (unsigned long)r.delivered,
              (unsigned long)r.totals.tx_packets);
  std::printf("  switches: %lu drops, %lu ECN marks, %lu pauses (%.1f us paused over all ports); engines: %lu "
              "retransmissions started, %lu CE-marked packets received, %lu CNPs sent\n",
              (unsigned long)r.totals.dropped, (unsigned long)r.totals.ecn_marked,
              (unsigned long)r.totals.pauses_received,
              std::chrono::duration<double, std::micro>(r.totals.paused).count(),
              (unsigned long)r.counters.completer_retry_err, (unsigned long)r.counters.np_ecn_marked_roce_packets,
              (unsigned long)r.counters.np_cnp_sent);
  std::printf("  wall: set-up %.2f s, simulation %.3f s (CPU %.3f s; %lu rounds, %lu device polls, driver %s), "
              "checks %.2f s\n",
              r.setup_wall_s, r.run_wall_s, r.run_cpu_s, (unsigned long)r.rounds, (unsigned long)r.device_polls,
              driver.c_str(), r.check_wall_s);
  std::printf("  %.3f M packets/s of wall time (%.3f M per CPU second)\n", mpps, cpu_mpps);
  std::printf("  memory: peak RSS %.1f MiB (%.1f before set-up), %.2f MiB per host; application buffers %.1f MiB, "
              "at most %zu datagrams in the network at once (%.1f MiB of payload copies at %zu bytes each)\n",
              rss, rss_before, rss / r.hosts, double(r.buffer_bytes) / (1 << 20), r.max_in_flight,
              double(r.max_in_flight * emu::DatagramPool::kReserve) / (1 << 20), emu::DatagramPool::kReserve);
  std::printf(
      "fabric_alltoall: result hosts=%u leaves=%u spines=%u message=%zu mtu=%u qps=%zu completed=%zu ok=%d "
      "driver=%s sim_ms=%.3f packets=%lu link_frames=%lu wall_s=%.3f cpu_s=%.3f mpps=%.3f cpu_mpps=%.3f peak_rss_mib=%.1f rss_per_host_mib=%.2f "
      "drops=%lu ecn_marked=%lu pauses=%lu retransmissions=%lu\n",
      r.hosts, o.leaves, o.spines, o.message, mtu, r.qps, r.completions, r.error.empty() ? 1 : 0, driver.c_str(),
      sim_ms, (unsigned long)r.packets, (unsigned long)r.totals.tx_packets, r.run_wall_s, r.run_cpu_s, mpps, cpu_mpps,
      rss, rss / r.hosts,
      (unsigned long)r.totals.dropped, (unsigned long)r.totals.ecn_marked, (unsigned long)r.totals.pauses_received,
      (unsigned long)r.counters.completer_retry_err);
  if (!r.error.empty()) {
    std::cerr << "fabric_alltoall: " << r.error << "\n";
    return 1;
  }
  return 0;
}
