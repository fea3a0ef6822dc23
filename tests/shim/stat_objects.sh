#!/bin/bash
# `rocelab stat` against a program whose every object it knows
# (programs/stat_objects.c): the program prints what the verbs gave it
# ("expect {...}") and waits; meanwhile `rocelab stat --json`, `rocelab stat`
# and `rocelab stat qp N --json` are asked; stat_objects_check.py compares
# each QP, CQ, MR, the SRQ, the multicast group and the counters, and the
# device's counters with what `rocelab run --counters` prints as it closes.
# Once the program has exited, its entry is gone and stat lists nobody. Then
# (as root, with runuser) the same program run by user nobody: nobody's
# `rocelab stat` lists it, root's does not (each user's registry is its own).
#
#   stat_objects.sh ROCELAB STAT_OBJECTS
#
# A runtime directory of its own (ROCELAB_RUNTIME_DIR) and a loopback address
# of its own (claim_port, net_of): nothing else in the suite is listed.
set -u
rocelab=$1 program=$2
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
ip=$(net_of "$port").1
work=$(mktemp -d /tmp/rocelab-stat.XXXXXX)
export ROCELAB_RUNTIME_DIR=$work/run
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  exec {hold}>&- 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

mkfifo "$work/stdin"
timeout -k 5 60 "$rocelab" run --ip "$ip" --counters -- "$program" <"$work/stdin" >"$work/out" 2>"$work/err" &
pid=$!
exec {hold}>"$work/stdin"  # its standard input stays open until we close this
wait_line "$work/out" "^expect " "$pid" || { cat "$work/out" "$work/err"; fail "stat_objects did not get ready"; }

"$rocelab" stat --json >"$work/stat.json" 2>"$work/stat.err"
check "rocelab stat --json exit" "$?" 0
"$rocelab" stat >"$work/stat.txt" 2>>"$work/stat.err"
check "rocelab stat exit" "$?" 0
qpn_a=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline()[7:])["qps"]["a"])' "$work/out")
"$rocelab" stat qp "$qpn_a" --json >"$work/qp.json" 2>>"$work/stat.err"
check "rocelab stat qp $qpn_a --json exit" "$?" 0
"$rocelab" stat qp 0xFFFFFE >/dev/null 2>"$work/noqp.err"
check "rocelab stat qp of no QP exit" "$?" 1
"$rocelab" stat qp nonsense >/dev/null 2>&1
check "rocelab stat qp nonsense exit" "$?" 2

exec {hold}>&-  # the program closes everything and exits
wait "$pid"
check "stat_objects exit" "$?" 0
pid=
grep -q "^stat_objects: closed" "$work/out" || { echo "FAIL: stat_objects did not close"; status=1; }

python3 "$(dirname "$0")/stat_objects_check.py" "$work/out" "$work/err" "$work/stat.json" "$work/qp.json" \
  "$work/stat.txt" || status=1

# Gone: its entry withdrawn at exit, nobody listed.
"$rocelab" stat --json >"$work/after.json"
check "processes listed after it exited" "$(json_of "$work/after.json" 'len(objs[0]["processes"])')" 0
check "entries left in the registry" "$(find "$ROCELAB_RUNTIME_DIR" -name '*.sock' | wc -l)" 0
[ -s "$work/stat.err" ] && { echo "FAIL: rocelab stat said:"; cat "$work/stat.err"; status=1; }

# Another user's processes: their own registry (the default runtime
# directory of each user, XDG_RUNTIME_DIR unset).
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null && runuser -u nobody -- true 2>/dev/null; then
  as_nobody() { runuser -u nobody -- env -u ROCELAB_RUNTIME_DIR -u XDG_RUNTIME_DIR "$@"; }
  chmod 755 "$work"
  mkfifo -m 666 "$work/stdin2"
  as_nobody timeout -k 5 60 "$rocelab" run --ip "$(net_of "$port").2" -- "$program" <"$work/stdin2" \
    >"$work/out2" 2>&1 &
  pid=$!
  exec {hold}>"$work/stdin2"
  wait_line "$work/out2" "^expect " "$pid" || { cat "$work/out2"; fail "stat_objects as nobody did not get ready"; }
  as_nobody "$rocelab" stat --json >"$work/nobody.json" 2>&1
  check "nobody's rocelab stat: stat_objects listed" \
    "$(json_of "$work/nobody.json" 'sum("shim_stat_objects" in p["cmdline"] and len(p["devices"][0]["qps"]) == 4 for p in objs[0]["processes"])')" 1
  nobody_pid=$(json_of "$work/nobody.json" '[p["pid"] for p in objs[0]["processes"] if "shim_stat_objects" in p["cmdline"]][0]')
  env -u ROCELAB_RUNTIME_DIR -u XDG_RUNTIME_DIR "$rocelab" stat --json >"$work/root.json" 2>/dev/null
  check "root's rocelab stat: nobody's process listed" "$(json_of "$work/root.json" "$nobody_pid in [p['pid'] for p in objs[0]['processes']]")" False
  exec {hold}>&-
  wait "$pid"
  check "stat_objects as nobody exit" "$?" 0
  pid=
else
  echo "note: not root or no runuser: another user's registry not tried"
fi
[ $status = 0 ] && echo "ok: rocelab stat showed every object of stat_objects right"
exit $status
