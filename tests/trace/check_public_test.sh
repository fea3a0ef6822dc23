#!/bin/bash
# `rocelab check` on the real captures of ../shared/traces/public: each is
# judged to the end with exit 0 (docs/replay.md says what each shows), and the
# RoCEv2 packets it counts are the ones tshark counts on UDP 4791. Skips (77)
# when ../shared is absent.
# Usage: check_public_test.sh ROCELAB SHARED_DIR
set -u
rocelab=$1
. "$(dirname "$0")/../lib/harness.sh"
traces=$2/traces/public
[ -d "$traces" ] || { echo "SKIP: $traces is absent (a user's clone has no ../shared)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$traces"/*.pcap; do
  "$rocelab" check --json "$f" > "$work/check.json"
  rc=$?
  [ $rc = 0 ] || { fail "$(basename "$f") exited $rc: $(cat "$work/check.json")"; continue; }
  n=$(json_of "$work/check.json" '[o["packets"] for o in objs if o["type"] == "result"][0]')
  if command -v tshark > /dev/null; then
    want=$(tshark -r "$f" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
    [ "$n" = "$want" ] || fail "$(basename "$f"): check read '$n' RoCEv2 packets, tshark $want"
  fi
done
# The Huawei NIC's trace: one connection, two PSN spaces, ACKs coalesced, nothing wrong.
"$rocelab" check --json "$traces/oferby_proxy_roce.pcap" > "$work/oferby.json"
spaces=$(json_of "$work/oferby.json" 'sorted((o["requester"], o["responder"], o["transport"], o["requests"], o["responses"], o["errors"]) for o in objs if o["type"] == "psn_space")')
want="[('192.168.70.4 qp 0x000045', '192.168.70.6 qp 0x000048', 'RC', 1, 1, 0), ('192.168.70.6 qp 0x000048', '192.168.70.4 qp 0x000045', 'RC', 67, 36, 0)]"
[ "$spaces" = "$want" ] || fail "oferby: $spaces"
"$rocelab" check --json "$traces/scapy_roce_uts_cnp_connectx4lx.pcap" > "$work/cnp.json"
[ "$(json_of "$work/cnp.json" 'sum(o["type"] == "finding" and o["rule"] == "cnp" for o in objs)')" -ge 1 ] ||
  fail "the CNP is not reported: $(cat "$work/cnp.json")"
[ $failures = 0 ] && echo "rocelab check: every public capture judged"
exit $((failures > 0))
