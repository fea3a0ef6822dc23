#!/bin/bash
# Runs a program pair with run_pair.sh while the server records a pcap
# (rocelab run --pcap), then judges the capture with tshark:
#
#   capture_check.sh ROCELAB [-k 'DISPLAY_FILTER>=N']... [-z FILTER]... RUN_PAIR_ARGS...
#
# Every UDP packet to port 4791 must decode as InfiniBand (RoCE), each -k
# filter must match at least N packets and each -z filter none.
set -u
rocelab=$1
shift
checks=() nones=()
while [ $# -gt 0 ]; do
  case $1 in
    -k) checks+=("$2"); shift 2 ;;
    -z) nones+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
here=$(dirname "$0")
cap=$(mktemp /tmp/rocelab-cap.XXXXXX.pcap)
trap 'rm -f "$cap"' EXIT
"$here/run_pair.sh" "$rocelab" -c "$cap" "$@" || exit 1

tshark_count() {
  tshark -r "$cap" -Y "$1" -T fields -e frame.number 2>/dev/null | wc -l
}
status=0
total=$(tshark_count "udp.dstport == 4791")
not_roce=$(tshark_count "udp.dstport == 4791 && !infiniband")
echo "capture: $total RoCEv2 packets, $not_roce not decoded as InfiniBand"
[ "$total" -gt 0 ] || { echo "FAIL: empty capture"; status=1; }
[ "$not_roce" = 0 ] || { echo "FAIL: packets tshark does not decode as RoCE"; status=1; }
for c in "${checks[@]}"; do
  filter=${c%>=*} min=${c##*>=}
  n=$(tshark_count "$filter")
  echo "capture: $n packets match [$filter] (want >= $min)"
  [ "$n" -ge "$min" ] || { echo "FAIL: [$filter]"; status=1; }
done
for filter in "${nones[@]}"; do
  n=$(tshark_count "$filter")
  echo "capture: $n packets match [$filter] (want none)"
  [ "$n" = 0 ] || { echo "FAIL: [$filter]"; status=1; }
done
exit $status
