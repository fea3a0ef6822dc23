#!/bin/bash
# `rocelab ladder CAPTURE` as a user runs it: the ladder of a simulated run's
# capture shows the same packets (each arrow, the retransmissions marked) as
# `rocelab decode` lists; --svg is well-formed; exit 2 for a missing file or
# garbage, 1 for a capture cut in its last record (what was read is drawn).
# Usage: ladder_cli_test.sh ROCELAB LABS_DIR
set -u
rocelab=$1
labs=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$rocelab" sim "$labs/03-lost-packet-go-back-n.textproto" --pcap "$dir/l3.pcap" > /dev/null || fail "sim exited $?"
out=$("$rocelab" ladder "$dir/l3.pcap" --svg "$dir/l3.svg")
rc=$?
[ $rc = 0 ] || fail "ladder exited $rc"
arrows=$(grep -c '▶│\|│◀' <<< "$out")
decoded=$("$rocelab" decode "$dir/l3.pcap" | grep -c ' PSN=')
[ "$arrows" = 9 ] && [ "$decoded" = 9 ] || fail "ladder draws $arrows arrows, decode lists $decoded packets; want 9 and 9"
[ "$(grep -c '(again)' <<< "$out")" = 3 ] || fail "want 3 retransmissions marked: $out"
grep -q '◀─* RC Acknowledge psn 1 NAK PSN sequence error ──│' <<< "$out" || fail "no NAK arrow from bob to alice: $out"
grep -q '^9 RoCEv2 packets$' <<< "$out" || fail "summary line: $(tail -1 <<< "$out")"
python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$dir/l3.svg" || fail "the SVG is not well-formed"

# --max: the rest is counted, not drawn.
out=$("$rocelab" ladder --max 2 "$dir/l3.pcap")
grep -q '^9 RoCEv2 packets, 7 not drawn (--max 2)$' <<< "$out" || fail "--max 2: $(tail -1 <<< "$out")"

# Cut in the middle of the last record: exit 1, what came before is drawn.
size=$(stat -c %s "$dir/l3.pcap")
head -c $((size - 10)) "$dir/l3.pcap" > "$dir/cut.pcap"
out=$("$rocelab" ladder "$dir/cut.pcap" 2> "$dir/err")
rc=$?
[ $rc = 1 ] || fail "a cut capture exited $rc"
grep -q 'damaged' "$dir/err" || fail "a cut capture: $(cat "$dir/err")"
grep -q '^8 RoCEv2 packets$' <<< "$out" || fail "a cut capture: $(tail -1 <<< "$out")"

head -c 3000 /dev/urandom > "$dir/garbage.pcap"
"$rocelab" ladder "$dir/garbage.pcap" > /dev/null 2> "$dir/err"
[ $? = 2 ] || fail "garbage did not exit 2: $(cat "$dir/err")"
"$rocelab" ladder "$dir/none.pcap" > /dev/null 2> "$dir/err"
[ $? = 2 ] || fail "a missing file did not exit 2"
grep -q 'No such file' "$dir/err" || fail "missing file: $(cat "$dir/err")"

[ $failures = 0 ] && echo "rocelab ladder: packets, marks, exit codes as expected"
exit $((failures > 0))
