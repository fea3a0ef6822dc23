#!/bin/bash
# The RDMA key-value store of examples/kvstore (kv_server, kv_client: plain
# libibverbs/librdmacm C) under `rocelab run`, server and clients as separate
# processes.
#
#   kvstore.sh ROCELAB BINDIR [CASE...]
#
# BINDIR holds kv_server and kv_client. CASEs (default: all but netns):
#   check   two --check clients at once, 1 % loss on every side (--loss 0.01,
#           fixed seeds): every GET returns the last PUT's value
#   torn    a writer PUTs one 4000-byte key as all-'A' / all-'B' in turn (the
#           server pauses mid-write, --write-delay-us), two readers GET it (one
#           READ per GET, and two READs per GET with --read-hint 0) with 1 %
#           loss: no GET may return a mix, and torn copies must have been seen
#           and retried (else the test exercised nothing)
#   load    the load generator finishes and prints its result line
#   tcp     the same load over TCP (kv_server --tcp, no rocelab)
#   errors  bad arguments exit 2; a client with nobody listening exits 1 with
#           a message, in bounded time
#   netns   the check case between two network namespaces over veth (exit 77
#           where namespaces cannot be made)
# The script claims a TCP port (tests/lib/harness.sh): the rdma_cm port and the
# TCP port of the pair, and its 127.A.B.x addresses (net_of). Every program is
# bounded (TIMEOUT, default 120 s).
set -u
rocelab=$1 bindir=$2
shift 2
cases=("$@")
[ ${#cases[@]} = 0 ] && cases=(check torn load tcp errors)
. "$(dirname "$0")/../lib/harness.sh"
for b in kv_server kv_client; do
  [ -x "$bindir/$b" ] || fail "$bindir/$b missing"
done
port=$(claim_port) || exit 1
net=$(net_of "$port")
limit=${TIMEOUT:-120}
work=$(mktemp -d /tmp/rocelab-kvstore.XXXXXX)
server_ip=$net.1
srv_prefix=() cli_prefix=() srv_opts=(--ip "$net.1") pids=()

. "$(dirname "$0")/netns_pair.sh"
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT

# start_server OUT [ROCELAB_OPTION...] -- KV_SERVER_ARGS...   (rocelab run; OUT
# relative to $work). With the first ROCELAB_OPTION "none", no rocelab.
start_server() {
  local out=$work/$1 ropts=()
  shift
  while [ "$1" != -- ]; do ropts+=("$1"); shift; done
  shift
  if [ "${ropts[0]:-}" = none ]; then
    timeout -k 5 "$limit" "$bindir/kv_server" -p "$port" "$@" >"$out" 2>&1 &
  else
    "${srv_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run "${srv_opts[@]}" "${ropts[@]}" -- \
      "$bindir/kv_server" -p "$port" "$@" >"$out" 2>&1 &
  fi
  srv_pid=$!
  pids+=($srv_pid)
  # The server says so once it listens (an rdma_cm port is the emulated
  # device's: ss cannot see it).
  wait_line "$out" "^kv_server: listening" $srv_pid || { cat "$out"; fail "kv_server did not start"; }
}

# start_client OUT IP [ROCELAB_OPTION...] -- KV_CLIENT_ARGS...   in the
# background; its pid in $cli_pid. IP "none": no rocelab.
start_client() {
  local out=$work/$1 ip=$2 ropts=()
  shift 2
  while [ "$1" != -- ]; do ropts+=("$1"); shift; done
  shift
  if [ "$ip" = none ]; then
    timeout -k 5 "$limit" "$bindir/kv_client" -p "$port" "$@" "$server_ip" >"$out" 2>&1 &
  else
    "${cli_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run --ip "$ip" "${ropts[@]}" -- \
      "$bindir/kv_client" -p "$port" "$@" "$server_ip" >"$out" 2>&1 &
  fi
  cli_pid=$!
  pids+=($cli_pid)
}

# finish NAME PID WANT_RC OUT ERE...: waits for PID, prints its output, checks
# its exit status and that each ERE matches a line.
finish() {
  local name=$1 pid=$2 want=$3 out=$work/$4 rc
  shift 4
  wait "$pid"
  rc=$?
  echo "===== $name (exit $rc)"
  cat "$out"
  check "$name exit status" "$rc" "$want"
  for re in "$@"; do
    grep -Eq -- "$re" "$out" || { echo "FAIL: $name output lacks /$re/"; status=1; }
  done
}

# The number after KEY= on the line of OUT matching ERE.
field() { grep -E -- "$2" "$work/$1" | tail -1 | sed -nE "s/.* $3=([0-9]+).*/\1/p"; }

case_check() {
  local c1=$net.2 c2=$net.3
  [ ${#cli_prefix[@]} -gt 0 ] && c1=198.18.0.2 c2=198.18.0.3
  start_server check_srv --loss 0.01 --seed 11 --mtu 1024 -- --clients 2
  start_client check_c1 "$c1" --loss 0.01 --seed 12 --mtu 1024 -- --check -n 1500 --keys 150 --value-size 2500 --seed 1
  local p1=$cli_pid
  start_client check_c2 "$c2" --loss 0.01 --seed 13 --mtu 1024 -- --check -n 1500 --keys 150 --value-size 300 --seed 2
  local p2=$cli_pid
  local pass="^kv_client: check mode=rdma ops=1500 puts=[0-9]+ gets=[0-9]+ found=[1-9][0-9]* .* mismatches=0 .*-> PASS$"
  finish "check client 1" $p1 0 check_c1 "$pass"
  finish "check client 2" $p2 0 check_c2 "$pass"
  finish "check server" $srv_pid 0 check_srv "^kv_server: done: 2 clients served"
}

case_torn() {
  start_server torn_srv --loss 0.01 --seed 21 --mtu 1024 -- --clients 3 --write-delay-us 20
  start_client torn_w "$net.2" --mtu 1024 -- --torn write --seconds 12
  local pw=$cli_pid
  start_client torn_r1 "$net.3" --loss 0.01 --seed 22 --mtu 1024 -- --torn read -n 1500
  local pr1=$cli_pid
  start_client torn_r2 "$net.4" --loss 0.01 --seed 23 --mtu 1024 -- --torn read -n 1500 --read-hint 0
  local pr2=$cli_pid
  local pass="^kv_client: torn-reader mode=rdma gets=1500 all_A=[1-9][0-9]* all_B=[1-9][0-9]* mixed=0 .*-> PASS$"
  finish "torn reader (one READ per GET)" $pr1 0 torn_r1 "$pass"
  finish "torn reader (two READs per GET)" $pr2 0 torn_r2 "$pass"
  finish "torn writer" $pw 0 torn_w "^kv_client: torn-writer mode=rdma puts=[1-9]"
  finish "torn server" $srv_pid 0 torn_srv "^kv_server: done: 3 clients served"
  local t1 t2
  t1=$(field torn_r1 torn-reader torn_detected) t2=$(field torn_r2 torn-reader torn_detected)
  if [ "${t1:-0}" -gt 0 ] && [ "${t2:-0}" -gt 0 ]; then
    echo "ok: torn copies detected and read again: $t1 and $t2"
  else
    echo "FAIL: a reader saw no torn copy (${t1:-?}, ${t2:-?}): the test did not exercise the detection"
    status=1
  fi
}

result_re() {
  echo "^kv_client: result mode=$1 ops=$2 gets=[0-9]+ puts=[0-9]+ keys=[0-9]+ value_size=[0-9]+ secs=[0-9.]+ ops_per_sec=[0-9]+ p50_us=[0-9.]+ p90_us=[0-9.]+ p99_us=[0-9.]+ p999_us=[0-9.]+ torn_retries=[0-9]+ errors=0$"
}

case_load() {
  start_server load_srv -- --clients 1
  start_client load_c "$net.2" -- -n 5000 --keys 500 --value-size 256 --get-ratio 0.9
  finish "load client" $cli_pid 0 load_c "$(result_re rdma 5000)"
  finish "load server" $srv_pid 0 load_srv "^kv_server: done: 1 clients served"
}

case_tcp() {
  server_ip=127.0.0.1
  start_server tcp_srv none -- --tcp -a 127.0.0.1 --clients 1
  start_client tcp_c none -- --tcp -n 5000 --keys 500 --value-size 256 --get-ratio 0.9
  finish "tcp client" $cli_pid 0 tcp_c "$(result_re tcp 5000)"
  finish "tcp server" $srv_pid 0 tcp_srv "^kv_server: done: 1 clients served"
  server_ip=$net.1
}

case_errors() {
  start_client err_args none -- --get-ratio 2
  finish "bad --get-ratio" $cli_pid 2 err_args "get-ratio must be a number in 0..1"
  start_client err_mode none -- --torn sideways
  finish "bad --torn" $cli_pid 2 err_mode "--torn takes 'write' or 'read'"
  # Nobody holds the server's address: the REQ goes unanswered.
  start_client err_nobody "$net.2" -- --timeout-ms 3000 -n 10
  finish "client, no server" $cli_pid 1 err_nobody "^kv_client: error: connecting: "
  # A server, but not on that port: rejected (REJ reason 8).
  start_server err_srv -- --clients 1
  port=$((port + 1)) start_client err_port "$net.2" -- -n 10
  finish "client, wrong port" $cli_pid 1 err_port \
    "^kv_client: error: connecting: got RDMA_CM_EVENT_REJECTED \(status 8\).*nobody listens"
  # The server dies (SIGKILL) under a client's PUTs: the client ends with an
  # error, not a hang (its own timeout, or RC's retries running out).
  start_client err_killed "$net.2" -- --torn write --seconds 60 --timeout-ms 5000
  wait_line "$work/err_srv" "client 1 connected" $cli_pid
  sleep 1
  local victim
  victim=$(pgrep -P $srv_pid -x kv_server) || victim=$(pgrep -P $srv_pid)
  kill -KILL $victim
  wait $srv_pid 2>/dev/null
  local t0=$SECONDS
  finish "client, server killed" $cli_pid 1 err_killed \
    "^kv_client: error: (SEND \(PUT\) completed with error|no completion within)"
  check "client, server killed: gave up within 20 s" $((SECONDS - t0 <= 20)) 1
}

case_netns() {
  netns_up "$port"
  # the second client's address
  ip -n "$ns_b" addr add 198.18.0.3/24 dev "vb-$port" || fail "cannot add 198.18.0.3 in $ns_b"
  case_check
}

for c in "${cases[@]}"; do
  declare -F "case_$c" >/dev/null || fail "unknown case $c"
  echo "##### $c"
  "case_$c"
done
exit $status
