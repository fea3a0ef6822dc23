#!/bin/bash
# `make bench`: rocelab beside the kernel, measured so that a change can be
# judged. Each pair — verbs through the shim (perftest under `rocelab run`, two
# processes on loopback) and its kernel baseline (iperf3 TCP, iperf3 UDP with
# 4 KiB datagrams, sockperf UDP ping-pong) — runs alternately RUNS times (5 by
# default), and the table gives the median, min and max of each side and the
# ratio of the medians. Then the micro-benchmarks (Google Benchmark): encode,
# decode, ICRC, and the engine's cost per packet on the simulated fabric.
# Numbers depend on the machine and its load; nothing here asserts speed.
#
# Two more pairs: veth_write_bw runs ib_write_bw and iperf3 between two network
# namespaces joined by a veth pair (root; skipped where namespaces cannot be
# made), and qps_1000 compares ib_write_bw's aggregate over 1,000 QPs with its
# one-QP figure (the scale target: a ratio >= 0.8).
#
# write_lat_busy and read_lat_busy compare with sockperf busy-polling (both
# ends spin, as perftest's do), write_lat and read_lat with sockperf as it
# comes (it sleeps in epoll_wait). Each row ends with its target and whether
# this run met it; after the micro-benchmarks, the simulated fabric's packets
# per second against its target (10 M on one core).
#
# shared_bw and shared_lat measure what sharing an address costs
# (docs/host.md): an ib_write_bw and an ib_send_lat pair whose two addresses
# each have a second, idle rocelab process, shared against not (goals: a
# ratio >= 0.95 and <= 1.05); shared_pairs_bw runs two ib_write_bw pairs at
# once, the servers sharing one address and the clients another, against the
# four on four addresses (four processes spinning on the machine's cores).
#
# kvstore runs examples/kvstore's load generator (90 % GETs of 64-byte values
# over 1,000 keys, 20,000 timed operations, one in flight) over rocelab verbs
# (GET = RDMA READ, PUT = SEND + reply) and over TCP (kv_server --tcp, without
# rocelab): the same workload, ops/s (KV_BIN: where kv_server and kv_client
# are, default the build's bin/; skipped when they are not there).
#
# mpi_lat and mpi_bw run tests/shim/programs/mpi_check --bench with 2 ranks
# (Open MPI): over UCX on rocelab0 (every rank under rocelab run) and over
# Open MPI's TCP transport (ob1 + btl tcp, no rocelab): 8-byte ping-pong
# latency, 1 MiB messages' bandwidth (tests/shim/mpi.sh; skipped without
# mpirun or the program).
#
# fabric_alltoall runs bench/fabric_alltoall.cc (the simulated fabric, not
# loopback): 64 hosts on a leaf-spine at 100 Gb/s, one RC QP from every host
# to every other, each WRITEing 1 MiB, simulated to completion; the median of
# min(RUNS, 3) runs of its packets per second of wall time against the same
# target of 10 M on one core, with its virtual time, peak RSS and memory per
# host. `bench/run.sh --no-micro fabric_alltoall` runs it alone.
#
# Usage: bench/run.sh [--build DIR] [--runs N] [--no-micro] [PAIR...]
#   PAIR: write_bw read_bw send_bw write_rate send_lat write_lat read_lat write_lat_busy read_lat_busy
#   veth_write_bw qps_1000 shared_bw shared_lat shared_pairs_bw kvstore mpi_lat mpi_bw, or fabric_alltoall
#   (default: all). `bench/run.sh write_bw` runs one measurement pair (and the micro-benchmarks).
set -u
cd "$(dirname "$0")/.."
build=build runs=5 micro=1 pairs=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --no-micro) micro=0; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) pairs+=("$1"); shift ;;
  esac
