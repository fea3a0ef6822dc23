#!/bin/bash
# `rocelab events`: an event log written by `rocelab loopback --events` reads
# back to the end as text and as JSON (one valid object per line, agreeing
# with the text); a log cut inside an event exits 1 after printing what came
# before; a missing file exits 2.
# Usage: events_cli_test.sh ROCELAB
set -u
rocelab=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
"$rocelab" loopback --transport sim --qp-type rc --op all --count 3 --events "$dir/ev" > /dev/null || fail "loopback"
"$rocelab" events "$dir/ev" > "$dir/text" || fail "events exited $?"
"$rocelab" events --json "$dir/ev" > "$dir/json" || fail "events --json exited $?"
n=$(wc -l < "$dir/text")
[ "$n" -gt 50 ] || fail "only $n events"
[ "$(wc -l < "$dir/json")" = "$n" ] || fail "text and JSON differ in count"
grep -q " rocelab1 COMPLETION qp 0x[0-9a-f]\{6\} wr_id 0 RECV SUCCESS len 4096$" "$dir/text" || fail "no RECV completion: $(head -3 "$dir/text")"
grep -q "PACKET_SENT qp 0x[0-9a-f]\{6\} RC RDMA READ Request" "$dir/text" || fail "no READ request"
python3 -c '
import json, sys
kinds = [json.loads(l)["kind"] for l in open(sys.argv[1])]
assert "PACKET_RECEIVED" in kinds and "COMPLETION" in kinds, kinds[:5]
' "$dir/json" || fail "JSON"
size=$(stat -c %s "$dir/ev")
head -c $((size - 3)) "$dir/ev" > "$dir/cut"
"$rocelab" events "$dir/cut" > "$dir/cut.out" 2> "$dir/cut.err"
[ $? = 1 ] || fail "a cut log did not exit 1"
[ "$(wc -l < "$dir/cut.out")" = $((n - 1)) ] || fail "a cut log printed $(wc -l < "$dir/cut.out") of $((n - 1)) whole events"
grep -q "damaged after event $((n - 1))" "$dir/cut.err" || fail "message: $(cat "$dir/cut.err")"
"$rocelab" events "$dir/none" > /dev/null 2>&1
[ $? = 2 ] || fail "a missing file did not exit 2"
[ $failures = 0 ] && echo "ok: $n events"
exit $((failures > 0))
