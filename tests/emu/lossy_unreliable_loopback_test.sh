#!/bin/bash
# UC and UD under loss on the simulated fabric. Neither retransmits,
# so `rocelab loopback` counts the lost messages instead of failing; it still
# checks every delivered message byte for byte and exits non-zero on any
# damaged or partial delivery. The run must exit 0 and report losses.
# Usage: lossy_unreliable_loopback_test.sh ROCELAB
set -euo pipefail
rocelab=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
check() {  # check TYPE EXPECTED-MESSAGES ARGS...
  local type=$1 total=$2
  shift 2
  "$rocelab" loopback --transport sim --qp-type "$type" "$@" > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
  grep -q "errors 0," "$dir/out" || { cat "$dir/out"; exit 1; }
  line=$(grep -E "does not retransmit: delivered [0-9]+, lost [1-9][0-9]*" "$dir/out") || { cat "$dir/out"; exit 1; }
  delivered=$(sed -E 's/.*delivered ([0-9]+), lost ([0-9]+).*/\1/' <<< "$line")
  lost=$(sed -E 's/.*delivered ([0-9]+), lost ([0-9]+).*/\2/' <<< "$line")
  [ "$delivered" -gt 0 ] && [ $((delivered + lost)) -eq "$total" ] || { echo "delivered+lost != $total"; cat "$dir/out"; exit 1; }
}
# UC: 4-packet SENDs and WRITE_WITH_IMMs, 5% packet loss, some reordering and duplication.
check uc 400 --op all --size 4000 --count 200 --loss 0.05 --reorder 0.05 --duplicate 0.02 --seed 3
# UD: one-packet datagrams, 20% loss.
check ud 300 --op send --size 1000 --count 300 --loss 0.2 --seed 5
echo ok
