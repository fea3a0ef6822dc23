#!/bin/bash
# Records that survive: an unmodified ib_write_bw server
# under `rocelab run --pcap --events` is killed mid-transfer with SIGNAL
# (TERM or KILL). The records are flushed at the end of every engine batch,
# never a partial record. SIGTERM: the shim's handler lets a write under way
# finish, so the capture reads to the end in `rocelab decode` and tshark and
# the event log in `rocelab events`. SIGKILL, which no handler sees, can land
# inside the write() of a flush: then the file may end inside its last record
# (the kernel cuts a write at a page boundary); every record before it must be
# whole and the transfer there.
# Usage: records_survive.sh ROCELAB SIGNAL
set -u
rocelab=$1 sig=$2
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
work=$(mktemp -d /tmp/rocelab-records.XXXXXX)
srv_pid="" cli_pid=""
cleanup() {
  [ -n "$srv_pid" ] && kill -9 "$srv_pid" 2>/dev/null
  [ -n "$cli_pid" ] && kill -9 "$cli_pid" 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
# Addresses of their own, outside the pool `rocelab run` allocates from.
net=$(net_of "$port")
"$rocelab" run --ip "$net.1" --pcap "$work/server.pcap" --events "$work/server.events" -- \
  ib_write_bw -s 65536 -D 30 -p "$port" >"$work/server.out" 2>&1 &
srv_pid=$!
wait_tcp_listen "$port" "$srv_pid"
# `rocelab run` execs the program: $! is the client itself (-D 30 bounds it;
# it is killed below). No `timeout` wrapper: killing that would leave the
# client running, holding its address for the next run.
"$rocelab" run --ip "$net.2" -- ib_write_bw -s 65536 -D 30 -p "$port" "$net.1" >"$work/client.out" 2>&1 &
cli_pid=$!
# Transferring: the server's own capture grows past 1 MiB (it is flushed per batch).
for _ in $(seq 1 600); do
  [ "$(stat -c %s "$work/server.pcap" 2>/dev/null || echo 0)" -gt 1048576 ] && break
  sleep 0.05
done
if ! kill -0 "$srv_pid" 2>/dev/null; then
  echo "FAIL: the server ended before it could be killed"; cat "$work/server.out"; exit 1
fi
kill "-$sig" "$srv_pid"
wait "$srv_pid" 2>/dev/null
srv_pid=""
kill -9 "$cli_pid" 2>/dev/null
wait "$cli_pid" 2>/dev/null
cli_pid=""

failures=0
size=$(stat -c %s "$work/server.pcap")
[ "$size" -gt 1048576 ] || { echo "FAIL: capture of $size bytes"; failures=$((failures + 1)); }
# Every record whole, but (SIGKILL only) possibly the last: pcap parsed here.
python3 - "$work/server.pcap" "$sig" > "$work/records" <<'PY' || failures=$((failures + 1))
import struct, sys
data = open(sys.argv[1], 'rb').read()
assert struct.unpack_from('<I', data, 0)[0] == 0xa1b2c3d4, 'not a pcap'
off, whole = 24, 0
while off + 16 <= len(data):
    caplen = struct.unpack_from('<IIII', data, off)[2]
    if off + 16 + caplen > len(data):
        break
    off += 16 + caplen
    whole += 1
cut = len(data) - off
print(whole, 'whole records,', cut, 'bytes of a cut last one')
if cut and sys.argv[2] != 'KILL':
    sys.exit('FAIL: the capture ends inside a record after SIG' + sys.argv[2])
if whole < 200:
    sys.exit('FAIL: only %d records' % whole)
PY
cat "$work/records"
if [ "$sig" != KILL ]; then
  if ! "$rocelab" decode --summary "$work/server.pcap" > "$work/summary" 2>&1; then
    echo "FAIL: rocelab decode does not read the capture to the end"; tail -5 "$work/summary"
    failures=$((failures + 1))
  fi
  tshark -r "$work/server.pcap" -q > "$work/tshark" 2>&1
  rc=$?
  grep -v '^Running as user "root"' "$work/tshark" > "$work/tshark.errors"
  if [ $rc != 0 ] || [ -s "$work/tshark.errors" ]; then
    echo "FAIL: tshark does not read the capture cleanly"; cat "$work/tshark"; failures=$((failures + 1))
  fi
  if ! "$rocelab" events "$work/server.events" > "$work/events" 2>&1; then
    echo "FAIL: rocelab events does not read the event log to the end"; tail -5 "$work/events"
    failures=$((failures + 1))
  fi
else
  "$rocelab" events "$work/server.events" > "$work/events" 2>&1  # may end inside its last event
fi
grep -q "PACKET_RECEIVED" "$work/events" || { echo "FAIL: no packet in the event log"; failures=$((failures + 1)); }
[ $failures = 0 ] && echo "ok: SIG$sig left $size bytes of capture, $(wc -l < "$work/events") events"
exit $((failures > 0))
