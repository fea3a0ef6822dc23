#!/bin/bash
# UD multicast between three unmodified mckey processes under `rocelab run`:
# two receivers join GROUP (rdma_join_multicast: the shim attaches their QPs)
# and each must receive all COUNT datagrams the sender sends to the group;
# the first receiver's capture is then read by tshark field by field: COUNT UD
# SEND Only with Immediate datagrams from the sender to the group address, BTH
# destination QP 0xFFFFFF, the Q_Key rdma_cm gives UDP ids (0x01234567), one
# source QP; and `rocelab decode` finds every ICRC correct.
#
#   mckey_capture.sh ROCELAB
#
# The three addresses are NET.1, NET.2 (receivers) and NET.3 (sender), and
# GROUP is 239.A.B.1, NET = 127.A.B the /24 of a port the script claims
# (tests/lib/harness.sh: claim_port, net_of): multicast groups are the host's,
# so each test has its own.
set -u
rocelab=$1
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
net=$(net_of "$port")
r1=$net.1 r2=$net.2 snd=$net.3 group=239.${net#127.}.1
count=10
work=$(mktemp -d /tmp/rocelab-mckey.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
timeout 60 "$rocelab" run --ip "$r1" --pcap "$work/r1.pcap" -- stdbuf -oL mckey -b "$r1" -m "$group" -C $count \
  >"$work/r1.out" 2>&1 &
pids+=($!)
timeout 60 "$rocelab" run --ip "$r2" -- stdbuf -oL mckey -b "$r2" -m "$group" -C $count >"$work/r2.out" 2>&1 &
pids+=($!)
# Both receivers have joined (their QPs are attached before mckey sees
# MULTICAST_JOIN) when they say so: stdbuf -oL makes them say it at once.
wait_line "$work/r1.out" "joined dgid" "${pids[0]}" && wait_line "$work/r2.out" "joined dgid" "${pids[1]}" ||
  { echo "FAIL: the receivers did not join"; cat "$work"/r*.out; exit 1; }
timeout 60 "$rocelab" run --ip "$snd" -- mckey -b "$snd" -m "$group" -s -C $count >"$work/s.out" 2>&1
src=$?
wait "${pids[0]}"; rc1=$?
wait "${pids[1]}"; rc2=$?
pids=()
check "sender's exit status" "$src" 0
check "first receiver's exit status" "$rc1" 0
check "second receiver's exit status" "$rc2" 0
for f in r1 r2 s; do
  grep -q "data transfers complete" "$work/$f.out" || { echo "FAIL: $f did not complete"; status=1; }
done
# One tshark pass: a line per packet to the group, the fields checked below.
tshark -r "$work/r1.pcap" -Y "ip.dst == $group && udp.dstport == 4791" -T fields -E separator=' ' \
  -e ip.src -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.deth.q_key \
  -e infiniband.deth.srcqp >"$work/fields" 2>/dev/null
count() { awk "$1" "$work/fields" | wc -l; }
check "datagrams to the group" "$(count 1)" $count
check "... from the sender" "$(count "\$1 == \"$snd\"")" $count
check "... UD SEND Only with Immediate" "$(count '$2 == 101')" $count
check "... to QP 0xFFFFFF" "$(count '$3 == "0xffffff"')" $count
check "... with rdma_cm's UDP Q_Key" "$(count '$4 == "0x0000000001234567" || $4 == "0x01234567"')" $count
check "... from one source QP" "$(awk '{print $5}' "$work/fields" | sort -u | wc -l)" 1
check "malformed packets" "$(tshark -r "$work/r1.pcap" -Y _ws.malformed 2>/dev/null | wc -l)" 0
check "rocelab decode: ICRCs" \
  "$("$rocelab" decode --summary "$work/r1.pcap" | sed -n 's/.* RoCEv2 (\([0-9]*\) bad ICRC).*/\1/p')" 0
[ $status = 0 ] || { for f in r1 r2 s; do echo "===== $f"; cat "$work/$f.out"; done; }
exit $status
