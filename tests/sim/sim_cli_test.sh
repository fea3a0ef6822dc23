#!/bin/bash
# `rocelab sim` as a user runs it: exit 1 and expected-vs-got for a failed
# expectation; exit 2 with file:line for a scenario that does not parse or
# names an unknown object; --pcap (read back by rocelab decode and by tshark),
# --events (read back by rocelab events) and --svg (well-formed XML).
# Usage: sim_cli_test.sh ROCELAB LABS_DIR
set -u
rocelab=$1
labs=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A failed expectation: exit 1, the line of the step, what was expected and what came.
sed 's/name: "out_of_seq_request" value: 2/name: "out_of_seq_request" value: 5/' \
  "$labs/03-lost-packet-go-back-n.textproto" > "$dir/wrong.textproto"
out=$("$rocelab" sim "$dir/wrong.textproto")
rc=$?
[ $rc = 1 ] || fail "a failed expectation exited $rc"
line=$(grep -n 'out_of_seq_request' "$dir/wrong.textproto" | cut -d: -f1)
grep -qF "$dir/wrong.textproto:$line: expected b out_of_seq_request = 5, got 2" <<< "$out" ||
  fail "failed expectation text: $(tail -3 <<< "$out")"
grep -q "✗ expected b out_of_seq_request = 5, got 2" <<< "$out" || fail "the ladder does not mark the failure"

# A refusal that was not expected is a failure too.
cat > "$dir/refused.textproto" <<'TP'
node { name: "n" cq { name: "c" } qp { name: "q" type: "RC" send_cq: "c" } }
step { modify_qp { qp: "q" state: "RTR" mask: "STATE" } }
TP
out=$("$rocelab" sim "$dir/refused.textproto")
rc=$?
[ $rc = 1 ] || fail "an unexpected refusal exited $rc"
grep -qF "refused.textproto:2: modify_qp q to RTR [STATE] failed: EINVAL" <<< "$out" || fail "refusal text: $out"
grep -q "RESET->RTR on RC: no such transition" <<< "$out" || fail "no reason for the refusal: $out"

# Does not parse: file:line:column, exit 2.
printf 'node { name: "n"\n  cq { nam: "c" }\n}\n' > "$dir/typo.textproto"
out=$("$rocelab" sim "$dir/typo.textproto" 2>&1)
rc=$?
[ $rc = 2 ] || fail "a parse error exited $rc"
grep -qF "typo.textproto:2:" <<< "$out" || fail "parse error without file:line: $out"
grep -q 'nam' <<< "$out" || fail "parse error does not name the field: $out"

# An unknown object: file:line of the step, exit 2.
printf 'node { name: "n" cq { name: "c" } qp { name: "q" type: "RC" send_cq: "c" } }\n\nstep { expect_qp { qp: "nobody" state: "RTS" } }\n' \
  > "$dir/unknown.textproto"
out=$("$rocelab" sim "$dir/unknown.textproto" 2>&1)
rc=$?
[ $rc = 2 ] || fail "an unknown object exited $rc"
grep -qF 'unknown.textproto:3: no qp is named "nobody"' <<< "$out" || fail "unknown object text: $out"
printf 'node { name: "n" cq { name: "c" } qp { name: "q" type: "XRC" send_cq: "c" } }\n' > "$dir/type.textproto"
out=$("$rocelab" sim "$dir/type.textproto" 2>&1)
[ $? = 2 ] || fail "a bad QP type did not exit 2"
grep -qF 'type.textproto:1: qp q: type must be RC, UC or UD' <<< "$out" || fail "bad type text: $out"
"$rocelab" sim "$dir/does-not-exist.textproto" > "$dir/o" 2>&1
[ $? = 2 ] || fail "a missing file did not exit 2"
grep -q "No such file" "$dir/o" || fail "missing file text: $(cat "$dir/o")"

# The records: pcap, event log, SVG.
"$rocelab" sim "$labs/03-lost-packet-go-back-n.textproto" --pcap "$dir/l3.pcap" --events "$dir/l3.events" \
  --svg "$dir/l3.svg" > "$dir/ladder.txt" || fail "lab 3 with records exited $?"
"$rocelab" decode "$dir/l3.pcap" > "$dir/decoded.txt" || fail "rocelab decode of the sim's pcap exited $?"
# 4 packets, the NAK, 3 retransmitted, the ACK (the lost one is in the pcap too: recorded as sent).
n=$(grep -c 'RC RDMA WRITE' "$dir/decoded.txt")
[ "$n" = 7 ] || fail "decode shows $n RDMA WRITE packets, want 7"
if command -v tshark > /dev/null; then
  t=$(tshark -r "$dir/l3.pcap" -Y 'infiniband.bth.opcode == 17' -T fields -e infiniband.aeth.syndrome 2>/dev/null | sort | uniq -c)
  grep -q '96' <<< "$t" || fail "tshark sees no NAK (syndrome 96) in the sim's pcap: $t"
  p=$(tshark -r "$dir/l3.pcap" -Y 'infiniband.bth.opcode == 7' -T fields -e infiniband.bth.psn 2>/dev/null | tr '\n' ' ')
  [ "$p" = "1 2 1 2 " ] || fail "tshark: WRITE Middle PSNs '$p', want '1 2 1 2 '"
fi
"$rocelab" events "$dir/l3.events" > "$dir/events.txt" || fail "rocelab events exited $?"
grep -q 'TIMER\|COMPLETION' "$dir/events.txt" || fail "the event log has no completion: $(head -3 "$dir/events.txt")"
python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$dir/l3.svg" || fail "the SVG is not well-formed XML"
grep -q 'RC RDMA WRITE Middle psn 1 len 1024 (again)' "$dir/l3.svg" || fail "the SVG lacks the retransmission"

# Determinism: twice the same ladder.
"$rocelab" sim "$labs/03-lost-packet-go-back-n.textproto" > "$dir/again.txt"
cmp -s "$dir/ladder.txt" "$dir/again.txt" || fail "two runs of lab 3 differ"

# --step: one line per Enter. After two Enters it has printed the title, the
# header and three rows, and waits; "q" prints the rest; the whole equals
# the plain ladder.
python3 - "$rocelab" "$labs/03-lost-packet-go-back-n.textproto" "$dir/ladder.txt" <<'PY' || fail "--step"
import os, select, subprocess, sys, time
rocelab, lab, plain = sys.argv[1:]
p = subprocess.Popen([rocelab, "sim", "--step", lab], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
os.set_blocking(p.stdout.fileno(), False)
def drain(wait):
    out, end = b"", time.time() + wait
    while time.time() < end:
        if select.select([p.stdout], [], [], 0.05)[0]:
            chunk = p.stdout.read()
            if chunk:
                out += chunk
    return out
got = drain(1.0)
p.stdin.write(b"\n\n"); p.stdin.flush()
got += drain(1.0)
lines = got.decode().split("\n")
# title, blank, header, 3 rows shown (the third without its newline yet)
if len(lines) != 6 or "0.000" not in lines[5]:
    sys.exit(f"after two Enters: {lines!r}")
p.stdin.write(b"q\n"); p.stdin.close()
got += drain(1.0)
p.wait(timeout=10)
want = open(plain, "rb").read()
if got != want:
    sys.exit("--step output differs from the plain ladder")
PY

[ $failures = 0 ] && echo "rocelab sim: exit codes, messages and records as expected"
exit $((failures > 0))
