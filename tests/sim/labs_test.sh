#!/bin/bash
# Every lab in docs/labs runs, its expectations hold (exit 0), and its ladder
# is the checked-in golden copy (docs/labs/golden/<lab>.txt) byte for byte:
# the simulation is deterministic, so any difference is a change in the
# engine's behaviour (or in the drawing) that the lab's worksheet must follow.
# To accept a deliberate change: LABS_UPDATE_GOLDEN=1 with this script.
# Usage: labs_test.sh ROCELAB LABS_DIR
set -u
rocelab=$1
labs=$2
failures=0
n=0
for lab in "$labs"/*.textproto; do
  name=$(basename "$lab" .textproto)
  golden="$labs/golden/$name.txt"
  n=$((n + 1))
  out=$("$rocelab" sim "$lab")
  rc=$?
  if [ $rc != 0 ]; then
    echo "FAIL: $name exited $rc"; echo "$out" | tail -20; failures=$((failures + 1)); continue
  fi
  if [ "${LABS_UPDATE_GOLDEN:-0}" = 1 ]; then printf '%s\n' "$out" > "$golden"; continue; fi
  if ! diff -u "$golden" <(printf '%s\n' "$out"); then
    echo "FAIL: $name: the ladder differs from $golden"; failures=$((failures + 1))
  fi
done
[ $n -ge 8 ] || { echo "FAIL: only $n labs in $labs"; failures=$((failures + 1)); }
[ $failures = 0 ] && echo "$n labs: expectations hold, ladders match their goldens"
exit $((failures > 0))
