#!/bin/bash
# `rocelab check` on the real captures of ../shared/traces/public: each is
# judged to the end with exit 0 (docs/replay.md says what each shows), and the
# RoCEv2 packets it counts are the ones tshark counts on UDP 4791. Skips (77)
# when ../shared is absent.
# Usage: check_public_test.sh ROCELAB SHARED_DIR
set -u
rocelab=$1
traces=$2/traces/public
[ -d "$traces" ] || { echo "SKIP: $traces is absent (a user's clone has no ../shared)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for f in "$traces"/*.pcap; do
  out=$("$rocelab" check "$f")
  rc=$?
  [ $rc = 0 ] || { fail "$(basename "$f") exited $rc: $out"; continue; }
  n=$(sed -n '1s/.*: \([0-9]*\) RoCEv2 packets$/\1/p' <<< "$out")
  if command -v tshark > /dev/null; then
    want=$(tshark -r "$f" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
    [ "$n" = "$want" ] || fail "$(basename "$f"): check read '$n' RoCEv2 packets, tshark $want"
  fi
done
# The Huawei NIC's trace: one connection, two PSN spaces, ACKs coalesced, nothing wrong.
out=$("$rocelab" check "$traces/oferby_proxy_roce.pcap")
grep -q '192.168.70.6 qp 0x000048 -> 192.168.70.4 qp 0x000045 RC *67 *36 ' <<< "$out" || fail "oferby: $out"
out=$("$rocelab" check "$traces/scapy_roce_uts_cnp_connectx4lx.pcap")
grep -q ' cnp .*a CNP' <<< "$out" || fail "the CNP is not reported: $out"
[ $failures = 0 ] && echo "rocelab check: every public capture judged"
exit $((failures > 0))
