#!/bin/bash
# Runs an unmodified verbs program as server and client under `rocelab run`
# and checks both: exit status 0 and every expected line (extended regex).
#
#   run_pair.sh ROCELAB [-e REGEX]... [-C REGEX]... [-r RUN_OPTION]... [-n]
#               [-s OPTION] [-k OPTION] -- PROG ARGS...
#
# The server runs `PROG ARGS -p PORT`, the client `PROG ARGS -p PORT SERVER`,
# PORT a TCP port the script claims (tests/lib/harness.sh).
# -s and -k: the option that gives the server and the client the port, for a
#    program whose -p is something else (fi_pingpong: -s -B -k -P).
# -e: both outputs must match; -C: the client's must (latency tests print
#     their results on the client only).
# -r passes an option to both `rocelab run`s (e.g. -r --mtu=1024).
# -n runs the two in network namespaces joined by a veth pair (198.18.0.1 and
#    198.18.0.2), created here and removed on exit; exits 77 (ctest: skipped)
#    where namespaces cannot be made.
# -c CAPTURE: the server also writes a pcap (rocelab run --pcap CAPTURE).
# Each program gets a bounded time (TIMEOUT, default 120 s); nothing hangs.
set -u
rocelab=$1
shift
. "$(dirname "$0")/../lib/harness.sh"
expect=() client_expect=() run_opts=() netns=0 capture="" srv_port_opt=-p cli_port_opt=-p
while [ $# -gt 0 ]; do
  case $1 in
    -e) expect+=("$2"); shift 2 ;;
    -C) client_expect+=("$2"); shift 2 ;;
    -r) run_opts+=("$2"); shift 2 ;;
    -n) netns=1; shift ;;
    -c) capture=$2; shift 2 ;;
    -s) srv_port_opt=$2; shift 2 ;;
    -k) cli_port_opt=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run_pair.sh: bad argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "run_pair.sh: no program" >&2; exit 2; }
port=$(claim_port) || exit 1
limit=${TIMEOUT:-120}
work=$(mktemp -d /tmp/rocelab-pair.XXXXXX)
server_ip=127.0.0.1
srv_prefix=() cli_prefix=() srv_opts=() cli_opts=()

. "$(dirname "$0")/netns_pair.sh"
cleanup() {
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT

[ $netns = 1 ] && netns_up "$port"
[ -n "$capture" ] && srv_opts+=(--pcap "$capture")

run_once() {
  "${srv_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run "${run_opts[@]}" "${srv_opts[@]}" -- \
    "$@" "$srv_port_opt" "$port" >"$work/server.out" 2>&1 &
  srv_pid=$!
  # The server listens on TCP $port once it has set up its device.
  wait_tcp_listen "$port" $srv_pid "${srv_prefix[@]}"
  "${cli_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run "${run_opts[@]}" "${cli_opts[@]}" -- \
    "$@" "$cli_port_opt" "$port" "$server_ip" >"$work/client.out" 2>&1
  cli_rc=$?
  grep -qF "$perftest_no_clock" "$work/client.out" && kill $srv_pid 2>/dev/null
  wait $srv_pid
  srv_rc=$?
  srv_pid=""
}
# perftest checks its clock against gettimeofday before anything else and
# gives up when the two disagree (r^2 < 0.9: a loaded 2-core machine), before
# any RDMA: then, and only then, the pair runs once more.
perftest_no_clock="Can't produce a report"
run_once "$@"
if cat "$work/server.out" "$work/client.out" | grep -qF "$perftest_no_clock"; then
  echo "note: perftest could not calibrate its clock ($(grep -h 'Correlation coefficient' "$work"/*.out | head -1)); running the pair once more"
  run_once "$@"
fi

status=0
for side in server client; do
  rc=$([ $side = server ] && echo $srv_rc || echo $cli_rc)
  echo "===== $side (exit $rc): $*"
  cat "$work/$side.out"
  if [ "$rc" != 0 ]; then
    echo "FAIL: $side exited $rc"
    status=1
  fi
  res=("${expect[@]}")
  [ $side = client ] && res+=("${client_expect[@]}")
  for re in "${res[@]}"; do
    if ! grep -Eq -- "$re" "$work/$side.out"; then
      echo "FAIL: $side output lacks /$re/"
      status=1
    fi
  done
done
exit $status
