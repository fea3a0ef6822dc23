#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz, built by `make build-fuzz` into
# BUILD/bin) for SECONDS each, one after the other, and prints one line per
# target: executions, coverage (edges), corpus size, crashes. Exit 1 when any
# target found a crash, a leak or a sanitizer report (its input is kept in
# BUILD/fuzz-artifacts/, the log in BUILD/fuzz-logs/).
#   tests/fuzz/run.sh BUILD SECONDS [TARGET...]
# Each target's corpus grows in BUILD/fuzz-corpus/<target> (what it found is
# kept between runs); the checked-in seeds in tests/fuzz/corpus/<target> are
# read too but never written.
set -u
build=${1:?usage: run.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: run.sh BUILD SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(wire_decode capture_decode engine_recv fault_schedule shim_config trace_capture check_sequence
                                  replay_capture)
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
status=0
printf '%-16s %10s %8s %8s %6s %s\n' target execs exec/s cov corpus result
for t in "${targets[@]}"; do
  bin="$build/bin/fuzz_$t"
  if [ ! -x "$bin" ]; then echo "run.sh: $bin missing (make build-fuzz)" >&2; exit 2; fi
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  log="$build/fuzz-logs/$t.log"
  # -rss_limit_mb: a queue that grew without bound is a finding too.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=1024 -timeout=10 \
      -artifact_prefix="$build/fuzz-artifacts/$t-" "$corpus" "$here/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then result=ok; else result="FAILED (exit $rc; see $log)"; status=1; fi
  printf '%-16s %10s %8s %8s %6s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$files" "$result"
done
exit $status
