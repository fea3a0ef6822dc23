# Shared helpers of the test scripts (sourced, not run).
#
#   fail MESSAGE...         prints "FAIL: MESSAGE" and exits 1
#   check WHAT GOT WANT     prints "ok: WHAT = GOT", or a FAIL line and sets
#                           status=1 (the script exits $status at the end)
#   claim_port [OWNER]      prints a TCP port that this script (or the process
#                           OWNER, a pid: a test program that is not a script)
#                           holds until it exits: no other test of any rocelab
#                           suite on the machine gets it, and nothing listens on
#                           it or is connected from it now. Scripts also name
#                           their network namespaces and veth pairs after it and
#                           derive 127.x.y.z addresses from it (see net_of).
#   net_of PORT             prints 127.A.B (a /24 of the loopback range that
#                           belongs to the holder of PORT; never 127.0.0, the
#                           addresses `rocelab run` gives devices without --ip)
#   wait_tcp_listen PORT PID [PREFIX...]
#                           waits until something listens on TCP PORT (looked
#                           up with `PREFIX ss`, e.g. PREFIX = ip netns exec NS),
#                           or PID has died, or 20 s have passed; returns 0 only
#                           in the first case. Servers of the programs under
#                           test accept exactly one connection: look with ss,
#                           never by connecting.
#   wait_udp_bound ADDR PORT PID [PREFIX...]
#                           the same for a UDP socket bound to ADDR:PORT (an
#                           IPv6 ADDR without brackets), e.g. an emulated
#                           device's on 4791: the device is up.
#   wait_line FILE ERE PID  waits until a line of FILE matches ERE (grep -E),
#                           or PID has died, or 20 s have passed; returns 0 only
#                           in the first case. For what only a program's output
#                           shows, e.g. `rocelab run --explain`'s "rocelab:
#                           rdma_listen on": rdma_cm ports are the emulated
#                           device's, which ss cannot see.
#   wait_pids               waits for every process of the array pids (each
#                           bounded by its own limit, e.g. `timeout`), their
#                           exit statuses in the array rcs, in order; empties pids
#   json_of FILE EXPR       prints the value of the Python expression EXPR over
#                           `objs`, the JSON objects of FILE (one per line, as
#                           rocelab's --json writes them): assertions on what a
#                           command found, not on its prose. E.g.
#                           json_of d.json 'sum(o["type"] == "packet" and not o["icrc_ok"] for o in objs)'
#
# Claims live in $ROCELAB_TEST_CLAIMS (default /tmp/rocelab-test-ports), one
# directory per port holding the claimant's pid; a claim whose process is gone
# is taken over. flock(1) serialises the claims of concurrent scripts.

fail() {
  echo "FAIL: $*"
  exit 1
}

status=0
check() {
  if [ "$2" = "$3" ]; then echo "ok: $1 = $2"; else echo "FAIL: $1 = '$2', want '$3'"; status=1; fi
}

rocelab_claims=${ROCELAB_TEST_CLAIMS:-/tmp/rocelab-test-ports}
rocelab_port_lo=24000 rocelab_port_n=4000

claim_port() {
  mkdir -p "$rocelab_claims" || return 1
  local holder=${1:-$$} fd p i owner start=$(( ($$ * 7919 + RANDOM) % rocelab_port_n ))
  exec {fd}>>"$rocelab_claims/lock" || return 1
  if ! flock -w 30 "$fd"; then
    exec {fd}>&-
    echo "claim_port: $rocelab_claims/lock held for 30 s by another script" >&2
    return 1
  fi
  for ((i = 0; i < rocelab_port_n; i++)); do
    p=$(( rocelab_port_lo + (start + i) % rocelab_port_n ))
    if [ -d "$rocelab_claims/$p" ]; then
      owner=$(cat "$rocelab_claims/$p/owner" 2>/dev/null)
      [ -n "$owner" ] && [ -d "/proc/$owner" ] && continue
    fi
    ss -Htan "sport = :$p" 2>/dev/null | grep -q . && continue
    mkdir -p "$rocelab_claims/$p" && echo "$holder" >"$rocelab_claims/$p/owner" || continue
    flock -u "$fd"
    exec {fd}>&-
    echo "$p"
    return 0
  done
  flock -u "$fd"
  exec {fd}>&-
  echo "claim_port: no free port in $rocelab_port_lo..$((rocelab_port_lo + rocelab_port_n - 1))" >&2
  return 1
}

net_of() {
  echo "127.$(($1 % 250 + 1)).$(($1 / 250 % 250 + 1))"
}

# Runs CMD... every 50 ms until it succeeds (0), PID has died (1) or 20 s
# have passed (1).
_wait_until() {
  local pid=$1
  shift
  for _ in $(seq 1 400); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# Whether CMD... prints anything.
_prints() { "$@" | grep -q .; }

wait_tcp_listen() {
  local port=$1 pid=$2
  shift 2
  _wait_until "$pid" _prints "$@" ss -Hltn "sport = :$port"
}

wait_udp_bound() {
  local addr=$1 port=$2 pid=$3
  shift 3
  [[ $addr == *:* ]] && addr="[$addr]"
  _wait_until "$pid" _prints "$@" ss -Hlun "src $addr:$port"
}

wait_line() {
  local file=$1 re=$2 pid=$3
  _wait_until "$pid" grep -Eq -- "$re" "$file" 2>/dev/null
}

# Waits for every process of the array pids (each bounded by its own time
# limit, e.g. `timeout`), their exit statuses in the array rcs, in order; then
# empties pids.
wait_pids() {
  rcs=()
  local p
  for p in "${pids[@]}"; do
    wait "$p"
    rcs+=($?)
  done
  pids=()
}

json_of() {
  python3 -c 'import json, sys
objs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(eval(sys.argv[2], {"objs": objs}))' "$1" "$2"
}
