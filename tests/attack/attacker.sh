#!/bin/bash
# Crafted packets at a victim: an unmodified ib_write_bw
# server under `rocelab run --counters` at VICTIM_IP receives a transfer from
# its client at PEER_IP (-n ITERS 64 KiB writes); meanwhile rocelab_attacker
# (tests/attack/attacker.cc), a process of its own, reads the server's QPN,
# R_Key and VA and its peer's initial PSN from perftest's own output and sends
# ROUNDS of each attack: a bad ICRC, a truncated packet, random QPNs, the
# server's QP from the attacker's address, a wrong P_Key, and from the peer's
# address (another UDP port) guessed and stale R_Keys, a VA that wraps past
# 2^64 and a READ beyond the MR, each at a PSN far ahead of and far behind the
# window. Judged:
#   - the transfer completes: both perftests exit 0 and print their result;
#   - the attack ran while the transfer did (the client still running after it);
#   - the victim counted every refusal under its cause: drop_bad_icrc,
#     drop_malformed, drop_unknown_qp, drop_source_address and drop_pkey each
#     exactly ROUNDS (nothing else sends such packets here), out_of_seq_request
#     and duplicate_request at least 4*ROUNDS each, drop_qp_state 0;
#   - soundness: the transfer's PSNs (rcvd_pkts of the server) stayed under
#     6,000,000, so that the far-ahead/far-behind PSNs never entered the window.
#
#   attacker.sh ROCELAB ROCELAB_ATTACKER VICTIM_IP PEER_IP ATTACKER_IP [ROUNDS]
#   attacker.sh ROCELAB ROCELAB_ATTACKER -n [ROUNDS]
# With -n the victim is in one network namespace (198.18.0.1), its peer and the
# attacker in another (198.18.0.2 and 198.18.0.3), joined by a veth pair
# (tests/shim/netns_pair.sh; RoCE MTU 1024 there, 4096 on loopback).
set -u
rocelab=$1 attacker=$2
shift 2
source "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1  # perftest's TCP port; names the veth pair with -n
srv_prefix=() cli_prefix=() atk_prefix=()
if [ "$1" = "-n" ]; then
  rounds=${2:-100} iters=25000
  source "$(dirname "$0")/../shim/netns_pair.sh"
  netns_up "$port"
  ip -n "$ns_b" addr add 198.18.0.3/24 dev "vb-$port"
  vip=198.18.0.1 pip=198.18.0.2 aip=198.18.0.3
  srv_prefix=(ip netns exec "$ns_a") cli_prefix=(ip netns exec "$ns_b") atk_prefix=(ip netns exec "$ns_b")
else
  vip=$1 pip=$2 aip=$3 rounds=${4:-100} iters=100000
fi
work=$(mktemp -d /tmp/rocelab-attacker.XXXXXX)
srv="" cli="" watchdog=""
cleanup() {
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  [ -n "$srv" ] && kill -9 "$srv" 2>/dev/null
  [ -n "$cli" ] && kill -9 "$cli" 2>/dev/null
  declare -F netns_down >/dev/null && netns_down
  rm -rf "$work"
}
trap cleanup EXIT
source "$(dirname "$0")/judge.sh"
"${srv_prefix[@]}" "$rocelab" run --counters --ip "$vip" -- stdbuf -oL ib_write_bw -s 65536 -n "$iters" -p "$port" \
  >"$work/server.out" 2>"$work/server.err" &
srv=$!
wait_tcp_listen "$port" "$srv" "${srv_prefix[@]}"
"${cli_prefix[@]}" "$rocelab" run --counters --ip "$pip" -- ib_write_bw -s 65536 -n "$iters" -p "$port" "$vip" \
  >"$work/client.out" 2>&1 &
cli=$!
# Nothing waits without a bound: both perftests are killed after 90 s whatever happens.
( trap 'kill "$sp" 2>/dev/null; exit 0' TERM; sleep 90 & sp=$!; wait "$sp"; kill -9 "$srv" "$cli" ) >/dev/null 2>&1 &
watchdog=$!
field() {  # LINE-PREFIX FIELD: perftest's "local address: ... QPN 0x.. PSN 0x.. RKey 0x.. VAddr 0x.."
  sed -n "s/^ *$1 address: .* $2 \(0x[0-9a-f]*\).*/\1/p" "$work/server.out" | head -1
}
for _ in $(seq 1 200); do grep -q "remote address:" "$work/server.out" && break; sleep 0.05; done
qpn=$(field local QPN) rkey=$(field local RKey) va=$(field local VAddr) psn=$(field remote PSN)
peer_rkey=$(field remote RKey)
[ -n "$qpn" ] && [ -n "$rkey" ] && [ -n "$va" ] && [ -n "$psn" ] ||
  { echo "FAIL: the server never printed its addresses"; cat "$work/server.out" "$work/server.err"; exit 1; }
echo "victim: ib_write_bw server, pid $srv, QP $qpn R_Key $rkey VA $va, first PSN $psn, at $vip"
# The peer's R_Key: a key valid at the peer, never registered here (a stale or
# borrowed key); if it happens to equal the server's, the attacker's default.
stale=()
[ "$((peer_rkey))" != "$((rkey))" ] && stale=(--stale-rkey "$((peer_rkey))")
"${atk_prefix[@]}" "$attacker" --from "$aip" --spoof "$pip" --to "$vip" --qpn "$((qpn))" --rkey "$((rkey))" \
  --va "$((va))" --psn "$((psn))" "${stale[@]}" --rounds "$rounds" | tee "$work/attacker.out"
atk=${PIPESTATUS[0]}
check "attacker's exit status" "$atk" 0
check "client still transferring when the attack ended" "$(kill -0 "$cli" 2>/dev/null && echo yes)" yes
wait "$cli"; crc=$?; cli=""
wait "$srv"; src=$?; srv=""
check "client's exit status" "$crc" 0
check "server's exit status" "$src" 0
check "client's result line" "$(grep -cE '^ 65536 +[0-9]+ +[0-9.]+ +[0-9.]+' "$work/client.out")" 1
echo "client under attack: $(grep -E '^ 65536 ' "$work/client.out" | sed 's/rocelab:.*//')  (#bytes #iterations peak avg [MB/s] Mpps)"
counters=$(grep -o 'counters: .*' "$work/server.err" | head -1)
echo "victim's $counters"
echo "client's $(grep -o 'counters: .*' "$work/client.out" | head -1)"
for c in drop_bad_icrc drop_malformed drop_unknown_qp drop_source_address drop_pkey; do
  check "$c" "$(counter "$c")" "$rounds"
done
check "out_of_seq_request >= $((4 * rounds))" "$([ "$(counter out_of_seq_request)" -ge $((4 * rounds)) ] && echo yes)" yes
check "duplicate_request >= $((4 * rounds))" "$([ "$(counter duplicate_request)" -ge $((4 * rounds)) ] && echo yes)" yes
check "drop_qp_state" "$(counter drop_qp_state)" 0
check "transfer's packets under 6,000,000 (the PSNs sent stayed out of the window)" \
  "$([ "$(counter rcvd_pkts)" -lt 6000000 ] && echo yes)" yes
[ $status = 0 ] || { echo "== server"; cat "$work/server.out" "$work/server.err"; echo "== client"; cat "$work/client.out"; }
exit $status
