#!/bin/bash
# The port's active MTU follows the interface, as Soft-RoCE derives it
# (interface MTU - 80 bytes of headers, rounded down to an IBTA MTU): an
# unmodified ibv_devinfo under `rocelab run --ip` on a veth in a network
# namespace sees 1024 at 1500 bytes, 512 at 1100, 4096 at 9000; --mtu overrides.
# Exits 77 (ctest: skipped) where namespaces cannot be made.
# Usage: link_mtu.sh ROCELAB
set -u
rocelab=$1
ns=rocelab-mtu-$$
if ! ip netns add "$ns" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (need root)"; exit 77
fi
trap 'ip netns del "$ns" 2>/dev/null' EXIT
ip -n "$ns" link add v0 type veth peer name v1 &&
ip -n "$ns" addr add 198.18.9.1/24 dev v0 &&
ip -n "$ns" link set v0 up && ip -n "$ns" link set v1 up || { echo "cannot set up the veth"; exit 1; }
failures=0
check() {  # check LINK_MTU EXPECTED [RUN_OPTION...]
  local link=$1 want=$2; shift 2
  ip -n "$ns" link set v0 mtu "$link" || { failures=$((failures + 1)); return; }
  local out
  out=$(timeout 60 ip netns exec "$ns" "$rocelab" run --ip 198.18.9.1 "$@" -- ibv_devinfo 2>&1)
  if ! grep -Eq "active_mtu:[[:space:]]+$want " <<< "$out"; then
    echo "link MTU $link $*: expected active_mtu $want"; echo "$out"; failures=$((failures + 1))
  fi
}
check 1500 1024
check 1100 512
check 9000 4096
check 1500 2048 --mtu 2048
[ $failures = 0 ] && echo ok
exit $((failures > 0))
