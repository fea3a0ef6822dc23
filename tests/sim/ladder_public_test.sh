#!/bin/bash
# `rocelab ladder` on the real captures of ../shared/traces/public (a
# ConnectX-4 Lx CNP, Soft-RoCE VMs, a proxy's RC traffic): each is drawn to the
# end, exit 0, every RoCEv2 packet accounted for (drawn + not drawn = what
# tshark counts on UDP 4791). Skips (77) when ../shared is absent.
# Usage: ladder_public_test.sh ROCELAB SHARED_DIR
set -u
rocelab=$1
traces=$2/traces/public
[ -d "$traces" ] || { echo "SKIP: $traces is absent (a user's clone has no ../shared)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for f in "$traces"/*.pcap; do
  out=$("$rocelab" ladder --max 50 "$f")
  rc=$?
  [ $rc = 0 ] || { fail "$(basename "$f") exited $rc"; continue; }
  summary=$(tail -1 <<< "$out")
  n=$(sed -n 's/^\([0-9]*\) RoCEv2 packet.*/\1/p' <<< "$summary")
  if command -v tshark > /dev/null; then
    want=$(tshark -r "$f" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
    [ "$n" = "$want" ] || fail "$(basename "$f"): ladder counts '$n' RoCEv2 packets, tshark $want ($summary)"
  fi
  drawn=$(grep -c '▶│\|│◀\|──$' <<< "$out")
  [ "$n" = 0 ] || [ "$drawn" -gt 0 ] || fail "$(basename "$f"): nothing drawn"
done
# CM MADs are drawn as what they say (the Soft-RoCE rping connection).
f=$traces/montybeatnik_test.pcap
if [ -f "$f" ]; then
  out=$("$rocelab" ladder "$f")
  for want in 'CM REQ qpn 0x000017 psn 9026318' 'CM REP qpn 0x000011 psn 12726936' 'CM RTU' 'CM DREQ' 'CM DREP'; do
    grep -q -- "$want" <<< "$out" || fail "montybeatnik_test.pcap: no '$want' in the ladder"
  done
fi
[ $failures = 0 ] && echo "rocelab ladder: every public capture drawn"
exit $((failures > 0))
