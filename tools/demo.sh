#!/usr/bin/env bash
# `make demo`: rocelab's main job, end to end.
#   1. Two processes on this machine, each under `rocelab run`, run the unmodified
#      rdma-core example ibv_rc_pingpong, then perftest's ib_write_bw, on emulated
#      RoCE devices over real UDP (each process takes its own 127.0.0.x address).
#   2. The server side records every RoCEv2 packet; rocelab decodes the capture.
#   3. rping connects through rdma_cm (librocelab_rdmacm.so): its IBTA CM
#      exchange (REQ, REP, RTU, DREQ, DREP on QP 1) is decoded from the capture.
#   4. The opcode table as a capture: one packet of every RC, UC and UD opcode.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin/rocelab
out=build/demo
mkdir -p "$out"
rm -f "$out"/*.pcap

# Runs PROG as server and client (TCP port $1 for their out-of-band exchange),
# the server recording a capture; fails if either side fails.
pair() {
  local port=$1 capture=$2
  shift 2
  timeout -k 5 120 "$bin" run --pcap "$capture" -- "$@" -p "$port" >"$out/server.log" 2>&1 &
  local server=$!
  for _ in $(seq 1 200); do   # until the server listens (it accepts one connection)
    ss -Hltn "sport = :$port" | grep -q . && break
    kill -0 $server 2>/dev/null || break
    sleep 0.05
  done
  local rc=0
  timeout -k 5 120 "$bin" run -- "$@" -p "$port" 127.0.0.1 || rc=$?
  wait $server || rc=$?
  if [ $rc != 0 ]; then
    echo "demo: $1 failed (exit $rc); server output:" >&2
    cat "$out/server.log" >&2
    exit 1
  fi
}

echo "== rocelab devices: what a program under 'rocelab run' sees"
"$bin" devices
echo

echo "== ibv_rc_pingpong (rdma-core), unmodified, client and server under rocelab run"
pair 18515 "$out/pingpong.pcap" ibv_rc_pingpong -g 0 -n 100
echo

echo "== ib_write_bw (perftest), unmodified"
pair 18516 "$out/write_bw.pcap" ib_write_bw -n 200
echo

echo "== the capture of ibv_rc_pingpong, decoded: the first packets, then the summary per PSN space"
"$bin" decode --summary "$out/pingpong.pcap" >"$out/pingpong.txt"
sed -n 1,10p "$out/pingpong.txt"
echo "   ..."
awk '/^Per-connection summary/{p=1} p' "$out/pingpong.txt"
echo

echo "== the capture of ib_write_bw: summary per PSN space"
"$bin" decode --summary "$out/write_bw.pcap" >"$out/write_bw.txt"
awk '/^Per-connection summary/{p=1} p' "$out/write_bw.txt"
echo

echo "== rocelab check judges the ib_write_bw capture against the protocol (docs/replay.md)"
"$bin" check "$out/write_bw.pcap" | tail -6
echo

echo "== rocelab replay re-sends its WRITEs to a fresh emulated responder and compares the answers"
"$bin" replay --max-differences 2 "$out/write_bw.pcap" | cut -c1-160
echo

echo "== rping (rdmacm-utils), unmodified, connects through rdma_cm: CM MADs on the wire"
# The server needs a known address for the client's rdma_resolve_addr: --ip.
timeout -k 5 60 "$bin" run --ip 127.0.0.250 --pcap "$out/rping.pcap" -- \
  rping -s -a 127.0.0.250 -p 18517 -C 5 -v >"$out/rping-server.log" 2>&1 &
rping_server=$!
for _ in $(seq 1 200); do   # until its device holds the address, then a moment to listen
  ss -Hlun "sport = :4791" | grep -qF "127.0.0.250:4791" && break
  sleep 0.05
done
sleep 0.5
timeout -k 5 60 "$bin" run -- rping -c -a 127.0.0.250 -p 18517 -C 5 -v
wait $rping_server || { echo "demo: rping server failed:" >&2; cat "$out/rping-server.log" >&2; exit 1; }
echo
echo "== the rping capture: its CM exchange decoded (MADs to QP 1: REQ, REP, RTU, then DREQ and DREP)"
"$bin" decode "$out/rping.pcap" | grep " CM "
echo

echo "== a class lab on the simulated fabric: a lost packet and go-back-N (docs/labs)"
"$bin" sim docs/labs/03-lost-packet-go-back-n.textproto | tail -16
echo

echo "== one packet of every RC, UC and UD opcode, written by the encoder and decoded"
"$bin" opcodes --pcap "$out/opcodes.pcap"
"$bin" decode "$out/opcodes.pcap"
echo
echo "captures are in $out/ (open them in Wireshark: they are genuine RoCEv2)"