done
all=(write_bw read_bw send_bw write_rate send_lat write_lat read_lat write_lat_busy read_lat_busy veth_write_bw qps_1000 shared_bw shared_lat shared_pairs_bw kvstore mpi_lat mpi_bw)
# Judges that are not rocelab-vs-kernel pairs: one program each, on the simulated fabric.
all_judges=(fabric_alltoall)
judges=() named=("${pairs[@]}") pairs=()
for name in "${named[@]}"; do
  case " ${all_judges[*]} " in
    *" $name "*) judges+=("$name") ;;
    *) pairs+=("$name") ;;
  esac
done
[ ${#named[@]} = 0 ] && pairs=("${all[@]}") judges=("${all_judges[@]}")
rocelab=$build/bin/rocelab
if [ ${#pairs[@]} != 0 ]; then
  [ -x "$rocelab" ] || { echo "bench: $rocelab missing (make build)" >&2; exit 1; }
  for t in ib_write_bw ib_read_bw ib_send_bw ib_send_lat ib_write_lat ib_read_lat iperf3 sockperf; do
    command -v $t >/dev/null || { echo "bench: $t missing (make deps)" >&2; exit 1; }
  done
fi
out=$(mktemp -d /tmp/rocelab-bench.XXXXXX)
ns_a=rocelab-bench-a-$$ ns_b=rocelab-bench-b-$$ ns_up=0
cleanup() {
  rm -rf "$out"
  [ $ns_up = 1 ] && { ip netns del "$ns_a"; ip netns del "$ns_b"; } 2>/dev/null
  return 0
}
trap cleanup EXIT
port=19500
limit=180

wait_listen() {  # wait (bounded) until something listens on TCP/UDP port $1
  for _ in $(seq 1 200); do
    ss -Hltun "sport = :$1" | grep -q . && return 0
    sleep 0.05
  done
  return 1
}

# perftest pair under the shim; prints the client's output.
perftest() {
  port=$((port + 1))
  timeout -k 5 $limit "$rocelab" run -- "$@" -p $port >"$out/srv" 2>&1 &
  local srv=$!
  wait_listen $port
  timeout -k 5 $limit "$rocelab" run -- "$@" -p $port 127.0.0.1 >"$out/cli" 2>&1
  local rc=$?
  wait $srv
  [ $rc = 0 ] || { echo "bench: $* failed:" >&2; tail -3 "$out/cli" >&2; }
  cat "$out/cli"
}
# Two network namespaces joined by a veth pair (MTU 1500: RoCE MTU 1024),
# 198.18.1.1 in ns_a and 198.18.1.2 in ns_b; made once, by the main shell
# (the measurements run in pipelines, i.e. subshells).
veth_up() {
  [ $ns_up = 1 ] && return 0
  ip netns add "$ns_a" 2>/dev/null || { echo "bench: cannot create network namespaces (root?)" >&2; return 1; }
  ns_up=1
  ip netns add "$ns_b" &&
    ip link add va-bench netns "$ns_a" type veth peer name vb-bench netns "$ns_b" &&
    ip -n "$ns_a" addr add 198.18.1.1/24 dev va-bench && ip -n "$ns_b" addr add 198.18.1.2/24 dev vb-bench &&
    ip -n "$ns_a" link set va-bench up && ip -n "$ns_b" link set vb-bench up &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up
}
wait_listen_in() {  # NS PORT
  for _ in $(seq 1 200); do
    ip netns exec "$1" ss -Hltun "sport = :$2" | grep -q . && return 0
    sleep 0.05
  done
  return 1
}
# perftest pair across the veth: the server in ns_a, the client in ns_b.
perftest_veth() {
  [ $ns_up = 1 ] || return 1
  port=$((port + 1))
  ip netns exec "$ns_a" timeout -k 5 $limit "$rocelab" run --ip 198.18.1.1 -- "$@" -p $port >"$out/srv" 2>&1 &
  local srv=$!
  wait_listen_in "$ns_a" $port
  ip netns exec "$ns_b" timeout -k 5 $limit "$rocelab" run --ip 198.18.1.2 -- "$@" -p $port 198.18.1.1 \
    >"$out/cli" 2>&1
  local rc=$?
  wait $srv
  [ $rc = 0 ] || { echo "bench: $* (veth) failed:" >&2; tail -3 "$out/cli" >&2; }
  cat "$out/cli"
}
iperf_tcp_veth() {  # MB/s across the veth
  [ $ns_up = 1 ] || return 1
  port=$((port + 1))
  ip netns exec "$ns_a" timeout -k 5 $limit iperf3 -s -1 -p $port >/dev/null 2>&1 &
  wait_listen_in "$ns_a" $port
  ip netns exec "$ns_b" iperf3 -c 198.18.1.1 -p $port -t 3 -J 2>/dev/null |
    python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6))'
  wait
}

# Sharing an address (docs/host.md): two ib_write_bw pairs at once, for 3 s,
# the servers on one address and the clients on another (`--share-address`:
# each address's UDP 4791 is a reuseport group of two processes, steered by
# destination QP) or each of the four on an address of its own; prints the
# two clients' MB/s summed. $1: shared or own.
two_pairs_bw() {
  local mode=$1 share=() ips p1=$((port + 1)) p2=$((port + 2)) pids=() rc=0
  if [ "$mode" = shared ]; then
    share=(--share-address) ips=(127.0.0.70 127.0.0.70 127.0.0.71 127.0.0.71)
  else
    ips=(127.0.0.72 127.0.0.73 127.0.0.74 127.0.0.75)
  fi
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[0]} -- ib_write_bw -s 65536 -D 3 -p $p1 >"$out/s1" 2>&1 &
  pids+=($!)
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[1]} -- ib_write_bw -s 65536 -D 3 -p $p2 >"$out/s2" 2>&1 &
  pids+=($!)
  wait_listen $p1 && wait_listen $p2
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[2]} -- ib_write_bw -s 65536 -D 3 -p $p1 ${ips[0]} \
    >"$out/c1" 2>&1 &
  pids+=($!)
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[3]} -- ib_write_bw -s 65536 -D 3 -p $p2 ${ips[1]} \
    >"$out/c2" 2>&1 &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc = 0 ] || { echo "bench: two ib_write_bw pairs ($mode) failed:" >&2; tail -3 "$out/c1" "$out/c2" >&2; return 1; }
  local a b
  a=$(bw_mbs <"$out/c1") b=$(bw_mbs <"$out/c2")
  [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f\n", a + b }'
}
# A perftest pair whose server's and client's addresses are each shared with
# a second rocelab process that holds a device there and waits (an
# ibv_rc_pingpong server nobody connects to), or the same four processes on
# four addresses of their own; prints the client's output.
# $1: shared or own; then the perftest command.
perftest_beside() {
  local mode=$1 share=() ips p=$((port + 1)) i1=$((port + 2)) i2=$((port + 3)) idle=() rc
  shift
  if [ "$mode" = shared ]; then
    share=(--share-address) ips=(127.0.0.76 127.0.0.77 127.0.0.76 127.0.0.77)
  else
    ips=(127.0.0.78 127.0.0.79 127.0.0.80 127.0.0.81)
  fi
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[2]} -- ibv_rc_pingpong -g 0 -p $i1 >/dev/null 2>&1 &
  idle+=($!)
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[3]} -- ibv_rc_pingpong -g 0 -p $i2 >/dev/null 2>&1 &
  idle+=($!)
  wait_listen $i1 && wait_listen $i2
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[0]} -- "$@" -p $p >"$out/srv" 2>&1 &
  local srv=$!
  wait_listen $p
  timeout -k 5 $limit "$rocelab" run "${share[@]}" --ip ${ips[1]} -- "$@" -p $p ${ips[0]} >"$out/cli" 2>&1
  rc=$?
  wait $srv
  kill "${idle[@]}" 2>/dev/null
  wait "${idle[@]}" 2>/dev/null
  [ $rc = 0 ] || { echo "bench: $* beside sharers ($mode) failed:" >&2; tail -3 "$out/cli" >&2; }
  cat "$out/cli"
}

