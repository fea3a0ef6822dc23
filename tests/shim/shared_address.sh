#!/bin/bash
# Programs that share one address (`rocelab run --share-address`, docs/host.md):
# two ib_write_bw pairs and an rping pair, six unmodified programs at once.
#
#   shared_address.sh ROCELAB one     all six on one loopback address
#   shared_address.sh ROCELAB netns   two network namespaces ("hosts") joined
#                                     by a veth pair, one address each: the
#                                     three servers on one, the three clients
#                                     on the other (77 where namespaces cannot
#                                     be made)
#
# Each program's socket on UDP 4791 is one of the address's SO_REUSEPORT
# group; a second rping server on the rping server's address and port is
# refused (EADDRINUSE, as one host's CM has it); the check sees them all
# bound at once (ss), then every program must
# exit 0 with its result: both sides of each perftest pair report the same
# iterations, the rping client checked every ping and the server saw them.
# The script claims three TCP ports (tests/lib/harness.sh): the two perftest
# pairs' and the rping listener's; every program is bounded (TIMEOUT,
# default 120 s).
set -u
rocelab=$1 mode=$2
. "$(dirname "$0")/../lib/harness.sh"
port1=$(claim_port) || exit 1
port2=$(claim_port) || exit 1
port3=$(claim_port) || exit 1
limit=${TIMEOUT:-120}
pings=5000
work=$(mktemp -d /tmp/rocelab-shared.XXXXXX)
srv_prefix=() cli_prefix=() pids=()

. "$(dirname "$0")/netns_pair.sh"
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  netns_down
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
case $mode in
  one) server_ip=$(net_of "$port1").1 client_ip=$server_ip ;;
  netns) netns_up "$port1"; client_ip=198.18.0.2 ;;
  *) echo "shared_address.sh: mode one or netns" >&2; exit 2 ;;
esac

# How many sockets hold UDP 4791 on ADDR (in the namespace of PREFIX...).
bound() {
  local addr=$1
  shift
  "$@" ss -Hlun "src $addr:4791" | wc -l
}
# at_least N ADDR [PREFIX...]: whether N or more do.
at_least() {
  local n=$1
  shift
  [ "$(bound "$@")" -ge "$n" ]
}

# run NAME PREFIX_VAR IP PROGRAM ARGS...: one program under rocelab run, in
# the background, its output in $work/NAME.out.
run() {
  local name=$1 side=$2 ip=$3
  shift 3
  local -n prefix=$side
  "${prefix[@]}" timeout -k 5 "$limit" "$rocelab" run --share-address --explain --ip "$ip" -- "$@" \
    >"$work/$name.out" 2>&1 &
  pids+=($!)
  eval "pid_$name=$!"
}

run_all() {
  pids=()
  run bw1_server srv_prefix "$server_ip" ib_write_bw -s 65536 -D 3 -p "$port1"
  run bw2_server srv_prefix "$server_ip" ib_write_bw -s 4096 -D 3 -p "$port2"
  run rping_server srv_prefix "$server_ip" rping -s -a "$server_ip" -p "$port3" -C "$pings" -v
  wait_tcp_listen "$port1" "$pid_bw1_server" "${srv_prefix[@]}" || fail "ib_write_bw server 1 does not listen"
  wait_tcp_listen "$port2" "$pid_bw2_server" "${srv_prefix[@]}" || fail "ib_write_bw server 2 does not listen"
  wait_line "$work/rping_server.out" "rocelab: rdma_listen on" "$pid_rping_server" || fail "rping does not listen"
  # One host listens on an rdma_cm port once: a second rping server on the
  # same address and port is refused, whichever process asks.
  "${srv_prefix[@]}" timeout -k 5 20 "$rocelab" run --share-address --ip "$server_ip" -- \
    rping -s -a "$server_ip" -p "$port3" -C 1 >"$work/rping_second.out" 2>&1
  grep -q "^rdma_listen: Address already in use" "$work/rping_second.out" ||
    { echo "FAIL: a second listener on $server_ip port $port3: $(head -n 3 "$work/rping_second.out")"; status=1; }
  run bw1_client cli_prefix "$client_ip" ib_write_bw -s 65536 -D 3 -p "$port1" "$server_ip"
  run bw2_client cli_prefix "$client_ip" ib_write_bw -s 4096 -D 3 -p "$port2" "$server_ip"
  run rping_client cli_prefix "$client_ip" rping -c -a "$server_ip" -p "$port3" -C "$pings" -v
  # All six on their address at once (the perftest pairs run 3 s).
  if [ "$mode" = one ]; then
    _wait_until "$pid_bw1_client" at_least 6 "$server_ip" ||
      { echo "FAIL: not six sockets on $server_ip:4791 at once ($(bound "$server_ip"))"; status=1; }
  else
    _wait_until "$pid_bw1_client" at_least 3 "$server_ip" "${srv_prefix[@]}" &&
      _wait_until "$pid_bw1_client" at_least 3 "$client_ip" "${cli_prefix[@]}" ||
      { echo "FAIL: not three sockets on each host's 4791 at once"; status=1; }
  fi
  wait_pids
}

# perftest checks its clock against gettimeofday first and gives up when the
# two disagree (a loaded 2-core machine), before any RDMA: then, and only
# then, everything runs once more.
perftest_no_clock="Can't produce a report"
run_all
if cat "$work"/bw*.out | grep -qF "$perftest_no_clock"; then
  echo "note: perftest could not calibrate its clock; running once more"
  run_all
fi

names=(bw1_server bw2_server rping_server bw1_client bw2_client rping_client)
for k in "${!names[@]}"; do
  n=${names[$k]}
  if [ "${rcs[$k]}" != 0 ]; then
    echo "FAIL: $n exited ${rcs[$k]}"
    tail -n 20 "$work/$n.out"
    status=1
  fi
done
# perftest's result line: "#bytes #iterations BW peak BW average MsgRate".
iterations() { awk -v s="$2" '$1 == s && $2 ~ /^[0-9]+$/ { print $2 }' "$work/$1.out" | tail -n 1; }
for pair in "bw1 65536" "bw2 4096"; do
  set -- $pair
  s=$(iterations "$1_server" "$2") c=$(iterations "$1_client" "$2")
  if [ -z "$c" ] || [ "$c" -lt 100 ]; then
    echo "FAIL: $1: the client reports '$c' iterations"
    status=1
  fi
  check "$1: the server's iterations" "$s" "$c"
done
last="rdma-ping-$((pings - 1)): "
grep -q "^ping data: $last" "$work/rping_client.out" || { echo "FAIL: the rping client lacks ping $((pings - 1))"; status=1; }
grep -q "^server ping data: $last" "$work/rping_server.out" || { echo "FAIL: the rping server lacks ping $((pings - 1))"; status=1; }
check "pings the client checked" "$(grep -c '^ping data: rdma-ping-' "$work/rping_client.out")" "$pings"
[ $status = 0 ] && echo "ok: six programs shared $([ "$mode" = one ] && echo "$server_ip" || echo "one address per host")"
exit $status
