#!/bin/bash
# DCQCN on the real wire. Four network namespaces in a line: the sender A,
# the router R with the bottleneck, the router M that marks, the receiver B.
# R forwards A's packets through 200 Mb/s (an HTB class with a 96 KB byte
# FIFO). The marking: RED with `ecn` on that class where the kernel has RED;
# where it has none (no ECN-marking qdisc at all on the kernel this was
# written on), M marks what leaves the bottleneck with an nftables rule that
# sets CE on ECT(0) packets beyond 12,000 packets/s (106 Mb/s of 1106-byte
# packets) with an allowance of 4: a phantom queue, a token bucket standing
# for a queue that drains at that rate, marking as soon as the bottleneck's
# departures outrun it. ib_write_bw (one QP, 600 WRITEs of 64 KiB, one
# datagram per packet so that the rule counts packets) runs A -> B twice
# under `rocelab run`:
#   --cc dcqcn   A's packets leave ECT(0); some are marked CE; B answers with
#                CNPs (tshark decodes them: opcode 129, DSCP 48 ECT(0), BECN);
#                A's rate control acts on them; the FIFO never overflows and
#                A retransmits nothing.
#   no --cc      A's packets leave Not-ECT, nothing is marked, A sends as fast
#                as its window allows: the FIFO overflows and RC retransmits
#                (--retry-forever: the losses are heavy).
# The contrast is the judge that the rate adapts.
#
#   cc_ecn_wire.sh ROCELAB
set -u
rocelab=$1
here=$(dirname "$0")
source "$here/../lib/harness.sh"
for tool in nft tshark dumpcap ib_write_bw; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (make test installs it)"
done
port=$(claim_port) || exit 1
work=$(mktemp -d /tmp/rocelab-ccwire.XXXXXX)
ns_a=rocelab-a-$port ns_r=rocelab-r-$port ns_m=rocelab-m-$port ns_b=rocelab-b-$port
cap_pid=""
cleanup() {
  [ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null
  for ns in "$ns_a" "$ns_r" "$ns_m" "$ns_b"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$ns_a" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (need root/CAP_SYS_ADMIN)"
  exit 77
fi
A=(ip netns exec "$ns_a") R=(ip netns exec "$ns_r") M=(ip netns exec "$ns_m") B=(ip netns exec "$ns_b")
# A 198.18.1.2 -- 198.18.1.1 R 198.18.3.1 -- 198.18.3.2 M 198.18.2.1 -- 198.18.2.2 B
veth() {  # veth NS_X IF_X ADDR_X NS_Y IF_Y ADDR_Y
  ip link add "$2" netns "$1" type veth peer name "$5" netns "$4" &&
  ip -n "$1" addr add "$3/24" dev "$2" && ip -n "$4" addr add "$6/24" dev "$5" &&
  ip -n "$1" link set "$2" up && ip -n "$4" link set "$5" up
}
ip netns add "$ns_r" && ip netns add "$ns_m" && ip netns add "$ns_b" &&
veth "$ns_a" "ar-$port" 198.18.1.2 "$ns_r" "ra-$port" 198.18.1.1 &&
veth "$ns_r" "rm-$port" 198.18.3.1 "$ns_m" "mr-$port" 198.18.3.2 &&
veth "$ns_m" "mb-$port" 198.18.2.1 "$ns_b" "bm-$port" 198.18.2.2 &&
for ns in "$ns_a" "$ns_r" "$ns_m" "$ns_b"; do ip -n "$ns" link set lo up || exit 1; done &&
ip -n "$ns_a" route add default via 198.18.1.1 &&
ip -n "$ns_r" route add 198.18.2.0/24 via 198.18.3.2 &&
ip -n "$ns_m" route add 198.18.1.0/24 via 198.18.3.1 &&
ip -n "$ns_b" route add default via 198.18.2.1 &&
"${R[@]}" sysctl -qw net.ipv4.ip_forward=1 && "${M[@]}" sysctl -qw net.ipv4.ip_forward=1 ||
  { echo "FAIL: cannot set up the four namespaces"; exit 1; }
# Every packet after the bottleneck is received on one CPU (RPS). HTB lets
# packets go from whichever CPU runs its timer, and a veth delivers on the
# backlog of the CPU that sent: without this, packets overtake each other
# between R and B, and B NAKs them as out of order (as it must).
for dev in "$ns_m mr-$port" "$ns_b bm-$port"; do
  set -- $dev
  ip netns exec "$1" sh -c "echo 1 > /sys/class/net/$2/queues/rx-0/rps_cpus" ||
    { echo "FAIL: cannot steer $2's packets to one CPU (RPS)"; exit 1; }
done

# The bottleneck, R -> M: 200 Mb/s, a 192 KB FIFO (4 QPs' windows of 128
# 1 KiB packets are 4 x 140 KB on the wire: without congestion control it
# overflows). The marker: RED on it where the kernel has RED; otherwise M
# marks what leaves the bottleneck.
bottleneck() {
  "${R[@]}" tc qdisc del dev "rm-$port" root 2>/dev/null
  "${R[@]}" tc qdisc add dev "rm-$port" root handle 1: htb default 1 2>/dev/null &&
  "${R[@]}" tc class add dev "rm-$port" parent 1: classid 1:1 htb rate 200mbit burst 15k 2>/dev/null || return 1
  if "${R[@]}" tc qdisc add dev "rm-$port" parent 1:1 handle 10: red limit 98304 min 24000 max 72000 \
       avpkt 1100 burst 30 probability 0.2 bandwidth 200mbit ecn 2>/dev/null; then
    marker=red
  else
    "${R[@]}" tc qdisc add dev "rm-$port" parent 1:1 handle 10: bfifo limit 98304 || return 1
    "${M[@]}" nft -f - <<EOF || return 1
table ip rocelab_ecn {
  chain forward {
    type filter hook forward priority mangle; policy accept;
    oifname "mb-$port" udp dport 4791 ip ecn ect0 limit rate over 12000/second burst 4 packets ip ecn set ce counter
  }
}
EOF
    marker=nft
  fi
}
drops() { "${R[@]}" tc -s qdisc show dev "rm-$port" | awk '/parent 1:1/ {f=1} f && /dropped/ {gsub(/[(),]/, ""); for (i = 1; i <= NF; i++) if ($i == "dropped") {print $(i+1); exit}}'; }

# A runs on one CPU. A veth delivers a packet on the backlog of the CPU that
# sent it, so packets that A's two sending threads (the program's, in
# ibv_post_send, and rocelab's helper, when the pacer lets a held packet go)
# send from two CPUs can overtake each other on the way to R; B would see
# them out of order and NAK them, as a NIC would.
cpu_a=$(taskset -pc $$ | awk -F'[:,-]' '{gsub(/ /, "", $2); print $2}')

# One run of ib_write_bw A -> B with the given rocelab run options; the
# capture of M's link toward B in $work/$1.pcap, the outputs in $work/$1.*.
run_bw() {
  local name=$1; shift
  "${M[@]}" nft flush ruleset 2>/dev/null
  bottleneck || { echo "FAIL: cannot set up the bottleneck"; exit 1; }
  "${M[@]}" dumpcap -q -B 64 -i "mb-$port" -f "udp port 4791" -w "$work/$name.pcap" >"$work/$name.dumpcap" 2>&1 &
  cap_pid=$!
  for _ in $(seq 1 100); do grep -q "Capturing on" "$work/$name.dumpcap" && break; sleep 0.05; done
  timeout 120 "${B[@]}" "$rocelab" run --ip 198.18.2.2 --wire-exact --counters "$@" -- \
    ib_write_bw -q 1 -s 65536 -n 600 -p "$port" >"$work/$name.server" 2>&1 &
  local srv=$!
  wait_tcp_listen "$port" "$srv" "${B[@]}"
  timeout 120 "${A[@]}" taskset -c "$cpu_a" "$rocelab" run --ip 198.18.1.2 --wire-exact --counters "$@" -- \
    ib_write_bw -q 1 -s 65536 -n 600 -p "$port" 198.18.2.2 >"$work/$name.client" 2>&1
  crc=$?
  wait "$srv"; src=$?
  sleep 0.5
  kill "$cap_pid"; wait "$cap_pid" 2>/dev/null; cap_pid=""
  check "$name: client's exit status" "$crc" 0
  check "$name: server's exit status" "$src" 0
  grep -E "^ 65536 +600 " "$work/$name.client" || { echo "FAIL: $name: no result line"; status=1; }
  dropped=$(drops)
  rcvbuf_errors=$(udp_rcvbuf_errors)
  echo "--- $name: the bottleneck after the run"
  "${R[@]}" tc -s qdisc show dev "rm-$port"
  [ "$marker" = nft ] && "${M[@]}" nft list ruleset | grep counter
}
# Datagrams B's UDP sockets dropped for a full receive buffer: an end host's
# loss (its helper thread too slow, on a loaded machine), not the network's.
udp_rcvbuf_errors() {
  "${B[@]}" awk '$1 == "Udp:" {if (!h) {for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1} else print $c}' /proc/net/snmp
}
counter() {  # counter FILE NAME: the value `rocelab run --counters` printed, 0 when absent
  grep -o "$2=[0-9]*" "$1" | head -1 | cut -d= -f2 | grep . || echo 0
}
tsh() { tshark -r "$1" -Y "$2" 2>/dev/null | wc -l; }

run_bw dcqcn --cc dcqcn --line-rate 300M
echo "marker: $marker"
cap=$work/dcqcn.pcap
cnps=$(tsh "$cap" 'infiniband.bth.opcode == 129 && ip.src == 198.18.2.2 && ip.dst == 198.18.1.2')
check "dcqcn: CNPs from B to A on the wire (tshark: opcode 129) > 0" "$([ "$cnps" -gt 0 ] && echo yes || echo "no: $cnps")" yes
check "dcqcn: CNPs not as a ConnectX sends them (DSCP 48, ECT(0), BECN set, PSN 0)" \
  "$(tsh "$cap" 'infiniband.bth.opcode == 129 && !(ip.dsfield == 0xc2 && infiniband.reserved == 40 && infiniband.bth.psn == 0)')" 0
data=$(tsh "$cap" 'infiniband && ip.src == 198.18.1.2')
check "dcqcn: A's packets seen at B's link > 1000" "$([ "$data" -gt 1000 ] && echo yes || echo "no: $data")" yes
check "dcqcn: A's packets that left Not-ECT" "$(tsh "$cap" 'infiniband && ip.src == 198.18.1.2 && ip.dsfield.ecn == 0')" 0
ce=$(tsh "$cap" 'infiniband && ip.src == 198.18.1.2 && ip.dsfield.ecn == 3')
check "dcqcn: A's packets R marked CE > 0" "$([ "$ce" -gt 0 ] && echo yes || echo "no: $ce")" yes
check "dcqcn: frames tshark does not decode as InfiniBand" "$(tsh "$cap" 'udp.dstport == 4791 && !infiniband')" 0
np_ce=$(counter "$work/dcqcn.server" np_ecn_marked_roce_packets)
np_cnp=$(counter "$work/dcqcn.server" np_cnp_sent)
rp_cnp=$(counter "$work/dcqcn.client" rp_cnp_handled)
echo "B: np_ecn_marked_roce_packets=$np_ce np_cnp_sent=$np_cnp; A: rp_cnp_handled=$rp_cnp"
check "dcqcn: B's CE count > 0" "$([ "$np_ce" -gt 0 ] && echo yes || echo no)" yes
check "dcqcn: A's rate control acted on CNPs (rp_cnp_handled > 0)" "$([ "$rp_cnp" -gt 0 ] && echo yes || echo no)" yes
check "dcqcn: CNPs A handled <= CNPs B sent" "$([ "$rp_cnp" -le "$np_cnp" ] && echo yes || echo "no: $rp_cnp > $np_cnp")" yes
check "dcqcn: packets the bottleneck dropped" "${dropped:-?}" 0
# Nothing lost in the network, so A retransmits only what B's own socket
# dropped (rocelab's helper thread falling behind on a loaded machine).
retries=$(counter "$work/dcqcn.client" completer_retry_err)
echo "dcqcn: A retransmitted $retries times; B's UDP receive-buffer drops: $rcvbuf_errors"
accounted=no
{ [ "$retries" = 0 ] || [ "${rcvbuf_errors:-0}" -gt 0 ]; } && accounted=yes
check "dcqcn: A's retransmissions are 0, or B's socket dropped datagrams" "$accounted" yes

run_bw plain --retry-forever
cap=$work/plain.pcap
check "plain: A's packets that left ECN-capable" "$(tsh "$cap" 'infiniband && ip.src == 198.18.1.2 && ip.dsfield.ecn != 0')" 0
check "plain: CNPs on the wire" "$(tsh "$cap" 'infiniband.bth.opcode == 129')" 0
check "plain: the bottleneck dropped packets (> 0)" "$([ "${dropped:-0}" -gt 0 ] && echo yes || echo "no: ${dropped:-?}")" yes
retries=$(counter "$work/plain.client" completer_retry_err)
check "plain: A retransmitted (completer_retry_err > 0)" "$([ "$retries" -gt 0 ] && echo yes || echo no)" yes
[ $status = 0 ] || cat "$work"/*.client "$work"/*.server
exit $status
