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
. "$(dirname "$0")/../lib/harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$rocelab" loopback --transport sim --qp-type rc --op all --count 2000 --loss 0.2 --reorder 0.1 \
  --duplicate 0.05 --seed 7 --retry-forever --pcap "$dir/x.pcap" > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
grep -q "operations 8000, .*errors 0" "$dir/out" || { cat "$dir/out"; exit 1; }
"$rocelab" decode --summary --json "$dir/x.pcap" > "$dir/sum.json"
# Per PSN space (--summary --json): PSNs sent again, and PSN sequence error NAKs (code 0).
retx=$(json_of "$dir/sum.json" 'sum(len(o["retransmitted_psns"]) for o in objs if o["type"] == "psn_space")')
naks=$(json_of "$dir/sum.json" 'sum(o["naks"].get("0", 0) for o in objs if o["type"] == "psn_space")')
[ "$retx" -gt 0 ] || fail "no retransmitted PSN in the capture"
[ "$naks" -gt 0 ] || fail "no PSN sequence error NAK in the capture"
if "$rocelab" loopback --transport sim --qp-type rc --op all --count 10 --loss 1 --retry-cnt 2 \
     --timeout 8 > "$dir/out2" 2>&1; then
  echo "100% loss with retry_cnt 2 exited 0"; cat "$dir/out2"; exit 1
fi
grep -q "RETRY_EXC_ERR" "$dir/out2" || { cat "$dir/out2"; exit 1; }
echo ok
