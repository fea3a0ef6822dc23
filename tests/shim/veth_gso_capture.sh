#!/bin/bash
# The wire at full speed with UDP GSO: ib_write_bw 64 KiB between
# two network namespaces, each under `rocelab run` (GSO on, the default), the
# veth pair limited to one segment per packet (gso_max_segs 1) as a link whose
# NIC has no UDP segmentation offload: the kernel segments every GSO send in
# software and numbers the IPv4 IDs 0, 1, 2, ... dumpcap on the receiving veth
# records what is on the link. Every frame must be a genuine RoCEv2 packet with
# a correct ICRC (`rocelab decode` checks each against the IP header as
# captured), tshark must decode every one as InfiniBand, and the IDs must show
# that GSO was used (not all 0).
#
#   veth_gso_capture.sh ROCELAB
set -u
rocelab=$1
here=$(dirname "$0")
source "$here/netns_pair.sh"
source "$here/../lib/harness.sh"
port=$(claim_port) || exit 1
work=$(mktemp -d /tmp/rocelab-vethgso.XXXXXX)
cap_pid=""
cleanup() {
  [ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT
netns_up "$port"
ip -n "$ns_a" link set "va-$port" gso_max_segs 1
ip -n "$ns_b" link set "vb-$port" gso_max_segs 1
ip netns exec "$ns_a" dumpcap -q -B 64 -i "va-$port" -f "udp port 4791" -w "$work/link.pcap" >"$work/dumpcap.log" 2>&1 &
cap_pid=$!
for _ in $(seq 1 100); do grep -q "Capturing on" "$work/dumpcap.log" && break; sleep 0.05; done
timeout 120 "${srv_prefix[@]}" "$rocelab" run "${srv_opts[@]}" -- ib_write_bw -s 65536 -n 500 -p "$port" \
  >"$work/server.out" 2>&1 &
srv=$!
wait_tcp_listen "$port" "$srv" "${srv_prefix[@]}"
timeout 120 "${cli_prefix[@]}" "$rocelab" run "${cli_opts[@]}" -- ib_write_bw -s 65536 -n 500 -p "$port" "$server_ip" \
  >"$work/client.out" 2>&1
crc=$?
wait "$srv"; src=$?
sleep 0.5
kill "$cap_pid"; wait "$cap_pid" 2>/dev/null; cap_pid=""
check "client's exit status" "$crc" 0
check "server's exit status" "$src" 0
grep -E "^ 65536 +500 " "$work/client.out" || { echo "FAIL: no result line"; status=1; }
"$rocelab" decode --json "$work/link.pcap" | grep '"type":"file"' > "$work/link.json"
cat "$work/link.json"
read -r n roce bad malformed <<<"$(json_of "$work/link.json" '" ".join(str(objs[0][k]) for k in ("frames", "roce", "bad_icrc", "malformed"))')"
check "RoCEv2 frames captured on the link >= 16000 (500 x 64 sent; dumpcap may miss some)" "$([ "${n:-0}" -ge 16000 ] && echo yes || echo "no: ${n:-0}")" yes
check "frames that are not RoCEv2" "$((n - roce))" 0
check "bad ICRCs" "$bad" 0
check "malformed" "$malformed" 0
check "frames tshark does not decode as InfiniBand" \
  "$(tshark -r "$work/link.pcap" -Y 'udp.dstport == 4791 && !infiniband' 2>/dev/null | wc -l)" 0
check "distinct IPv4 IDs from the client (GSO segments numbered)" \
  "$(tshark -r "$work/link.pcap" -Y 'ip.src == 198.18.0.2' -T fields -e ip.id 2>/dev/null | sort -u | wc -l | awk '{print ($1 > 8) ? "many" : $1}')" many
[ $status = 0 ] || { cat "$work/client.out" "$work/server.out"; }
exit $status
