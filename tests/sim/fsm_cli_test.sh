#!/bin/bash
# `rocelab fsm` as a user runs it: the table, DOT and an SVG drawn by the real
# Graphviz; `rocelab fsm check` exits 0 for a legal modify, 1 for a refused one
# (naming what is missing), 2 for bad arguments.
# Usage: fsm_cli_test.sh ROCELAB
set -u
rocelab=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$("$rocelab" fsm --type ud) || fail "fsm --type ud exited $?"
grep -q "^RTR    RTS    SQ_PSN " <<< "$out" || fail "ud table: $out"

"$rocelab" fsm --type rc --dot "$dir/rc.dot" --svg "$dir/rc.svg" || fail "fsm --svg exited $?"
grep -q "INIT -> RTR" "$dir/rc.dot" || fail "no INIT -> RTR in the DOT"
grep -q "<svg" "$dir/rc.svg" || fail "no SVG written"
grep -q ">DEST_QPN<" "$dir/rc.svg" || fail "the SVG does not name DEST_QPN"

out=$("$rocelab" fsm check --type rc --from INIT --to RTR --mask STATE,AV,PATH_MTU)
rc=$?
[ $rc = 1 ] || fail "refused modify exited $rc"
grep -q "^modify_qp INIT->RTR on RC: missing RQ_PSN, MIN_RNR_TIMER, MAX_DEST_RD_ATOMIC, DEST_QPN$" <<< "$out" ||
  fail "refusal text: $out"

out=$("$rocelab" fsm check --type rc --from INIT --to RTR \
      --mask 'IBV_QP_STATE|IBV_QP_AV|IBV_QP_PATH_MTU|IBV_QP_DEST_QPN|IBV_QP_RQ_PSN|IBV_QP_MAX_DEST_RD_ATOMIC|IBV_QP_MIN_RNR_TIMER')
rc=$?
[ $rc = 0 ] || fail "legal modify exited $rc: $out"
grep -q "INIT->RTR on RC: allowed" <<< "$out" || fail "legal text: $out"

for bad in "--type xrc --from INIT --to RTR" "--from BOGUS --to RTR" "--from INIT --to RTR --mask STATE,NOPE"; do
  # shellcheck disable=SC2086
  "$rocelab" fsm check $bad > "$dir/o" 2>&1
  rc=$?
  [ $rc = 2 ] || fail "bad arguments '$bad' exited $rc: $(cat "$dir/o")"
done
"$rocelab" fsm --type zz > /dev/null 2>&1
[ $? = 2 ] || fail "fsm --type zz did not exit 2"

[ $failures = 0 ] && echo ok
exit $((failures > 0))