# examples/kvstore: the server, then the load generator; prints the client's
# output. $1: rdma (both under rocelab run, the server at 127.0.0.250 since
# the client resolves it with rdma_cm) or tcp (no rocelab).
kv_bin=${KV_BIN:-$build/bin}
kv_load=(-n 20000 --keys 1000 --value-size 64 --get-ratio 0.9)
kvstore() {
  port=$((port + 1))
  if [ "$1" = rdma ]; then
    timeout -k 5 $limit "$rocelab" run --ip 127.0.0.250 -- "$kv_bin/kv_server" -p $port --clients 1 >"$out/srv" 2>&1 &
  else
    timeout -k 5 $limit "$kv_bin/kv_server" --tcp -a 127.0.0.1 -p $port --clients 1 >"$out/srv" 2>&1 &
  fi
  local srv=$! rc
  for _ in $(seq 1 200); do  # an rdma_cm port is not in ss: the server says when it listens
    grep -q '^kv_server: listening' "$out/srv" && break
    kill -0 $srv 2>/dev/null || break
    sleep 0.05
  done
  if [ "$1" = rdma ]; then
    timeout -k 5 $limit "$rocelab" run -- "$kv_bin/kv_client" -p $port "${kv_load[@]}" 127.0.0.250 >"$out/cli" 2>&1
  else
    timeout -k 5 $limit "$kv_bin/kv_client" --tcp -p $port "${kv_load[@]}" 127.0.0.1 >"$out/cli" 2>&1
  fi
  rc=$?
  [ $rc = 0 ] || kill $srv 2>/dev/null
  wait $srv
  [ $rc = 0 ] || { echo "bench: kvstore $1 failed:" >&2; tail -3 "$out/cli" >&2; }
  cat "$out/cli"
}
kv_ops() { sed -nE 's/^kv_client: result .* ops_per_sec=([0-9]+) .*/\1/p' | tail -1; }

