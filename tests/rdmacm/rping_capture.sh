#!/bin/bash
# rping under rocelab run with the server capturing (--pcap), then tshark
# reads the CM exchange field by field: one REQ, REP, RTU and the DREQ/DREP,
# the GSI headers (QP 1, Q_Key 0x80010000), the service ID of TCP port PORT,
# rdma_cm's header (client -> server), and the QPNs and starting PSNs of the
# REQ and REP are those of the data packets that follow. Nothing malformed.
#
#   rping_capture.sh ROCELAB PORT
#
# PORT is rping's rdma_cm port (in the server's emulated address). The
# addresses are NET.1 (server) and NET.2 (client), NET the /24 of a port the
# script claims (tests/lib/harness.sh: claim_port, net_of) and hands to
# cm_pair.sh (-a).
set -u
rocelab=$1 port=$2
here=$(dirname "$0")
. "$here/../lib/harness.sh"
claim=$(claim_port) || exit 1
net=$(net_of "$claim") && sip=$net.1 cip=$net.2
cap=$(mktemp /tmp/rocelab-rping.XXXXXX.pcap)
ev=$(mktemp /tmp/rocelab-rping.XXXXXX.events)
trap 'rm -f "$cap" "$ev"' EXIT
"$here/cm_pair.sh" "$rocelab" -a "$net" -c "$cap" -y "--events=$ev" -C "ping data: rdma-ping-9:" -- \
  rping -s -a @SIP@ -p "$port" -C 10 -v -- rping -c -a @SIP@ -p "$port" -C 10 -v || exit 1

field() {  # FILTER FIELD: the values, one a line
  tshark -r "$cap" -Y "$1" -T fields -e "$2" 2>/dev/null
}
count() { field "$1" frame.number | wc -l; }
mad="infiniband.bth.destqp == 1"
check "RoCEv2 packets tshark does not decode" "$(count 'udp.dstport == 4791 && !infiniband')" 0
check "malformed packets" "$(count '_ws.malformed')" 0
check "REQ" "$(count "$mad && infiniband.mad.attributeid == 0x0010")" 1
check "REP" "$(count "$mad && infiniband.mad.attributeid == 0x0013")" 1
check "RTU" "$(count "$mad && infiniband.mad.attributeid == 0x0014")" 1
check "DREQ >= 1" "$([ "$(count "$mad && infiniband.mad.attributeid == 0x0015")" -ge 1 ] && echo yes)" yes
check "DREP >= 1" "$([ "$(count "$mad && infiniband.mad.attributeid == 0x0016")" -ge 1 ] && echo yes)" yes
check "MADs not from QP 1 with the GSI Q_Key, class CM v2" \
  "$(count "$mad && (infiniband.deth.srcqp != 1 || infiniband.deth.q_key != 0x80010000 || infiniband.mad.mgmtclass != 0x07 || infiniband.mad.classversion != 2)")" 0
req="$mad && infiniband.mad.attributeid == 0x0010"
rep="$mad && infiniband.mad.attributeid == 0x0013"
check "REQ service ID" "$(field "$req" infiniband.cm.req.serviceid)" "$(printf '0x%016x' $((0x01060000 | port)))"
check "REQ rdma_cm header source" "$(field "$req" infiniband.cm.req.ip_cm.sip4)" "$cip"
check "REQ rdma_cm header destination" "$(field "$req" infiniband.cm.req.ip_cm.dip4)" "$sip"
check "REQ from" "$(field "$req" ip.src)" "$cip"
req_qpn=$(field "$req" infiniband.cm.req.localqpn)
req_psn=$(field "$req" infiniband.cm.req.startpsn)
rep_qpn=$(field "$rep" infiniband.cm.rep.localqpn)
rep_psn=$(field "$rep" infiniband.cm.rep.startpsn)
# Requests (not ACKs, not READ responses) of each side, in order.
reqs="!($mad) && !(infiniband.bth.opcode >= 13 && infiniband.bth.opcode <= 17)"
first_c=$(field "$reqs && ip.src == $cip" infiniband.bth.psn | head -1)
first_s=$(field "$reqs && ip.src == $sip" infiniband.bth.psn | head -1)
num() { while read -r v; do [ -n "$v" ] && echo $((v)); done | sort -u | tr '\n' ' '; }
check "client's requests go to the REP's QPN" \
  "$(field "$reqs && ip.src == $cip" infiniband.bth.destqp | num)" "$(echo "$rep_qpn" | num)"
check "server's requests go to the REQ's QPN" \
  "$(field "$reqs && ip.src == $sip" infiniband.bth.destqp | num)" "$(echo "$req_qpn" | num)"
check "client's first PSN is the REP's starting PSN" "$(echo "$first_c" | num)" "$(echo "$rep_psn" | num)"
check "server's first PSN is the REQ's starting PSN" "$(echo "$first_s" | num)" "$(echo "$req_psn" | num)"
# The server's event log names the same MADs, with the transaction IDs tshark reads.
tid_of() { printf '0x%016x' "$(field "$mad && infiniband.mad.attributeid == $1" infiniband.mad.transactionid | head -1)"; }
logged() {  # DIRECTION NAME: the transaction ID of the first such MAD in the log
  "$rocelab" events "$ev" | sed -n "s/.* $1 qp 0x000001 UD SEND Only -> qp 0x000001 .*: CM $2 tid \(0x[0-9a-f]*\)$/\1/p" | head -1
}
check "event log: REQ received" "$(logged PACKET_RECEIVED ConnectRequest)" "$(tid_of 0x0010)"
check "event log: REP sent" "$(logged PACKET_SENT ConnectReply)" "$(tid_of 0x0013)"
check "event log: RTU received" "$(logged PACKET_RECEIVED ReadyToUse)" "$(tid_of 0x0014)"
check "event log: DREQ received" "$(logged PACKET_RECEIVED DisconnectRequest)" "$(tid_of 0x0015)"
check "event log: DREP sent" "$(logged PACKET_SENT DisconnectReply)" "$(tid_of 0x0016)"
echo "rocelab decode of the CM exchange:"
"$rocelab" decode "$cap" | grep -A1 "CM " | head -20
exit $status
