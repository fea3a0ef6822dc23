#!/bin/bash
# `rocelab replay` on captures of unmodified perftest programs under
# `rocelab run` (the server records: run_pair.sh -c): their requester side is
# replayed against a fresh emulated responder with zero behavioural
# differences, and the live responder answers. ib_write_bw also with 1 % loss;
# ib_send_lat's and ibv_rc_pingpong's two directions (both QPs are 0x11:
# --from picks one).
# Skips (77) without perftest.
# Usage: replay_perftest.sh ROCELAB
set -u
rocelab=$1
here=$(dirname "$0")
pair=$here/../shim/run_pair.sh
command -v ib_write_bw > /dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
work=$(mktemp -d /tmp/rocelab-replay-pt.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<< "$1"; }

judge() {  # judge NAME CAPTURE [REPLAY OPTIONS]
  local name=$1 cap=$2
  shift 2
  out=$("$rocelab" replay --json --max-differences 0 "$@" "$cap"); rc=$?
  r=$(grep '"type":"result"' <<< "$out")
  if [ $rc != 0 ] || [ "$(field "$r" behaviour)" != 0 ] || [ "$(field "$r" requests)" -eq 0 ] ||
     [ "$(field "$r" live_responses)" -eq 0 ]; then
    fail "$name: exit $rc: $r $(grep '"class":"behaviour"' <<< "$out" | head -3)"
  else
    echo "ok $name: $(field "$r" requests) requests, $(field "$r" captured_responses) responses captured," \
         "$(field "$r" live_responses) live, $(field "$r" policy) policy and $(field "$r" network) network differences"
  fi
}

run() {  # run NAME [run_pair options] -- PROGRAM ARGS
  local name=$1
  shift
  "$pair" "$rocelab" -c "$work/$name.pcap" "$@" > "$work/$name.log" 2>&1 ||
    { fail "$name: the program pair failed: $(tail -5 "$work/$name.log")"; return 1; }
}

run write -- ib_write_bw -n 1000 && judge ib_write_bw "$work/write.pcap"
run write_loss -r --loss=0.01 -r --seed=7 -- ib_write_bw -n 1000 && judge "ib_write_bw 1 % loss" "$work/write_loss.pcap"
run read -- ib_read_bw -n 500 && judge ib_read_bw "$work/read.pcap"
run atomic -- ib_atomic_bw -n 500 && judge ib_atomic_bw "$work/atomic.pcap"
both_ways() {  # both_ways NAME CAPTURE: both QPs are 0x11; replay lists the two directions with the --from that picks each
  local name=$1 cap=$2 choices
  choices=$("$rocelab" replay --qp 0x11 "$cap" 2>&1 >/dev/null | grep -o -- '--qp 0x000011 --from [0-9.]*')
  [ "$(wc -l <<< "$choices")" = 2 ] || fail "$name: the two directions are not listed: $choices"
  while read -r _ qp _ from; do
    judge "$name (the requests from $from)" "$cap" --qp "$qp" --from "$from"
  done <<< "$choices"
}
run send_lat -- ib_send_lat -n 500 && both_ways ib_send_lat "$work/send_lat.pcap"
# rdma-core's ibv_rc_pingpong (ibverbs-utils): SENDs both ways.
if command -v ibv_rc_pingpong > /dev/null; then
  run pingpong -- ibv_rc_pingpong -g 0 -n 100 && both_ways ibv_rc_pingpong "$work/pingpong.pcap"
fi
exit $((failures > 0))
