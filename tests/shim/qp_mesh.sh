#!/bin/bash
# Sixteen programs, eight on each of two hosts (network namespaces joined by a
# veth pair, one address each), every one sharing its host's address
# (`rocelab run --share-address`, docs/host.md): qp_mesh (programs/qp_mesh.c)
# with 16 RC QPs per process, one to every rank, all-to-all rounds of bytes
# checked by the receiver. Rank VICTIM stops after a few rounds and is killed
# with SIGKILL while the others are in the middle of their traffic.
#
#   qp_mesh.sh ROCELAB QP_MESH
#
# Judged: every other transfer completes exactly (each survivor reports 15
# peers complete, the victim alone failed, and all the bytes it was due
# checked); the survivors' retries to the dead process's QPNs arrive on its
# host's address and are counted there as drops (drop_unknown_qp, the
# survivors' --counters at exit); `rocelab stat` on the victim's host lists
# all eight processes with their 16 QPs each before the kill, and once the
# victim is dead the seven others alone. 77 where namespaces cannot be made.
set -u
rocelab=$1 mesh=$2
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
per_host=8 ranks=16 victim=3 rounds=48 bytes=16384 pause=8
limit=${TIMEOUT:-150}
work=$(mktemp -d /tmp/rocelab-mesh.XXXXXX)
pids=()

. "$(dirname "$0")/netns_pair.sh"
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  netns_down
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
netns_up "$port"
client_ip=198.18.0.2

for ((r = 0; r < ranks; ++r)); do
  if ((r < per_host)); then prefix=("${srv_prefix[@]}") ip=$server_ip; else prefix=("${cli_prefix[@]}") ip=$client_ip; fi
  extra=(-x "$victim")
  ((r == victim)) && extra=(-P "$pause")
  "${prefix[@]}" timeout -k 5 "$limit" "$rocelab" run --share-address --counters --ip "$ip" -- \
    "$mesh" -d "$work" -r "$r" -n "$ranks" -k "$rounds" -s "$bytes" "${extra[@]}" >"$work/rank$r.out" 2>&1 &
  pids+=($!)
done

# The victim's own pid (timeout forks it): from its info file.
wait_line "$work/rank$victim.out" "paused after round $pause" "${pids[$victim]}" ||
  fail "rank $victim never paused: $(tail -n 5 "$work/rank$victim.out")"
victim_pid=$(cut -d' ' -f1 "$work/$victim.info")
# rocelab stat on the victim's host: the pids it lists, and their QPs.
stat_a() { "${srv_prefix[@]}" "$rocelab" stat --json >"$work/stat.json" 2>"$work/stat.err"; }
listed() { json_of "$work/stat.json" "$1"; }
pids_expr='sorted(p["pid"] for p in objs[0]["processes"])'
stat_a
check "rocelab stat on host A: processes" "$(listed 'len(objs[0]["processes"])')" "$per_host"
check "rocelab stat on host A: the victim among them" "$(listed "$victim_pid in $pids_expr")" True
check "rocelab stat on host A: RC QPs in RTS" \
  "$(listed 'sum(q["type"] == "RC" and q["state"] == "RTS" for p in objs[0]["processes"] for d in p["devices"] for q in d["qps"])')" \
  $((per_host * ranks))
check "rocelab stat on host A: distinct QPN blocks" \
  "$(listed 'len({d["qpn_block"] for p in objs[0]["processes"] for d in p["devices"]})')" "$per_host"
finished_before=$(grep -l ': done:' "$work"/rank*.out 2>/dev/null | wc -l)
kill -9 "$victim_pid"
killed_at=$(date +%s%N)
echo "killed rank $victim (pid $victim_pid) after its round $pause"
# Once the victim is dead (its `timeout` has reaped it and exited), the very
# next rocelab stat lists the seven others and not the victim.
wait "${pids[$victim]}"
victim_rc=$?
stat_a
echo "rocelab stat read after the victim's end, $((($(date +%s%N) - killed_at) / 1000000)) ms after the kill"
check "rocelab stat drops the victim once it is dead" "$(listed "$victim_pid in $pids_expr")" False
check "rocelab stat on host A after the kill: processes" "$(listed 'len(objs[0]["processes"])')" $((per_host - 1))
check "rocelab stat on host A: problems" "$(listed 'objs[0]["problems"]')" "[]"
check "survivors already finished when the victim died" "$finished_before" 0

wait_pids
rcs[$victim]=$victim_rc  # reaped above

want_bytes=$((15 * rounds * bytes))
drops=0
for ((r = 0; r < ranks; ++r)); do
  ((r == victim)) && continue
  out=$work/rank$r.out
  if [ "${rcs[$r]}" != 0 ]; then
    echo "FAIL: rank $r exited ${rcs[$r]}"
    tail -n 20 "$out"
    status=1
    continue
  fi
  check "rank $r" "$(grep -o 'done: .* complete ones' "$out")" "done: 15 complete, 1 failed [$victim], $want_bytes bytes checked from the complete ones"
  grep -q "peer $victim failed: transport retry counter exceeded" "$out" ||
    { echo "FAIL: rank $r: its QP to the victim did not end in a retry error"; status=1; }
  if ((r < per_host)); then
    d=$(sed -n 's/^rocelab: rocelab0 counters:.* drop_unknown_qp=\([0-9]*\).*/\1/p' "$out")
    drops=$((drops + ${d:-0}))
  fi
done
check "victim killed by SIGKILL" "${rcs[$victim]}" 137
# Each of the 15 survivors' QPs to the victim sends at least once and retries
# 7 times (retry_cnt) to a QPN nobody holds any more, on the victim's host.
echo "drop_unknown_qp on the victim's host: $drops"
check "dead QPNs' packets counted as drops (>= 15 x 8)" "$([ "$drops" -ge 120 ] && echo yes)" yes
exit $status
