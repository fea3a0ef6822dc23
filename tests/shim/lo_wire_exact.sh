#!/bin/bash
# `rocelab run --wire-exact`: on loopback nothing segments a UDP
# GSO send, so a capture of `lo` shows super-datagrams where a NIC would send
# packets. With --wire-exact each RoCEv2 packet is its own datagram: dumpcap
# on lo during ib_write_bw 64 KiB sees only genuine packets, every ICRC
# correct. Without it (the default) the same capture holds datagrams larger
# than the MTU (the flag is what makes the difference).
#
#   lo_wire_exact.sh ROCELAB
set -u
rocelab=$1
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
# Addresses of their own, outside the pool `rocelab run` allocates from.
net=$(net_of "$port") && sip=$net.1 cip=$net.2
work=$(mktemp -d /tmp/rocelab-wireexact.XXXXXX)
cap_pid=""
cleanup() {
  [ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
run() {  # NAME [--wire-exact]: ib_write_bw captured on lo into $work/NAME.pcap
  local name=$1; shift
  dumpcap -q -B 64 -i lo -f "udp port 4791 and host $sip and host $cip" -w "$work/$name.pcap" >"$work/$name.log" 2>&1 &
  cap_pid=$!
  for _ in $(seq 1 100); do grep -q "Capturing on" "$work/$name.log" && break; sleep 0.05; done
  timeout 60 "$rocelab" run --ip "$sip" "$@" -- ib_write_bw -s 65536 -n 200 -p "$port" >"$work/$name.srv" 2>&1 &
  local srv=$!
  wait_tcp_listen "$port" "$srv"
  timeout 60 "$rocelab" run --ip "$cip" "$@" -- ib_write_bw -s 65536 -n 200 -p "$port" "$sip" >"$work/$name.cli" 2>&1
  check "$name: client's exit status" $? 0
  wait "$srv"
  check "$name: server's exit status" $? 0
  sleep 0.3
  kill "$cap_pid"; wait "$cap_pid" 2>/dev/null; cap_pid=""
}
largest() { tshark -r "$1" -T fields -e frame.len 2>/dev/null | sort -n | tail -1; }

run exact --wire-exact
"$rocelab" decode --json "$work/exact.pcap" | grep '"type":"file"' > "$work/exact.json"
cat "$work/exact.json"
read -r n roce bad malformed <<<"$(json_of "$work/exact.json" '" ".join(str(objs[0][k]) for k in ("frames", "roce", "bad_icrc", "malformed"))')"
check "wire-exact: RoCEv2 frames captured >= 1000 (dumpcap may miss some at full speed)" "$([ "${n:-0}" -ge 1000 ] && echo yes || echo "no: ${n:-0}")" yes
check "wire-exact: frames that are not RoCEv2" "$((n - roce))" 0
check "wire-exact: bad ICRCs" "$bad" 0
check "wire-exact: malformed" "$malformed" 0
check "wire-exact: largest frame within the MTU" "$([ "$(largest "$work/exact.pcap")" -le 4200 ] && echo yes)" yes

run default
check "default (GSO): a super-datagram larger than the MTU on lo" \
  "$([ "$(largest "$work/default.pcap")" -gt 8000 ] && echo yes)" yes
exit $status
