#!/bin/bash
# A flood at a victim: an unmodified ib_write_bw server under
# `rocelab run --counters` at VICTIM_IP transfers to its client at PEER_IP
# (perftest -D 16: a fixed duration); meanwhile rocelab_flood, a process of its
# own at ATTACKER_IP, sends COUNT genuine RoCEv2 packets (correct ICRCs; for
# at most 12 s): half RDMA WRITEs to random QPNs, half to the victim's
# connected QP (random PSNs and R_Keys) from the attacker's address. Judged:
#   - the transfer completes: both perftests exit 0 and print their result;
#   - the victim's memory stays bounded: VmRSS grows by less than 32 MiB over
#     the flood (the engine allocates nothing per packet it receives; the
#     bound leaves room for the allocator and stdio, not for a queue of
#     millions of packets, which would be hundreds of MiB);
#   - the victim counted what it refused, by cause: drop_unknown_qp and
#     drop_source_address both > 0, and no WRITE of the attacker's executed
#     (the client's QP saw no error; the server's MR is not the attacker's to
#     write: a packet from another address never reaches the responder);
#   - the victim is still running when the flood ends (so that the memory
#     read is its own), and the CPU it spent during the flood is reported.
#
#   flood.sh ROCELAB ROCELAB_FLOOD VICTIM_IP PEER_IP ATTACKER_IP [COUNT]
#   flood.sh ROCELAB ROCELAB_FLOOD -n [COUNT]
# With -n the victim is in one network namespace (198.18.0.1), its peer and
# the attacker in another (198.18.0.2 and 198.18.0.3), joined by a veth pair
# (tests/shim/netns_pair.sh): the flood crosses a real link.
set -u
rocelab=$1 flood=$2
shift 2
source "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1  # perftest's TCP port; names the veth pair with -n
srv_prefix=() cli_prefix=() atk_prefix=()
if [ "$1" = "-n" ]; then
  count=${2:-3000000}
  source "$(dirname "$0")/../shim/netns_pair.sh"
  netns_up "$port"
  ip -n "$ns_b" addr add 198.18.0.3/24 dev "vb-$port"
  vip=198.18.0.1 pip=198.18.0.2 aip=198.18.0.3
  srv_prefix=(ip netns exec "$ns_a") cli_prefix=(ip netns exec "$ns_b") atk_prefix=(ip netns exec "$ns_b")
else
  vip=$1 pip=$2 aip=$3 count=${4:-3000000}
fi
work=$(mktemp -d /tmp/rocelab-flood.XXXXXX)
srv="" cli=""
watchdog=""
cleanup() {
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  [ -n "$srv" ] && kill -9 "$srv" 2>/dev/null
  [ -n "$cli" ] && kill -9 "$cli" 2>/dev/null
  declare -F netns_down >/dev/null && netns_down
  rm -rf "$work"
}
trap cleanup EXIT
source "$(dirname "$0")/judge.sh"
# `rocelab run` (and `ip netns exec`) exec the program: $! is perftest itself
# (its /proc is the victim's).
"${srv_prefix[@]}" "$rocelab" run --counters --ip "$vip" -- stdbuf -oL ib_write_bw -s 65536 -D 16 -p "$port" \
  >"$work/server.out" 2>"$work/server.err" &
srv=$!
wait_tcp_listen "$port" "$srv" "${srv_prefix[@]}"
"${cli_prefix[@]}" "$rocelab" run --ip "$pip" -- ib_write_bw -s 65536 -D 16 -p "$port" "$vip" >"$work/client.out" 2>&1 &
cli=$!
# Nothing waits without a bound: both perftests are killed after 90 s whatever happens.
( trap 'kill "$sp" 2>/dev/null; exit 0' TERM; sleep 90 & sp=$!; wait "$sp"; kill -9 "$srv" "$cli" ) >/dev/null 2>&1 &
watchdog=$!
qpn=""
for _ in $(seq 1 200); do
  qpn=$(sed -n 's/^ *local address: .*QPN \(0x[0-9a-f]*\).*/\1/p' "$work/server.out" | head -1)
  [ -n "$qpn" ] && grep -q "^ #bytes" "$work/server.out" && break
  sleep 0.05
done
[ -n "$qpn" ] || { echo "FAIL: the server never printed its QPN"; cat "$work/server.out" "$work/server.err"; exit 1; }
echo "victim: ib_write_bw server, pid $srv, QP $qpn at $vip"
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$srv/status"; }
cpu() { awk '{print $14 + $15}' "/proc/$srv/stat"; }  # utime + stime, clock ticks
rss0=$(rss) cpu0=$(cpu) t0=$(date +%s.%N)
"${atk_prefix[@]}" "$flood" --from "$aip" --to "$vip" --qpn "$qpn" --count "$count" --seconds 12 | tee "$work/flood.out"
rss1=$(rss) cpu1=$(cpu) t1=$(date +%s.%N)
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$srv/status")
# The victim must still be running when the flood ends (-D 16, the flood at most 12 s).
check "victim alive at the end of the flood" "$([ -n "$rss1" ] && echo yes)" yes
wait "$cli"; crc=$?; cli=""
wait "$srv"; src=$?; srv=""
hz=$(getconf CLK_TCK)
echo "victim during the flood: VmRSS ${rss0} -> ${rss1} KiB (peak ${hwm} KiB);" \
  "CPU $(awk -v a="$cpu0" -v b="$cpu1" -v hz="$hz" 'BEGIN {printf "%.2f", (b - a) / hz}') s" \
  "in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s of flood"
check "client's exit status" "$crc" 0
check "server's exit status" "$src" 0
check "client's result line" "$(grep -cE '^ 65536 +[0-9]+ +[0-9.]+ +[0-9.]+' "$work/client.out")" 1
echo "client under the flood: $(grep -E '^ 65536 ' "$work/client.out")  (#bytes #iterations peak avg [MB/s] Mpps)"
check "victim's VmRSS growth under 32 MiB" "$([ -n "$rss1" ] && [ $((rss1 - rss0)) -lt 32768 ] && echo yes || echo "no: ${rss0} -> ${rss1:-?} KiB")" yes
counters=$(grep -o 'counters: .*' "$work/server.err" | head -1)
echo "victim's $counters"
check "drop_unknown_qp counted" "$([ "$(counter drop_unknown_qp)" -gt 0 ] 2>/dev/null && echo yes)" yes
check "drop_source_address counted" "$([ "$(counter drop_source_address)" -gt 0 ] 2>/dev/null && echo yes)" yes
[ $status = 0 ] || { echo "== server"; cat "$work/server.out" "$work/server.err"; echo "== client"; cat "$work/client.out"; }
exit $status
