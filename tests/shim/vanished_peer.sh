#!/bin/bash
# A vanished peer with real clients: an unmodified verbs
# program runs as server and client under `rocelab run`; once the client is
# transferring, the server process is killed (SIGKILL). The client's
# outstanding WRs must end in RETRY_EXC_ERR (status 12) after about
# timeout x (retry_cnt + 1) — the programs set retry_cnt 7 — so the client
# exits by itself, with an error, instead of hanging.
#
#   vanished_peer.sh ROCELAB [-e REGEX]... [-n] -- PROG ARGS...
#
# PROG gets -p PORT, a TCP port the script claims (tests/lib/harness.sh).
# -e: the client's final output must match (ERE).
# -n: server and client in two network namespaces joined by a veth pair
#     (netns_pair.sh): the ICMP comes back over a link, rate-limited.
# -R: an rdma_cm program (perftest -R): the client connects to the server's
#     RoCE address, and the server is ready once it listens (rocelab run
#     --explain: the rdma_cm shim says so on stderr).
# The client gets LIMIT seconds (default 60) to exit: more is a hang.
set -u
rocelab=$1
shift
. "$(dirname "$0")/../lib/harness.sh"
expect=() netns=0 rdmacm=0
while [ $# -gt 0 ]; do
  case $1 in
    -e) expect+=("$2"); shift 2 ;;
    -n) netns=1; shift ;;
    -R) rdmacm=1; shift ;;
    --) shift; break ;;
    *) echo "vanished_peer.sh: bad argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "vanished_peer.sh: usage" >&2; exit 2; }
port=$(claim_port) || exit 1
limit=${LIMIT:-60}
work=$(mktemp -d /tmp/rocelab-vanish.XXXXXX)
srv_pid="" cli_pid=""
. "$(dirname "$0")/netns_pair.sh"
cleanup() {
  [ -n "$srv_pid" ] && kill -9 "$srv_pid" 2>/dev/null
  [ -n "$cli_pid" ] && kill -9 "$cli_pid" 2>/dev/null
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT

# Addresses of their own, outside the 127.0.0.x pool that `rocelab run`
# allocates from: a process started meanwhile by a parallel test must not
# take over the dead server's address (its device would silently drop the
# retransmissions — no ICMP — and only the seven retries of retry_cnt 7 would end it).
net=$(net_of "$port")
server_ip=127.0.0.1 srv_prefix=() cli_prefix=() srv_opts=(--ip "$net.1") cli_opts=(--ip "$net.2")
[ $netns = 1 ] && netns_up "$port"
[ $rdmacm = 1 ] && [ $netns = 0 ] && server_ip=$net.1
# `rocelab run` (and ip netns exec) exec the program: $! is the server program itself.
# (-R: --explain, so the rdma_cm shim says on stderr when the server listens.)
explain=() req2=()
[ $rdmacm = 1 ] && explain=(--explain)
# perftest -R connects twice; its second REQ is held back 500 ms so that a late
# server is listening again (tests/rdmacm/CMakeLists.txt, PERFTEST_REQ2).
[ $rdmacm = 1 ] && req2=(--drop-schedule=delay:qpn=1:nth=3:delay=500ms)
"${srv_prefix[@]}" "$rocelab" run "${explain[@]}" "${srv_opts[@]}" -- "$@" -p "$port" >"$work/server.out" 2>&1 &
srv_pid=$!
for _ in $(seq 1 400); do
  if [ $rdmacm = 1 ]; then
    grep -q "rocelab: rdma_listen on" "$work/server.out" && break
  else
    "${srv_prefix[@]}" ss -Hltn "sport = :$port" | grep -q . && break
  fi
  kill -0 "$srv_pid" 2>/dev/null || break
  sleep 0.05
done
"${cli_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run "${cli_opts[@]}" "${req2[@]}" --pcap "$work/client.pcap" -- \
  "$@" -p "$port" "$server_ip" >"$work/client.out" 2>&1 &
cli_pid=$!

# The programs' stdout is a file, so buffered: what shows the client is
# transferring is its own capture (rocelab run --pcap) growing past 256 KiB.
transferring=0
for _ in $(seq 1 600); do
  size=$(stat -c %s "$work/client.pcap" 2>/dev/null || echo 0)
  if [ "$size" -gt 262144 ]; then transferring=1; break; fi
  kill -0 "$cli_pid" 2>/dev/null || break
  sleep 0.05
done
if [ $transferring = 0 ] || ! kill -0 "$cli_pid" 2>/dev/null; then
  echo "FAIL: the client never started transferring"
  echo "--- client"; cat "$work/client.out"; echo "--- server"; cat "$work/server.out"
  exit 1
fi
if ! kill -0 "$srv_pid" 2>/dev/null; then
  echo "FAIL: the server ended before it could be killed mid-transfer"
  echo "--- server"; cat "$work/server.out"
  exit 1
fi
kill -9 "$srv_pid"
wait "$srv_pid" 2>/dev/null
srv_pid=""
start=$(date +%s%N)
wait "$cli_pid"
cli_rc=$?
cli_pid=""
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))

echo "--- client (exit $cli_rc, ${took_ms} ms after the server was killed)"
cat "$work/client.out"
fail=0
if [ $cli_rc = 124 ] || [ $cli_rc = 137 ]; then
  echo "FAIL: the client hung: killed after ${limit}s"
  fail=1
elif [ $cli_rc = 0 ]; then
  echo "FAIL: the client exited 0 although its peer vanished"
  fail=1
fi
for re in "${expect[@]}"; do
  grep -Eq -- "$re" "$work/client.out" || { echo "FAIL: client output lacks /$re/"; fail=1; }
done
[ $fail = 0 ] && echo "PASS"
exit $fail
