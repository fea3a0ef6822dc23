#!/bin/bash
# On the simulated fabric a run is deterministic: the same command (faults and
# seed included) gives byte-identical event logs and captures.
# Usage: sim_determinism_test.sh ROCELAB
set -euo pipefail
rocelab=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in 1 2; do
  "$rocelab" loopback --transport sim --qp-type rc --op all --size 20000 --count 10 --loss 0.05 \
    --duplicate 0.02 --seed 7 --timeout 8 --events "$dir/ev$i" --pcap "$dir/p$i.pcap" > "$dir/out$i"
done
[ -s "$dir/ev1" ]
cmp "$dir/ev1" "$dir/ev2"
cmp "$dir/p1.pcap" "$dir/p2.pcap"
