# Sourced by the two-process shim tests (run_pair.sh, vanished_peer.sh): two
# network namespaces joined by a veth pair, server side 198.18.0.1 and client
# side 198.18.0.2 (MTU 1500: RoCE MTU 1024), named after the test's TCP port
# so that parallel tests do not collide.
#
#   netns_up PORT   creates them and sets ns_a, ns_b (server, client side),
#                   server_ip, srv_prefix/cli_prefix (ip netns exec ...) and
#                   srv_opts/cli_opts (rocelab run --ip ...); exits 77 (ctest:
#                   skipped) where namespaces cannot be made
#   netns_down      removes them (call it from the EXIT trap)
netns_up() {
  local port=$1
  ns_a=rocelab-a-$port ns_b=rocelab-b-$port
  if ! ip netns add "$ns_a" 2>/dev/null; then
    echo "SKIP: cannot create network namespaces here (need root/CAP_SYS_ADMIN)"
    exit 77
  fi
  ip netns add "$ns_b" &&
  ip link add "va-$port" netns "$ns_a" type veth peer name "vb-$port" netns "$ns_b" &&
  ip -n "$ns_a" addr add 198.18.0.1/24 dev "va-$port" &&
  ip -n "$ns_b" addr add 198.18.0.2/24 dev "vb-$port" &&
  ip -n "$ns_a" link set "va-$port" up && ip -n "$ns_b" link set "vb-$port" up &&
  ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || {
    echo "SKIP: cannot set up the veth pair between namespaces"; exit 77; }
  server_ip=198.18.0.1
  srv_prefix=(ip netns exec "$ns_a") cli_prefix=(ip netns exec "$ns_b")
  srv_opts=(--ip 198.18.0.1) cli_opts=(--ip 198.18.0.2)
}

netns_down() {
  [ -n "${ns_a:-}" ] && ip netns del "$ns_a" 2>/dev/null
  [ -n "${ns_b:-}" ] && ip netns del "$ns_b" 2>/dev/null
  return 0
}
