#!/bin/bash
# RoCEv2 over IPv6: `rocelab run --ip` takes an IPv6
# address. Two network namespaces joined by a veth pair (fd00:NN::1/2; IPv4 on
# the side for the program's TCP exchange, as pingpong servers listen on IPv4);
# unmodified ibv_rc_pingpong -g 0 (GID 0 = the IPv6 address) both ways; the
# server's capture decodes as IPv6 RoCEv2 with good ICRCs in rocelab decode
# and tshark. With MODE linklocal the two ends use IPv6 link-local addresses
# (fe80::77:1/2, as a kernel's Soft-RoCE GID 0 is), given to --ip with their
# interface (fe80::77:1%v6a-PORT, PORT the TCP port the script claims). Exits 77 (skipped) where namespaces cannot
# be made.
# Usage: ipv6_pair.sh ROCELAB [global|linklocal]
set -u
rocelab=$1 mode=${2:-global}
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
ns_a=rocelab6-a-$port ns_b=rocelab6-b-$port
work=$(mktemp -d /tmp/rocelab-v6.XXXXXX)
srv_pid=""
cleanup() {
  [ -n "$srv_pid" ] && kill -9 "$srv_pid" 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_a" 2>/dev/null || { echo "SKIP: cannot create network namespaces here"; exit 77; }
ip netns add "$ns_b" &&
ip link add "v6a-$port" netns "$ns_a" type veth peer name "v6b-$port" netns "$ns_b" &&
if [ "$mode" = linklocal ]; then
  a6=fe80::77:1 b6=fe80::77:2 ip_a="fe80::77:1%v6a-$port" ip_b="fe80::77:2%v6b-$port"
else
  a6=fd00:77::1 b6=fd00:77::2 ip_a=fd00:77::1 ip_b=fd00:77::2
fi
ip -n "$ns_a" addr add "$a6/64" dev "v6a-$port" nodad && ip -n "$ns_b" addr add "$b6/64" dev "v6b-$port" nodad &&
ip -n "$ns_a" addr add 198.18.77.1/24 dev "v6a-$port" && ip -n "$ns_b" addr add 198.18.77.2/24 dev "v6b-$port" &&
ip -n "$ns_a" link set "v6a-$port" up && ip -n "$ns_b" link set "v6b-$port" up &&
ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || { echo "cannot set up the veth pair"; exit 1; }
ip netns exec "$ns_a" timeout 60 "$rocelab" run --ip "$ip_a" --pcap "$work/s.pcap" -- \
  ibv_rc_pingpong -g 0 -n 100 -p "$port" > "$work/server.out" 2>&1 &
srv_pid=$!
wait_tcp_listen "$port" "$srv_pid" ip netns exec "$ns_a"
ip netns exec "$ns_b" timeout 60 "$rocelab" run --ip "$ip_b" -- \
  ibv_rc_pingpong -g 0 -n 100 -p "$port" 198.18.77.1 > "$work/client.out" 2>&1
cli_rc=$?
wait "$srv_pid"; srv_rc=$?; srv_pid=""
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
[ $cli_rc = 0 ] && [ $srv_rc = 0 ] || fail "exit client $cli_rc, server $srv_rc"
grep -q "remote address: LID 0x0000, QPN 0x[0-9a-f]*, PSN 0x[0-9a-f]*, GID $a6" "$work/client.out" || fail "client GID"
grep -q "100 iters in" "$work/server.out" || fail "server iterations"
"$rocelab" decode --json "$work/s.pcap" > "$work/decode.json" 2>"$work/decode.err" || fail "rocelab decode: $(tail -2 "$work/decode.err")"
sends=$(json_of "$work/decode.json" "sum(o['type'] == 'packet' and o['src'] == '$b6' and o['dst'] == '$a6' and o['opname'].startswith('RC SEND') for o in objs)")
[ "$sends" -ge 400 ] || fail "IPv6 SENDs $b6 -> $a6 in the capture: $sends"
[ "$(json_of "$work/decode.json" "sum(o['type'] == 'packet' and not o['icrc_ok'] for o in objs)")" = 0 ] || fail "a bad ICRC"
n=$(tshark -r "$work/s.pcap" -Y "ipv6 && infiniband.bth.opcode && !_ws.malformed" 2>/dev/null | wc -l)
[ "$n" -ge 800 ] || fail "tshark decodes $n IPv6 RoCEv2 packets"
echo "--- server"; cat "$work/server.out"; echo "--- client"; cat "$work/client.out"
[ $failures = 0 ] && echo "ok: $n IPv6 RoCEv2 packets"
exit $((failures > 0))
