#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz, built by `make build-fuzz` into
# BUILD/bin) for SECONDS each, JOBS targets at a time (default: the number of
# cores), and prints one line per target, in the order given: executions,
# coverage (edges), corpus size, crashes. Exit 1 when any target found a
# crash, a leak or a sanitizer report (its input is kept in
# BUILD/fuzz-artifacts/, the log in BUILD/fuzz-logs/).
#   tests/fuzz/run.sh [-j JOBS] BUILD SECONDS [TARGET...]
# Each target first runs every input of its corpora, then mutates them:
#   BUILD/fuzz-corpus/<target>   what this machine's runs found (grows)
#   tests/fuzz/corpus/<target>   the seeds make_seeds writes (read only)
#   tests/fuzz/kept/<target>     what long runs kept for coverage, and every
#                                finding's input (read only): a regression of
#                                a known finding fails in the first second.
set -u
jobs=$(nproc)
if [ "${1:-}" = -j ]; then jobs=${2:?-j needs a number}; shift 2; fi
build=${1:?usage: run.sh [-j JOBS] BUILD SECONDS [TARGET...]}
seconds=${2:?usage: run.sh [-j JOBS] BUILD SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(wire_decode capture_decode engine_recv fault_schedule shim_config trace_capture check_sequence
                                  replay_capture)
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
for t in "${targets[@]}"; do
  if [ ! -x "$build/bin/fuzz_$t" ]; then echo "run.sh: $build/bin/fuzz_$t missing (make build-fuzz)" >&2; exit 2; fi
done

# One target; its summary line goes to BUILD/fuzz-logs/<target>.line.
run_one() {
  local t=$1 corpus="$build/fuzz-corpus/$1" log="$build/fuzz-logs/$1.log"
  local dirs=("$corpus" "$here/corpus/$t")
  [ -d "$here/kept/$t" ] && dirs+=("$here/kept/$t")
  mkdir -p "$corpus"
  # -rss_limit_mb: a queue that grew without bound is a finding too.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/bin/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=1024 -timeout=10 \
      -artifact_prefix="$build/fuzz-artifacts/$t-" "${dirs[@]}" >"$log" 2>&1
  local rc=$? execs rate cov files result
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then result=ok; else result="FAILED (exit $rc; see $log)"; fi
  printf '%-16s %10s %8s %8s %6s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$files" "$result" \
    >"$build/fuzz-logs/$t.line"
  return $rc
}

running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  rm -f "$build/fuzz-logs/$t.line"
  run_one "$t" &
  running=$((running + 1))
done
wait
status=0
printf '%-16s %10s %8s %8s %6s %s\n' target execs exec/s cov corpus result
for t in "${targets[@]}"; do
  line="$build/fuzz-logs/$t.line"
  if [ -f "$line" ]; then cat "$line"; else printf '%-16s no result\n' "$t"; fi
  grep -q ' ok$' "$line" 2>/dev/null || status=1
done
exit $status