# mpi_check --bench, 2 ranks: $1 rdma (UCX on rocelab0) or tcp (ob1 + btl tcp).
mpi_prog=$build/bin/shim_mpi_check
mpi_bench() {
  local tcp=()
  [ "$1" = tcp ] && tcp=(-t)
  TIMEOUT=$limit bash tests/shim/mpi.sh "$rocelab" "$mpi_prog" 2 -b "${tcp[@]}" 2>&1
}
mpi_lat() { sed -nE 's/^mpi_check: bench latency 8 B: ([0-9.]+) us.*/\1/p' | tail -1; }
mpi_bw() { sed -nE 's/^mpi_check: bench bandwidth 1048576 B: ([0-9.]+) MB\/s.*/\1/p' | tail -1; }

# BW average [MB/s] and message rate [Mpps] from a perftest bandwidth result line.
bw_mbs() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $4}' | tail -1; }
bw_mpps() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $5}' | tail -1; }
# t_typical [us] from a perftest latency result line.
lat_us() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $5}' | tail -1; }

iperf_tcp() {  # MB/s
  port=$((port + 1))
  timeout -k 5 $limit iperf3 -s -1 -p $port >/dev/null 2>&1 &
  wait_listen $port
  iperf3 -c 127.0.0.1 -p $port -t 3 -J 2>/dev/null |
    python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6))'
  wait
}
iperf_udp_mpps() {  # packets/s of 4 KiB datagrams, in millions
  port=$((port + 1))
  timeout -k 5 $limit iperf3 -s -1 -p $port >/dev/null 2>&1 &
  wait_listen $port
  iperf3 -c 127.0.0.1 -p $port -u -b 0 -l 4096 -t 3 -J 2>/dev/null |
    python3 -c 'import json,sys; s=json.load(sys.stdin)["end"]["sum"]; print("%.6f" % (s["packets"]/s["seconds"]/1e6))'
  wait
}
# UDP ping-pong average latency [us]. $1: plain (sockperf's default: it
# sleeps in epoll_wait) or busy (non-blocking sockets and a zero epoll timeout
# on both ends: each spins, as perftest spins in ibv_poll_cq; the
# like-for-like baseline of ib_*_lat).
sockperf_us() {
  local mode=${1:-plain} how=()
  [ "$mode" = busy ] && how=(--nonblocked --timeout 0)
  port=$((port + 1))
  sockperf server -i 127.0.0.1 -p $port "${how[@]}" >/dev/null 2>&1 &
  local sp=$!
  sleep 0.5
  sockperf ping-pong -i 127.0.0.1 -p $port -t 3 -m 64 "${how[@]}" 2>/dev/null |
    awk '/avg-latency=/ {for (i = 1; i <= NF; ++i) if ($i ~ /^avg-latency=/) {sub("avg-latency=", "", $i); print $i}}' | tail -1
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
}

