#!/bin/bash
# Runs an unmodified rdma_cm program as server and client under `rocelab run`
# and checks both: exit status and every expected line (extended regex).
#
#   cm_pair.sh ROCELAB [options] -- SERVER ARGS... -- CLIENT ARGS...
#
# The script claims a port (tests/lib/harness.sh, claim_port) and takes the
# addresses of its /24 (net_of: NET.1 the server's, NET.2 the client's), so no
# other test of any rocelab suite on the machine holds them. In the arguments
# @SIP@ stands for the server's address, @CIP@ for the client's and @GROUP@
# for a multicast group of the pair's own (239.A.B.1, NET = 127.A.B). Each side
# gets its address with `rocelab run --ip` (the server's is what the client
# connects to). Options:
#   -e RE   both outputs must match        -S RE  the server's must
#   -C RE   the client's must              -r OPT passed to both `rocelab run`s
#   -x OPT  passed to the client's `rocelab run` only; -y OPT: the server's only
#   -c CAP  the server writes a pcap        -f RC  the client must exit RC (default 0)
#   -a NET  the addresses are NET.1 and NET.2 of the caller's 127.A.B, the
#           net_of of a port it claimed (it checks what it sees on them)
#   -L      the server does not listen (mckey): wait for its device instead
#   -k      the server is only started (killed at the end; its status not checked)
#   -s RE   skip (exit 77) when either output matches RE (a capability not there)
#   -6      with -n: IPv6 addresses on the veth pair (fd00:P::1 and ::2, P the
#           claimed port % 1000)
#   -n      the two run in network namespaces joined by a veth pair named after
#           the claimed port (198.18.0.1 and 198.18.0.2, tests/shim/netns_pair.sh);
#           77 (skipped) where namespaces cannot be made
# Each program gets a bounded time (TIMEOUT, default 120 s); nothing hangs.
set -u
rocelab=$1
shift
. "$(dirname "$0")/../lib/harness.sh"
nolisten=0 cli_only=() srv_only=() v6=0 skip_re="" expect=() client_expect=() server_expect=() run_opts=() netns=0 capture="" client_rc=0 keep=0 net=""
while [ $# -gt 0 ]; do
  case $1 in
    -e) expect+=("$2"); shift 2 ;;
    -C) client_expect+=("$2"); shift 2 ;;
    -S) server_expect+=("$2"); shift 2 ;;
    -r) run_opts+=("$2"); shift 2 ;;
    -x) cli_only+=("$2"); shift 2 ;;
    -y) srv_only+=("$2"); shift 2 ;;
    -c) capture=$2; shift 2 ;;
    -f) client_rc=$2; shift 2 ;;
    -a) net=$2; shift 2 ;;
    -k) keep=1; shift ;;
    -L) nolisten=1; shift ;;
    -s) skip_re=$2; shift 2 ;;
    -n) netns=1; shift ;;
    -6) v6=1; shift ;;
    --) shift; break ;;
    *) echo "cm_pair.sh: bad argument $1" >&2; exit 2 ;;
  esac
