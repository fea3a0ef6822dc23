#!/bin/bash
# `rocelab loopback` over real UDP, every packet
# captured; then the capture must decode in tshark (no malformed packet, the
# expected opcodes present) and every ICRC must be right (rocelab decode, exit 0).
# Usage: loopback_wire_test.sh ROCELAB TSHARK
set -euo pipefail
rocelab=$1
tshark=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pcap=$dir/lb.pcap

"$rocelab" loopback --transport udp --qp-type rc --op all --size 65536 --count 100 --pcap "$pcap" \
  --events "$dir/lb.events"

# Every RoCEv2 packet decodes with a good ICRC.
"$rocelab" decode "$pcap" > "$dir/decode.txt"

# One tshark pass: every packet decodes as InfiniBand (RRoCE), none malformed.
"$tshark" -r "$pcap" -T fields -e frame.protocols -e infiniband.bth.opcode 2>/dev/null > "$dir/fields.txt"
total=$(wc -l < "$dir/fields.txt")
ib=$(grep -c ':infiniband' "$dir/fields.txt" || true)
malformed=$(grep -c '_ws.malformed' "$dir/fields.txt" || true)
echo "packets: $total, InfiniBand: $ib, malformed: $malformed"
[ "$total" -gt 0 ] && [ "$total" -eq "$ib" ] && [ "$malformed" -eq 0 ]

count() { awk -v op="$1" '$2 == op' "$dir/fields.txt" | wc -l; }
# Multi-packet WRITEs (First/Middle/Last), READ responses (First/Middle/Last),
# atomics and their ACKs, plain ACKs.
for op in 6 7 8 9 12 13 14 15 17 18 19 20 0 1 2; do
  n=$(count $op)
  echo "opcode $op: $n"
  [ "$n" -gt 0 ]
done
# 100 SENDs of 64 packets + 100 WRITEs of 64 + 100 READ requests + 100 atomics,
# and the responses: 100 x 64 READ response packets, 200 ACKs, 100 ATOMIC ACKs
# (more when a full socket buffer on a loaded machine makes RC retransmit).
[ "$total" -ge $((6400 + 6400 + 100 + 100 + 6400 + 200 + 100)) ]
# The event log is non-empty length-delimited Protobuf.
[ -s "$dir/lb.events" ]
