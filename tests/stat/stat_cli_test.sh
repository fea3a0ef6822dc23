#!/bin/bash
# `rocelab stat` as a user meets its bad situations, each in a runtime
# directory of its own (ROCELAB_RUNTIME_DIR): nobody there (exit 0, said so;
# --json an empty Host), an entry left by a process that is gone (removed, a
# note, exit 0), an entry answered by another rocelab's layout (exit 1, both
# versions named; left in place), a runtime directory others may write to
# (exit 2, refused), bad arguments (exit 2).
# Usage: stat_cli_test.sh ROCELAB
set -u
rocelab=$1
dir=$(mktemp -d /tmp/rocelab-stat-cli.XXXXXX)
fake=
trap '[ -n "$fake" ] && kill $fake 2>/dev/null; rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
export ROCELAB_RUNTIME_DIR=$dir/run

out=$("$rocelab" stat 2>"$dir/err")
rc=$?
[ $rc = 0 ] || fail "empty registry exited $rc"
[ "$out" = "no process on this host has an emulated device open" ] || fail "empty registry said: $out"
out=$("$rocelab" stat --json)
[ "$out" = '{"processes":[],"problems":[]}' ] || fail "empty registry's JSON: $out"

# The registry directory of this namespace, as the shim makes it.
reg=$dir/run/net-$(stat -L -c %i /proc/self/ns/net)/stat
mkdir -p "$reg"
chmod -R 700 "$dir/run"

# Left by a process that is gone: pid 0x7FFFFFF0 runs nowhere.
touch "$reg/2147483632-5.sock"
"$rocelab" stat >/dev/null 2>"$dir/err"
rc=$?
[ $rc = 0 ] || fail "stale entry exited $rc"
grep -q "^rocelab stat: note: pid 2147483632 is not running: its registry entry was removed$" "$dir/err" ||
  fail "stale entry note: $(cat "$dir/err")"
[ ! -e "$reg/2147483632-5.sock" ] || fail "stale entry not removed"

# Another rocelab's layout: a process (python) that answers with a header of
# layout 99 from version 9.9, on the entry its pid and start time name.
python3 - "$reg" >"$dir/fake.out" 2>&1 <<'PY' &
import os, socket, struct, sys
pid = os.getpid()
ticks = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
path = f"{sys.argv[1]}/{pid}-{ticks}.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(4)
print(path, flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"RLST" + struct.pack("=II", 99, 0) + b"9.9".ljust(32, b"\0"))
    c.close()
PY
fake=$!
for _ in $(seq 1 100); do [ -s "$dir/fake.out" ] && break; sleep 0.05; done
entry=$(head -n 1 "$dir/fake.out")
[ -S "$entry" ] || fail "the fake entry did not appear: $(cat "$dir/fake.out")"
out=$("$rocelab" stat --json 2>"$dir/err")
rc=$?
[ $rc = 1 ] || fail "another version exited $rc"
want="pid $fake: runs rocelab 9.9 (stat layout 99), this is rocelab"
grep -qF "rocelab stat: $want" "$dir/err" || fail "another version's error: $(cat "$dir/err")"
grep -qF "(stat layout 1): not read" "$dir/err" || fail "our layout not named: $(cat "$dir/err")"
python3 -c 'import json,sys; h = json.loads(sys.argv[1]); sys.exit(0 if h["processes"] == [] and len(h["problems"]) == 1 and "9.9" in h["problems"][0] else 1)' "$out" ||
  fail "another version's JSON: $out"
[ -S "$entry" ] || fail "another version's entry was removed"
kill $fake
wait $fake 2>/dev/null
fake=

# A runtime directory others may write to is never trusted.
chmod 777 "$dir/run"
"$rocelab" stat >/dev/null 2>"$dir/err"
rc=$?
[ $rc = 2 ] || fail "open runtime directory exited $rc"
grep -q "^rocelab stat: the runtime directory: Permission denied$" "$dir/err" || fail "open runtime directory: $(cat "$dir/err")"
chmod 700 "$dir/run"

"$rocelab" stat --count 3 >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || fail "--count without --watch exited $rc"
"$rocelab" stat --watch --interval 0 >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || fail "--interval 0 exited $rc"
out=$("$rocelab" stat --watch --count 2 --interval 0.05 2>/dev/null)
[ "$(grep -c '^rocelab stat, every 0.05s: ' <<< "$out")" = 2 ] || fail "--watch --count 2: $out"

[ $failures = 0 ] && echo "ok: rocelab stat's bad situations"
exit $((failures > 0))