done
server=() client=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server+=("$1"); shift; done
[ $# -gt 0 ] && shift
client=("$@")
[ ${#server[@]} -gt 0 ] && [ ${#client[@]} -gt 0 ] || { echo "cm_pair.sh: need a server and a client" >&2; exit 2; }
port=$(claim_port) || exit 1
[ -n "$net" ] || net=$(net_of "$port")
server_ip=$net.1 client_ip=$net.2 group=239.${net#127.}.1
limit=${TIMEOUT:-120}
work=$(mktemp -d /tmp/rocelab-cmpair.XXXXXX)
srv_prefix=() cli_prefix=() srv_opts=(--ip "$server_ip") cli_opts=(--ip "$client_ip")

. "$(dirname "$0")/../shim/netns_pair.sh"
cleanup() {
  [ -n "${srv_pid:-}" ] && kill "$srv_pid" 2>/dev/null
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT
[ $netns = 1 ] && netns_up "$port"
[ $netns = 1 ] && client_ip=198.18.0.2
if [ $netns = 1 ] && [ $v6 = 1 ]; then
  net6=fd00:$((port % 1000))
  ip -n "$ns_a" addr add "$net6::1/64" dev "va-$port" nodad &&
  ip -n "$ns_b" addr add "$net6::2/64" dev "vb-$port" nodad || { echo "SKIP: no IPv6 on the veth pair"; exit 77; }
  server_ip=$net6::1 client_ip=$net6::2
  srv_opts=(--ip "$server_ip") cli_opts=(--ip "$client_ip")
fi
[ -n "$capture" ] && srv_opts+=(--pcap "$capture")
server=("${server[@]//@SIP@/$server_ip}")
client=("${client[@]//@SIP@/$server_ip}")
server=("${server[@]//@CIP@/$client_ip}")
client=("${client[@]//@CIP@/$client_ip}")
server=("${server[@]//@GROUP@/$group}")
client=("${client[@]//@GROUP@/$group}")

run_once() {
  "${srv_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run --explain "${run_opts[@]}" "${srv_only[@]}" "${srv_opts[@]}" -- \
    "${server[@]}" >"$work/server.out" 2>&1 &
  srv_pid=$!
  # The server runs with --explain: the rdma_cm shim says on stderr (unbuffered)
  # when an id listens. Wait for that (bounded); with -L (a server that does not
  # listen, mckey) for its device to hold UDP 4791 and a moment more. The client
  # starts either way: if the server is not ready, the checks below say so.
  if [ $nolisten = 1 ]; then
    wait_udp_bound "$server_ip" 4791 $srv_pid "${srv_prefix[@]}" && sleep 0.5
  else
    wait_line "$work/server.out" "rocelab: rdma_listen on" $srv_pid
  fi
  "${cli_prefix[@]}" timeout -k 5 "$limit" "$rocelab" run "${run_opts[@]}" "${cli_only[@]}" "${cli_opts[@]}" -- \
    "${client[@]}" >"$work/client.out" 2>&1
  cli_rc=$?
  if [ $keep = 1 ]; then
    kill $srv_pid 2>/dev/null
    wait $srv_pid
    srv_rc=0
  else
    # A client that failed leaves a server waiting for it: give the server 10 s
    # to notice, then stop it, rather than wait out its whole time limit.
    if [ "$cli_rc" != "$client_rc" ]; then
      grep -qF "$perftest_no_clock" "$work/client.out" && kill $srv_pid 2>/dev/null
      for _ in $(seq 1 100); do kill -0 $srv_pid 2>/dev/null || break; sleep 0.1; done
      kill $srv_pid 2>/dev/null
    fi
    wait $srv_pid
    srv_rc=$?
  fi
  srv_pid=""
}
# perftest checks its clock against gettimeofday before anything else and
# gives up when the two disagree (r^2 < 0.9: a loaded 2-core machine), before
# any RDMA: then, and only then, the pair runs once more.
perftest_no_clock="Can't produce a report"
run_once
if cat "$work/server.out" "$work/client.out" | grep -qF "$perftest_no_clock"; then
  echo "note: perftest could not calibrate its clock ($(grep -h 'Correlation coefficient' "$work"/*.out | head -1)); running the pair once more"
  run_once
fi

if [ -n "$skip_re" ] && cat "$work/server.out" "$work/client.out" | grep -Eq -- "$skip_re"; then
  cat "$work/server.out" "$work/client.out"
  echo "SKIP: /$skip_re/"
  exit 77
fi
status=0
for side in server client; do
  rc=$([ $side = server ] && echo $srv_rc || echo $cli_rc)
  want=$([ $side = server ] && echo 0 || echo "$client_rc")
  echo "===== $side (exit $rc)"
  cat "$work/$side.out"
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $side exited $rc, expected $want"
    status=1
  fi
  res=("${expect[@]}")
  [ $side = client ] && res+=("${client_expect[@]}")
  [ $side = server ] && res+=("${server_expect[@]}")
  for re in "${res[@]}"; do
    if ! grep -Eq -- "$re" "$work/$side.out"; then
      echo "FAIL: $side output lacks /$re/"
      status=1
    fi
  done
done
exit $status
