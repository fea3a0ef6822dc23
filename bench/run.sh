#!/bin/bash
# `make bench`: verbs through the shim (perftest under `rocelab run`, two
# processes on loopback) beside the kernel's own loopback networking (iperf3
# TCP, iperf3 UDP with 4 KiB datagrams, sockperf UDP ping-pong), with ratios.
# Numbers depend on the machine and its load; nothing here asserts speed.
# Usage: bench/run.sh [BUILD_DIR]   (default: build)
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
rocelab=$build/bin/rocelab
[ -x "$rocelab" ] || { echo "bench: $rocelab missing (make build)" >&2; exit 1; }
for t in ib_write_bw ib_read_bw ib_send_lat ib_write_lat iperf3 sockperf; do
  command -v $t >/dev/null || { echo "bench: $t missing (make deps)" >&2; exit 1; }
done
out=$(mktemp -d /tmp/rocelab-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
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
  [ $rc = 0 ] || { echo "bench: $* failed:" >&2; cat "$out/cli" >&2; }
  cat "$out/cli"
}
# BW average [MB/s] and message rate [Mpps] from a perftest bandwidth result line.
bw_mbs() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $4}' | tail -1; }
bw_mpps() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $5}' | tail -1; }
# t_typical [us] from a perftest latency result line.
lat_us() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $5}' | tail -1; }

echo "running perftest through the shim ..."
w64k=$(perftest ib_write_bw -s 65536 | bw_mbs)
w64_out=$(perftest ib_write_bw -s 64)
w64=$(echo "$w64_out" | bw_mbs) w64_mpps=$(echo "$w64_out" | bw_mpps)
r64k=$(perftest ib_read_bw | bw_mbs)
slat=$(perftest ib_send_lat -s 2 | lat_us)
wlat=$(perftest ib_write_lat -s 2 | lat_us)

echo "running iperf3 and sockperf on loopback ..."
port=$((port + 1))
iperf3 -s -1 -p $port >/dev/null 2>&1 &
wait_listen $port
tcp_mbs=$(iperf3 -c 127.0.0.1 -p $port -t 5 -J 2>/dev/null |
          python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6))')
wait
port=$((port + 1))
iperf3 -s -1 -p $port >/dev/null 2>&1 &
wait_listen $port
udp_json=$(iperf3 -c 127.0.0.1 -p $port -u -b 0 -l 4096 -t 5 -J 2>/dev/null)
udp_mbs=$(echo "$udp_json" | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum"]["bits_per_second"]/8e6))')
udp_mpps=$(echo "$udp_json" | python3 -c 'import json,sys; s=json.load(sys.stdin)["end"]["sum"]; print("%.6f" % (s["packets"]/s["seconds"]/1e6))')
wait
port=$((port + 1))
sockperf server -i 127.0.0.1 -p $port >/dev/null 2>&1 &
sp=$!
sleep 0.5
sock_us=$(sockperf ping-pong -i 127.0.0.1 -p $port -t 5 -m 64 2>/dev/null |
          awk '/avg-latency=/ {for (i = 1; i <= NF; ++i) if ($i ~ /^avg-latency=/) {sub("avg-latency=", "", $i); print $i}}' | tail -1)
kill $sp 2>/dev/null; wait $sp 2>/dev/null

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.3f", a / b }'; }
echo
echo "| measurement (loopback, 2 processes) | rocelab | kernel baseline | ratio |"
echo "|---|---|---|---|"
echo "| ib_write_bw -s 65536 [MB/s] vs iperf3 TCP | ${w64k:-?} | ${tcp_mbs:-?} | $(ratio "$w64k" "$tcp_mbs") |"
echo "| ib_read_bw (64 KiB) [MB/s] vs iperf3 TCP | ${r64k:-?} | ${tcp_mbs:-?} | $(ratio "$r64k" "$tcp_mbs") |"
echo "| ib_write_bw -s 64 [MB/s] vs iperf3 UDP 4 KiB | ${w64:-?} | ${udp_mbs:-?} | $(ratio "$w64" "$udp_mbs") |"
echo "| ib_write_bw -s 64 [Mmsg/s] vs iperf3 UDP 4 KiB [Mpkt/s] | ${w64_mpps:-?} | ${udp_mpps:-?} | $(ratio "$w64_mpps" "$udp_mpps") |"
echo "| ib_send_lat -s 2 t_typical [us] vs sockperf UDP ping-pong avg [us] | ${slat:-?} | ${sock_us:-?} | $(ratio "$slat" "$sock_us") |"
echo "| ib_write_lat -s 2 t_typical [us] vs sockperf UDP ping-pong avg [us] | ${wlat:-?} | ${sock_us:-?} | $(ratio "$wlat" "$sock_us") |"
