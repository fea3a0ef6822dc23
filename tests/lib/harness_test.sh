#!/bin/bash
# The helpers of harness.sh. claim_port hands out each port once: twenty
# scripts claiming at the same time get twenty different ports; a port
# something listens on is never handed out; a claim whose process is gone is
# taken over, a live one is not, also when it was made for another process
# (claim_port OWNER). wait_udp_bound sees a UDP socket bound to its address
# and port (IPv4 and IPv6) once it is there, and not one on another address;
# wait_line sees a line once it is written; both give up at once when the
# process they wait for is gone.
set -u
. "$(dirname "$0")/harness.sh"
export ROCELAB_TEST_CLAIMS=$(mktemp -d /tmp/rocelab-claims-test.XXXXXX)
rocelab_claims=$ROCELAB_TEST_CLAIMS
listener=""
others=()
trap '[ -n "$listener" ] && kill "$listener" 2>/dev/null; for p in "${others[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$ROCELAB_TEST_CLAIMS"' EXIT

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
kill "$alive"; wait "$alive" 2>/dev/null

# A claim made for another process (a test program that is not a script).
sleep 30 & other=$!
others+=("$other")
check "claim for another process" "$(claim_port "$other")" "$port"
check "its owner" "$(cat "$ROCELAB_TEST_CLAIMS/$port/owner")" "$other"
check "claim over it while that process lives" "$(claim_port 2>/dev/null || echo refused)" refused
kill "$other"; wait "$other" 2>/dev/null
check "claim over it once that process is gone" "$(claim_port)" "$port"

# wait_udp_bound: a socket bound half a second after the wait began, on
# 127.0.0.1 and on ::1; nothing on 127.0.0.2 at that port, whose wait ends at
# once because the process it waits for is gone.
for a in 127.0.0.1 ::1; do
  uport=$(python3 -c 'import socket, sys; s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$a")
  python3 -c 'import socket, sys, time; time.sleep(0.5); s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], int(sys.argv[2]))); time.sleep(30)' "$a" "$uport" &
  bound=$!
  others+=("$bound")
  check "wait_udp_bound $a $uport" "$(wait_udp_bound "$a" "$uport" "$bound"; echo $?)" 0
  [ "$a" = 127.0.0.1 ] &&
    check "wait_udp_bound 127.0.0.2 $uport, its process gone" "$(wait_udp_bound 127.0.0.2 "$uport" "$dead"; echo $?)" 1
  kill "$bound"; wait "$bound" 2>/dev/null
done

# wait_line: a line written half a second after the wait began; a line that
# never comes, whose wait ends at once because its writer is gone.
lines=$ROCELAB_TEST_CLAIMS/lines
: >"$lines"
bash -c 'sleep 0.5; echo "rocelab: rdma_listen on 127.1.2.1 port 7174 (port space 0x0106)" >>"$1"; exec sleep 30' _ "$lines" &
writer=$!
others+=("$writer")
check "wait_line for a line written later" "$(wait_line "$lines" "rocelab: rdma_listen on" "$writer"; echo $?)" 0
kill "$writer"; wait "$writer" 2>/dev/null
check "wait_line for a line that never comes, its writer gone" "$(wait_line "$lines" "DISCONNECT" "$writer"; echo $?)" 1
# json_of: an expression over the objects of a file of JSON lines.
jl=$ROCELAB_TEST_CLAIMS/lines.json
printf '{"type":"packet","psn":5,"icrc_ok":true}\n{"type":"packet","psn":6,"icrc_ok":false}\n{"type":"file","frames":2}\n' >"$jl"
check "json_of: packets with a bad ICRC" "$(json_of "$jl" 'sum(o["type"] == "packet" and not o["icrc_ok"] for o in objs)')" 1
check "json_of: the file's frames" "$(json_of "$jl" '[o["frames"] for o in objs if o["type"] == "file"][0]')" 2
exit $status
