#!/bin/bash
# `rocelab loopback` never hangs. On both transports, for every
# --op of RC, an error completion (100 % loss, retry_cnt 2) ends the run at
# once: exit 1, the summary printed, the operations left not run. A break in
# the middle of a run (every WRITE packet dropped after the SENDs succeeded)
# does the same. UC and UD under 100 % loss count every message lost and end
# too (they have no error completion to give). Each run is bounded by
# `timeout` far above its expected runtime (milliseconds; UC/UD over UDP wait
# 50 ms per lost message).
# Usage: loopback_error_exit_test.sh ROCELAB
set -uo pipefail
rocelab=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0

# expect CODE PATTERN... -- ARGS: run `rocelab loopback ARGS`, check the exit
# code and that every PATTERN (grep -E) is in the output.
expect() {
  local code=$1; shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  timeout 30 "$rocelab" loopback "$@" > "$out" 2>&1
  local rc=$?
  local ok=1
  if [ "$rc" = 124 ]; then echo "HANG (killed after 30 s): rocelab loopback $*"; ok=0
  elif [ "$rc" != "$code" ]; then echo "exit $rc, expected $code: rocelab loopback $*"; ok=0
  fi
  for p in "${patterns[@]}"; do
    grep -Eq "$p" "$out" || { echo "missing '$p': rocelab loopback $*"; ok=0; }
  done
  if [ $ok = 0 ]; then cat "$out"; failures=$((failures + 1)); fi
}

for net in sim udp; do
  for op in send write read atomic; do
    expect 1 "status RETRY_EXC_ERR" "^operations 0, bytes 0, errors 1," \
      "stopped at the first failed operation \(RETRY_EXC_ERR\): 9 operations not run" -- \
      --transport "$net" --qp-type rc --op "$op" --count 10 --loss 1 --retry-cnt 2 --timeout 8
  done
  expect 1 "stopped at the first failed operation \(RETRY_EXC_ERR\): 39 operations not run" -- \
    --transport "$net" --qp-type rc --op all --count 10 --loss 1 --retry-cnt 2 --timeout 8
  # The SENDs succeed, the first WRITE breaks the connection; READ and ATOMIC are not run.
  # (Timeout 67 ms: with 1 ms a busy machine delays ACKs past two timeouts, and a SEND fails.)
  expect 1 "WRITE: status RETRY_EXC_ERR" "^operations 10, bytes 40960, errors 1," \
    "stopped at the first failed operation \(RETRY_EXC_ERR\): 29 operations not run" -- \
    --transport "$net" --qp-type rc --op all --count 10 --retry-cnt 1 --timeout 14 \
    --drop-schedule 'drop:class=write'
  expect 0 "UC does not retransmit: delivered 0, lost 20" -- \
    --transport "$net" --qp-type uc --op all --size 1024 --count 10 --loss 1
  expect 0 "UD does not retransmit: delivered 0, lost 10" -- \
    --transport "$net" --qp-type ud --op all --size 1024 --count 10 --loss 1
done

[ $failures = 0 ] && echo ok
exit $((failures > 0))