# pair NAME -> "title@rocelab command@baseline command@unit"
pair() {
  case $1 in
    write_bw)   echo "ib_write_bw -s 65536 vs iperf3 TCP@perftest ib_write_bw -s 65536 | bw_mbs@iperf_tcp@MB/s" ;;
    read_bw)    echo "ib_read_bw -s 65536 vs iperf3 TCP@perftest ib_read_bw -s 65536 | bw_mbs@iperf_tcp@MB/s" ;;
    send_bw)    echo "ib_send_bw -s 65536 vs iperf3 TCP@perftest ib_send_bw -s 65536 | bw_mbs@iperf_tcp@MB/s" ;;
    write_rate) echo "ib_write_bw -s 64 msg rate vs iperf3 UDP 4 KiB pkt rate@perftest ib_write_bw -s 64 | bw_mpps@iperf_udp_mpps@M/s" ;;
    send_lat)   echo "ib_send_lat -s 2 t_typical vs sockperf UDP ping-pong avg@perftest ib_send_lat -s 2 | lat_us@sockperf_us@us" ;;
    write_lat)  echo "ib_write_lat -s 2 t_typical vs sockperf UDP ping-pong avg@perftest ib_write_lat -s 2 | lat_us@sockperf_us@us" ;;
    read_lat)   echo "ib_read_lat -s 2 t_typical vs sockperf UDP ping-pong avg@perftest ib_read_lat -s 2 | lat_us@sockperf_us@us" ;;
    write_lat_busy) echo "ib_write_lat -s 2 t_typical vs sockperf UDP ping-pong avg, busy-polling@perftest ib_write_lat -s 2 | lat_us@sockperf_us busy@us" ;;
    read_lat_busy)  echo "ib_read_lat -s 2 t_typical vs sockperf UDP ping-pong avg, busy-polling@perftest ib_read_lat -s 2 | lat_us@sockperf_us busy@us" ;;
    veth_write_bw) echo "ib_write_bw -s 65536 vs iperf3 TCP, both over veth between namespaces@perftest_veth ib_write_bw -s 65536 | bw_mbs@iperf_tcp_veth@MB/s" ;;
    mpi_lat)    echo "mpi_check 8 B ping-pong, Open MPI over UCX on rocelab0 vs over TCP@mpi_bench rdma | mpi_lat@mpi_bench tcp | mpi_lat@us" ;;
    mpi_bw)     echo "mpi_check 1 MiB bandwidth, Open MPI over UCX on rocelab0 vs over TCP@mpi_bench rdma | mpi_bw@mpi_bench tcp | mpi_bw@MB/s" ;;
    kvstore)    echo "kvstore 90 % GET 64 B, rocelab verbs vs TCP@kvstore rdma | kv_ops@kvstore tcp | kv_ops@ops/s" ;;
    shared_bw)  echo "ib_write_bw -s 65536, each side's address shared with an idle process vs not@perftest_beside shared ib_write_bw -s 65536 | bw_mbs@perftest_beside own ib_write_bw -s 65536 | bw_mbs@MB/s" ;;
    shared_lat) echo "ib_send_lat -s 2 t_typical, each side's address shared with an idle process vs not@perftest_beside shared ib_send_lat -s 2 | lat_us@perftest_beside own ib_send_lat -s 2 | lat_us@us" ;;
    shared_pairs_bw) echo "two ib_write_bw -s 65536 pairs at once, sharing two addresses vs on four (sum)@two_pairs_bw shared@two_pairs_bw own@MB/s" ;;
    qps_1000)   echo "ib_write_bw -s 65536 over 1,000 QPs vs over one QP@perftest ib_write_bw -s 65536 -q 1000 -t 32 -n 200 | bw_mbs@perftest ib_write_bw -s 65536 | bw_mbs@MB/s" ;;
    *) return 1 ;;
  esac
}

