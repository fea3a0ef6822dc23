#!/bin/bash
# Lossy RC on the simulated fabric: every operation, 20% loss,
# 10% reordering, 5% duplication, seed 7, retry_cnt 7 read as rxe does
# (--retry-forever: a NIC's seven retries run out at 20% loss). `rocelab loopback` verifies every
# byte of every operation and exits non-zero on any error completion or
# mismatch; the capture must show retransmitted PSNs and PSN sequence NAKs.
# Then 100% loss with retry_cnt 2 must end in RETRY_EXC_ERR (non-zero exit).
# Usage: lossy_loopback_test.sh ROCELAB
set -euo pipefail
rocelab=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$rocelab" loopback --transport sim --qp-type rc --op all --count 2000 --loss 0.2 --reorder 0.1 \
  --duplicate 0.05 --seed 7 --retry-forever --pcap "$dir/x.pcap" > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
grep -q "operations 8000, .*errors 0" "$dir/out" || { cat "$dir/out"; exit 1; }
"$rocelab" decode --summary "$dir/x.pcap" > "$dir/sum"
grep -Eq "retransmitted PSNs: [1-9]" "$dir/sum" || { cat "$dir/sum"; exit 1; }
grep -Eq "NAKs: [1-9][0-9]* \(PSN sequence error\)|\(PSN sequence error\) x[1-9]" "$dir/sum" || { cat "$dir/sum"; exit 1; }
if "$rocelab" loopback --transport sim --qp-type rc --op all --count 10 --loss 1 --retry-cnt 2 \
     --timeout 8 > "$dir/out2" 2>&1; then
  echo "100% loss with retry_cnt 2 exited 0"; cat "$dir/out2"; exit 1
fi
grep -q "RETRY_EXC_ERR" "$dir/out2" || { cat "$dir/out2"; exit 1; }
echo ok
