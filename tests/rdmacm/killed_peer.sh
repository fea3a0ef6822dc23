#!/bin/bash
# A connected rdma_cm peer killed (SIGKILL: nothing of it runs any more) must
# be learnt of as from the kernel's CM, which sends a DREQ for every
# established connection of a process that dies: here the dead process's
# reaper does (src/rdmacm_shim/reaper.h). rping's client is killed mid-run;
# the server must report DISCONNECTED ("server DISCONNECT EVENT") and end by
# itself within seconds. Without the DREQ it would wait for the next ping
# forever, or learn of the death only from a retry error some 17 s later.
#
#   killed_peer.sh ROCELAB PORT
#
# PORT is rping's rdma_cm port (in the server's emulated address). The two
# addresses are NET.1 (server) and NET.2 (client), NET the /24 of a port the
# script claims (tests/lib/harness.sh: claim_port, net_of).
set -u
rocelab=$1 port=$2
. "$(dirname "$0")/../lib/harness.sh"
claim=$(claim_port) || exit 1
net=$(net_of "$claim") && sip=$net.1 cip=$net.2
work=$(mktemp -d /tmp/rocelab-killed.XXXXXX)
srv="" cli=""
trap '[ -n "$cli" ] && kill -9 $cli 2>/dev/null; [ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$work"' EXIT
timeout -k 5 30 "$rocelab" run --explain --ip "$sip" --pcap "$work/server.pcap" -- rping -s -a "$sip" -p "$port" >"$work/server.out" 2>&1 &
srv=$!
wait_line "$work/server.out" "rocelab: rdma_listen on" $srv
"$rocelab" run --ip "$cip" -- rping -c -a "$sip" -p "$port" -v -C 1000000 >"$work/client.out" 2>&1 &
cli=$!
wait_line "$work/client.out" "rdma-ping-20:" $cli
grep -q "rdma-ping-20:" "$work/client.out" || { echo "FAIL: the client did not get to ping 20"; status=1; }
kill -9 $cli
wait $cli 2>/dev/null
cli=""
t0=$(date +%s%N)
wait $srv
srv_rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "===== server (exit $srv_rc, ended $ms ms after the client was killed)"
cat "$work/server.out"
echo "===== client (killed)"
tail -3 "$work/client.out"
echo
if [ $srv_rc = 124 ] || [ $srv_rc = 137 ]; then
  echo "FAIL: the server had to be stopped: it never learnt that its peer died"
  status=1
fi
grep -q "server DISCONNECT EVENT" "$work/server.out" || { echo "FAIL: no DISCONNECTED at the server"; status=1; }
[ $ms -lt 10000 ] || { echo "FAIL: the server took $ms ms (a DREQ takes one trip)"; status=1; }
# On the server's wire: one DREQ from the dead client's address, to QP 1.
dreqs=$(tshark -r "$work/server.pcap" -Y "ip.src == $cip && infiniband.bth.destqp == 1 && infiniband.mad.attributeid == 0x0015" \
  -T fields -e frame.number 2>/dev/null | wc -l)
echo "DREQs from $cip in the server's capture: $dreqs"
[ "$dreqs" = 1 ] || { echo "FAIL: want one DREQ from the client's address"; status=1; }
exit $status
