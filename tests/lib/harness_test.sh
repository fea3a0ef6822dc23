#!/bin/bash
# claim_port (harness.sh) hands out each port once: twenty scripts claiming at
# the same time get twenty different ports; a port something listens on is
# never handed out; a claim whose process is gone is taken over, a live one is not.
set -u
. "$(dirname "$0")/harness.sh"
export ROCELAB_TEST_CLAIMS=$(mktemp -d /tmp/rocelab-claims-test.XXXXXX)
rocelab_claims=$ROCELAB_TEST_CLAIMS
listener=""
trap '[ -n "$listener" ] && kill "$listener" 2>/dev/null; rm -rf "$ROCELAB_TEST_CLAIMS"' EXIT

# Twenty claimants at once, each holding its claim while the others claim.
out=$ROCELAB_TEST_CLAIMS/out
for i in $(seq 1 20); do
  bash -c '. "$1"; p=$(claim_port) || exit 1; echo "$p" >> "$2"; sleep 1' _ "$(dirname "$0")/harness.sh" "$out" &
done
wait
check "ports claimed by twenty concurrent scripts" "$(wc -l < "$out")" 20
check "distinct ports among them" "$(sort -u "$out" | wc -l)" 20

# A port with a listener is skipped: the range is that one port alone.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -c 'import socket, sys, time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$port" &
listener=$!
wait_tcp_listen "$port" "$listener" || fail "the listener on $port did not start"
rocelab_port_lo=$port rocelab_port_n=1
check "claim of the one port in the range, which has a listener" "$(claim_port 2>/dev/null || echo refused)" refused
kill "$listener"; wait "$listener" 2>/dev/null; listener=""

# Stale and live claims on a free port.
rm -rf "${ROCELAB_TEST_CLAIMS:?}/$port"
bash -c 'exit 0' & dead=$!; wait "$dead"
mkdir "$ROCELAB_TEST_CLAIMS/$port" && echo "$dead" > "$ROCELAB_TEST_CLAIMS/$port/owner"
check "claim over a claim whose process is gone" "$(claim_port)" "$port"
check "its new owner" "$(cat "$ROCELAB_TEST_CLAIMS/$port/owner")" $$
sleep 30 & alive=$!
echo "$alive" > "$ROCELAB_TEST_CLAIMS/$port/owner"
check "claim over a claim whose process lives" "$(claim_port 2>/dev/null || echo refused)" refused
kill "$alive"
exit $status
