#!/bin/bash
# Interop with an independent RoCEv2 peer: rdma-core's
# ibv_rc_pingpong or ibv_ud_pingpong, unmodified under `rocelab run`, against
# scapy_peer.py (scapy-built packets from a raw socket with random IPv4 IDs,
# TTLs and DSCPs, as Soft-RoCE and NICs send), in the given role of the peer.
# Both must exit 0; the peer checks every packet rocelab sends.
# Usage: scapy_peer_test.sh ROCELAB rc|ud server|client
# Exits 77 (skipped) without root (raw sockets).
set -u
rocelab=$1 kind=$2 role=$3
. "$(dirname "$0")/../lib/harness.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: raw sockets need root"; exit 77; }
work=$(mktemp -d /tmp/rocelab-scapy.XXXXXX)
peer_pid="" prog_pid=""
cleanup() {
  [ -n "$peer_pid" ] && kill -9 "$peer_pid" 2>/dev/null
  [ -n "$prog_pid" ] && kill -9 "$prog_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
port=$(claim_port) || exit 1
net=$(net_of "$port")
here=$(dirname "$0")
prog=(ibv_${kind}_pingpong -g 0 -s 512 -n 50 -p "$port")
if [ "$role" = client ]; then
  # rocelab's program is the server: it listens first.
  "$rocelab" run --ip "$net.1" -- "${prog[@]}" > "$work/prog.out" 2>&1 &
  prog_pid=$!
  wait_tcp_listen "$port" "$prog_pid"
  timeout 60 /usr/bin/python3 "$here/scapy_peer.py" --kind "$kind" --role client --ip "$net.2" --port "$port" \
    --server "$net.1" --size 512 --iters 50 > "$work/peer.out" 2>&1 &
  peer_pid=$!
else
  timeout 60 /usr/bin/python3 "$here/scapy_peer.py" --kind "$kind" --role server --ip "$net.2" --port "$port" \
    --size 512 --iters 50 > "$work/peer.out" 2>&1 &
  peer_pid=$!
  wait_tcp_listen "$port" "$peer_pid"
  timeout 60 "$rocelab" run --ip "$net.1" -- "${prog[@]}" "$net.2" > "$work/prog.out" 2>&1 &
  prog_pid=$!
fi
wait "$peer_pid"; peer_rc=$?; peer_pid=""
# The program ends by itself once the ping-pong is done; 10 s more is a hang.
for _ in $(seq 1 200); do kill -0 "$prog_pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$prog_pid" 2>/dev/null && { echo "the pingpong program did not end: killed"; kill -9 "$prog_pid"; }
wait "$prog_pid"; prog_rc=$?; prog_pid=""
echo "--- peer (scapy): exit $peer_rc"; cat "$work/peer.out"
echo "--- ibv_${kind}_pingpong under rocelab run: exit $prog_rc"; cat "$work/prog.out"
[ $peer_rc = 0 ] && [ $prog_rc = 0 ] && grep -q "^ok: " "$work/peer.out" && grep -q "50 iters in" "$work/prog.out"
