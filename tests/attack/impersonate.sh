#!/bin/bash
# An attacker at the connected peer's address: attack_victim
# (tests/attack/victim.c, a libibverbs program) under `rocelab run --counters`
# at VICTIM_IP has its RC QPs connected to PEER_IP, where rocelab_impersonator
# (tests/attack/impersonator.cc) sits: inside the PSN window, only the
# responder's own checks stand between the attacker and the victim's memory.
# Judged:
#   - every case as the IBTA prescribes (the impersonator's "case ...: ok"):
#     the controls succeed; guessed and stale R_Keys, a range wrapping past
#     2^64, lengths beyond the MR, WRITE/READ/atomic without the access right
#     get NAK remote access error, a misaligned atomic and a READ longer than
#     the port's max_msg_sz NAK invalid request; PSNs
#     far outside the window, a wrong P_Key and another source address change
#     nothing and the QP goes on; every malformed packet of the fuzz corpora,
#     as it is and aimed at live QPs, and the victim still answers;
#   - the victim: its memory byte for byte what the peer was allowed to write
#     (guards and every other region unchanged), exactly one UD receive (the
#     right Q_Key), exit 0;
#   - QP states: the twelve refused cases in ERR, the controls and the
#     out-of-window/P_Key/source cases and the liveness QP in RTS;
#   - counters: drop_qkey 3, drop_source_address 1, drop_pkey >= 1,
#     drop_bad_icrc >= 1, drop_malformed >= 1, out_of_seq_request >= 1.
#
#   impersonate.sh ROCELAB ATTACK_VICTIM IMPERSONATOR CORPUS_DIR... -- VICTIM_IP PEER_IP INTRUDER_IP
#   impersonate.sh ROCELAB ATTACK_VICTIM IMPERSONATOR CORPUS_DIR... -- -n
# With -n the victim is in one network namespace (198.18.0.1), the impersonator
# in another (198.18.0.2, intruder 198.18.0.3), joined by a veth pair named
# after a port the script claims (tests/lib/harness.sh).
set -u
rocelab=$1 victim=$2 impersonator=$3
shift 3
corpora=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do corpora+=(--malformed "$1"); shift; done
shift
vic_prefix=() imp_prefix=()
if [ "$1" = "-n" ]; then
  source "$(dirname "$0")/../shim/netns_pair.sh"
  source "$(dirname "$0")/../lib/harness.sh"
  id=$(claim_port) || exit 1
  netns_up "$id"
  ip -n "$ns_b" addr add 198.18.0.3/24 dev "vb-$id"
  vip=198.18.0.1 pip=198.18.0.2 iip=198.18.0.3
  vic_prefix=(ip netns exec "$ns_a") imp_prefix=(ip netns exec "$ns_b")
else
  vip=$1 pip=$2 iip=$3
fi
work=$(mktemp -d /tmp/rocelab-impersonate.XXXXXX)
vic="" watchdog=""
cleanup() {
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  [ -n "$vic" ] && kill -9 "$vic" 2>/dev/null
  exec 3>&- 2>/dev/null
  declare -F netns_down >/dev/null && netns_down
  rm -rf "$work"
}
trap cleanup EXIT
source "$(dirname "$0")/judge.sh"
mkfifo "$work/go"
"${vic_prefix[@]}" "$rocelab" run --counters --ip "$vip" -- stdbuf -oL "$victim" "$pip" \
  <"$work/go" >"$work/victim.out" 2>"$work/victim.err" &
vic=$!
exec 3>"$work/go"  # the victim's stdin: it reports once a line (or the end) arrives
( trap 'kill "$sp" 2>/dev/null; exit 0' TERM; sleep 90 & sp=$!; wait "$sp"; kill -9 "$vic" ) >/dev/null 2>&1 &
watchdog=$!
for _ in $(seq 1 400); do grep -q '^ready' "$work/victim.out" && break; sleep 0.05; done
grep -q '^ready' "$work/victim.out" ||
  { echo "FAIL: the victim never got ready"; cat "$work/victim.out" "$work/victim.err"; exit 1; }
"${imp_prefix[@]}" "$impersonator" --me "$pip" --intruder "$iip" --to "$vip" --info "$work/victim.out" \
  "${corpora[@]}" | tee "$work/impersonator.out"
imp=${PIPESTATUS[0]}
echo done >&3
exec 3>&-
wait "$vic"; vrc=$?; vic=""
echo "== the victim's report"
sed -n '/^ready/,$p' "$work/victim.out" | tail -n +2
check "impersonator's exit status (every case as prescribed)" "$imp" 0
check "cases judged ok" "$(grep -c '^case .*: ok' "$work/impersonator.out")" 19
check "victim's exit status (memory, UD receive)" "$vrc" 0
check "victim's memory" "$(grep -c '^memory: 0 of ' "$work/victim.out")" 1
state() { sed -n "s/^qp $1 //p" "$work/victim.out"; }
for i in $(seq 3 14); do check "QP case$i (refused) state" "$(state "case$i")" ERR; done
for i in 0 1 2 15 16 17; do check "QP case$i state" "$(state "case$i")" RTS; done
check "QP live state" "$(state live)" RTS
counters=$(grep -o 'counters: .*' "$work/victim.err" | head -1)
echo "victim's $counters"
check drop_qkey "$(counter drop_qkey)" 3
check drop_source_address "$(counter drop_source_address)" 1
for c in drop_pkey drop_bad_icrc drop_malformed out_of_seq_request; do
  check "$c >= 1" "$([ "$(counter "$c")" -ge 1 ] && echo yes)" yes
done
[ $status = 0 ] || { echo "== victim"; cat "$work/victim.out" "$work/victim.err"; }
exit $status