# target NAME -> "OP VALUE" (the ratio of medians must be OP VALUE), or
# nothing for a pair that is measured without a target.
target() {
  case $1 in
    write_bw|read_bw|send_bw|write_rate|veth_write_bw) echo ">= 1.0" ;;
    send_lat) echo "<= 1.2" ;;
    write_lat|read_lat|write_lat_busy|read_lat_busy) echo "<= 1.5" ;;
    qps_1000) echo ">= 0.8" ;;
    shared_bw) echo ">= 0.95" ;;
    shared_lat) echo "<= 1.05" ;;
  esac
}
# verdict RATIO "OP VALUE" -> "OP VALUE: met" / "missed" ("" without a target).
verdict() {
  [ -n "$2" ] || return 0
  awk -v r="$1" -v op="${2%% *}" -v v="${2#* }" 'BEGIN {
    if (r == "n/a") { printf "%s %s: not measured", op, v; exit }
    ok = (op == ">=") ? (r + 0 >= v + 0) : (r + 0 <= v + 0)
    printf "%s %s: %s", op, v, ok ? "met" : "missed" }'
}

# median min max of the numbers on stdin ("? ? ?" when none).
stats() {
  python3 -c '
import sys, statistics
def num(x):
    try:
        return float(x)
    except ValueError:
        return None
v = [n for n in map(num, sys.stdin.read().split()) if n is not None]
print("%.4g %.4g %.4g" % (statistics.median(v), min(v), max(v)) if v else "? ? ?")'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "?" || b == "?" || b + 0 == 0) print "n/a"; else printf "%.3f", a / b }'; }

rows=()
for name in "${pairs[@]}"; do
  spec=$(pair "$name") || { echo "bench: unknown pair $name (one of: ${all[*]})" >&2; exit 2; }
  IFS='@' read -r title ours theirs unit <<< "$spec"
  if [ "$name" = kvstore ] && { [ ! -x "$kv_bin/kv_server" ] || [ ! -x "$kv_bin/kv_client" ]; }; then
    echo "bench: $name skipped ($kv_bin/kv_server or kv_client missing; KV_BIN=DIR)" >&2
    continue
  fi
  if [ "${name#mpi_}" != "$name" ] && { ! command -v mpirun >/dev/null || [ ! -x "$mpi_prog" ]; }; then
    echo "bench: $name skipped (no mpirun or no $mpi_prog)" >&2
    continue
  fi
  if [ "$name" = veth_write_bw ] && ! veth_up; then
    echo "bench: $name skipped" >&2
    continue
  fi
  : > "$out/ours" ; : > "$out/theirs"
  echo "$name: $runs alternating runs ..." >&2
  for _ in $(seq 1 "$runs"); do
    eval "$ours" >> "$out/ours" || true
    eval "$theirs" >> "$out/theirs" || true
  done
  read -r om omin omax < <(stats < "$out/ours")
  read -r tm tmin tmax < <(stats < "$out/theirs")
  r=$(ratio "$om" "$tm")
  rows+=("| $title [$unit] | $om ($omin–$omax) | $tm ($tmin–$tmax) | $r | $(verdict "$r" "$(target "$name")") |")
done
if [ ${#pairs[@]} != 0 ]; then
  echo
  echo "| measurement (2 processes, loopback unless said; $runs runs each, alternating) | rocelab median (min–max) | baseline median (min–max) | ratio of medians | target |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
fi

if [ "$micro" = 1 ]; then
  if [ -x "$build/bin/rocelab_micro_bench" ]; then
    echo
    echo "micro-benchmarks (Google Benchmark):"
    "$build/bin/rocelab_micro_bench" --benchmark_min_time=0.5 2>/dev/null | grep -v '^\*\*\*' | tee "$out/micro"
    # The simulated fabric's packets per second of wall time on one core.
    pps=$(sed -nE 's/^BM_EngineWrite64OnTheFabric .* packets\/s=([0-9.]+)M\/s.*/\1/p' "$out/micro" | tail -1)
    echo
    fabric=$(awk -v p="${pps:-}" 'BEGIN { print p == "" ? "not measured" : (p + 0 >= 10 ? "met" : "missed") }')
    echo "simulated fabric, 64-byte WRITE + ACK: ${pps:-?} M packets/s on one core (target >= 10 M: $fabric)"
  else
    echo "bench: $build/bin/rocelab_micro_bench missing (libbenchmark-dev; make build)" >&2
  fi
fi

# fabric_alltoall: the median packets/s of min(RUNS, 3) runs, the last run's
# report in full, and the judge's line.
if [ ${#judges[@]} != 0 ]; then
  a2a=$build/bin/rocelab_fabric_alltoall
  if [ -x "$a2a" ]; then
    n=$((runs < 3 ? runs : 3))
    echo
    echo "fabric_alltoall: $n runs of the 64-host leaf-spine all-to-all (1 MiB WRITEs) ..." >&2
    : > "$out/a2a_mpps"
    : > "$out/a2a_cpu"
    ok=1
    for _ in $(seq 1 "$n"); do
      if ! "$a2a" >"$out/a2a" 2>"$out/a2a_err"; then
        ok=0
        echo "bench: $a2a failed:" >&2
        cat "$out/a2a_err" >&2
      fi
      sed -nE 's/^fabric_alltoall: result .* mpps=([0-9.]+) .*/\1/p' "$out/a2a" >> "$out/a2a_mpps"
      sed -nE 's/^fabric_alltoall: result .* cpu_mpps=([0-9.]+) .*/\1/p' "$out/a2a" >> "$out/a2a_cpu"
    done
    echo "simulated fabric, all-to-all on a leaf-spine (bench/fabric_alltoall.cc, last of $n runs):"
    grep -v '^fabric_alltoall: result' "$out/a2a"
    read -r am amin amax < <(stats < "$out/a2a_mpps")
    read -r acpu _ _ < <(stats < "$out/a2a_cpu")
    line=$(grep '^fabric_alltoall: result' "$out/a2a" | tail -1)
    field() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<< "$line"; }
    verdict_a2a=$(awk -v p="$am" -v ok="$ok" 'BEGIN {
      if (ok == 0) { print "failed"; exit }
      print p == "?" ? "not measured" : (p + 0 >= 10 ? "met" : "missed") }')
    echo
    echo "simulated fabric, 64-host leaf-spine all-to-all of 1 MiB WRITEs: $am ($amin–$amax) M packets/s on one core" \
      "(target >= 10 M: $verdict_a2a; $acpu M per CPU second); $(field sim_ms) ms virtual, peak RSS $(field peak_rss_mib) MiB" \
      "($(field rss_per_host_mib) MiB per host)"
  else
    echo "bench: $a2a missing (make build)" >&2
  fi
fi
