#!/bin/bash
# Open MPI over UCX on rocelab0: mpi_check (tests/shim/programs/mpi_check.c)
# with every rank under `rocelab run`, its traffic on the emulated device's
# verbs and nowhere else.
#
#   mpi.sh ROCELAB MPI_CHECK NRANKS [-n] [-b] [-t]
#
# -n  two hosts: two network namespaces joined by a veth (netns_pair.sh);
#     mpirun runs in the first, ranks alternate between the two (--map-by
#     node) and the second's are started through an rsh agent that is
#     `ip netns exec`. Each rank's device gets an address of its own on the
#     veth (198.18.0.101, .102 ... on the first host, .201, .202 ... on the
#     second), so that two ranks of one host do not both bind UDP 4791.
#     Without -n every rank is on this host, its device on the first free
#     127.0.0.x.
# -b  mpi_check --bench (ranks 0 and 1: latency, bandwidth) instead of the checks
# -t  the same over Open MPI's TCP transport (pml ob1, btl tcp and self, osc
#     pt2pt: RMA over the same messages), without rocelab: for comparison
#
# What the UCX runs need, and why:
#   --mca pml ucx        Open MPI 4.1 takes UCX's pml on its own only for
#                        mlx* devices ("support level is transports only")
#   --mca osc ucx        otherwise one-sided goes through osc sm/rdma over
#                        shared memory
#   --mca btl self       no vader (shared memory) or tcp btl is opened at all
#   --bind-to none       the two "hosts" share this machine's cores: bound,
#                        both put their first rank on core 0 (ms latencies)
#   UCX_TLS=rc_verbs,ud_verbs   no sm, no tcp: verbs or nothing (ud_verbs is
#                        the wire-up transport rc_verbs needs)
#   UCX_NET_DEVICES=rocelab0:1
#   UCX_UD_VERBS_ETH_DGID_CHECK=n   UCX before 1.19 drops UD packets from
#                        IPv4 GIDs otherwise (docs/frameworks.md)
#   UCX_LOG_LEVEL=info   each UCP endpoint's transports (ep_cfg lines), checked
# Exits 77 (ctest: skipped) when mpirun, or namespaces for -n, are unavailable.
# Every command is bounded (TIMEOUT, default 180 s).
set -u
rocelab=$1 prog=$2 nranks=$3
shift 3
netns=0 bench=0 tcp=0
while [ $# -gt 0 ]; do
  case $1 in
    -n) netns=1 ;;
    -b) bench=1 ;;
    -t) tcp=1 ;;
    *) echo "mpi.sh: bad argument $1" >&2; exit 2 ;;
  esac
  shift
done
here=$(dirname "$0")
. "$here/../lib/harness.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
mpirun --version 2>/dev/null | grep -q "Open MPI" || { echo "SKIP: mpirun is not Open MPI's"; exit 77; }
port=$(claim_port) || exit 1
limit=${TIMEOUT:-180}
work=$(mktemp -d /tmp/rocelab-mpi.XXXXXX)

. "$here/netns_pair.sh"
cleanup() {
  # What mpirun left behind in our namespaces (it was killed, say).
  local ns pid
  for ns in ${ns_a:-} ${ns_b:-}; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  done
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT

args=(--bind-to none)
[ "$(id -u)" = 0 ] && args+=(--allow-run-as-root)
if [ $tcp = 1 ]; then
  args+=(--mca pml ob1 --mca btl tcp,self --mca osc pt2pt)
else
  args+=(--mca pml ucx --mca osc ucx --mca btl self
         -x UCX_TLS=rc_verbs,ud_verbs -x UCX_NET_DEVICES=rocelab0:1
         -x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_LOG_LEVEL=info)
fi
prog_args=()
[ $bench = 1 ] && prog_args=(--bench)
prefix=()
if [ $netns = 1 ]; then
  netns_up "$port"
  per_host=$(( (nranks + 1) / 2 ))
  ips_a="" ips_b=""
  # Not with -t: btl tcp refuses a connection whose source address (the
  # kernel's choice, the primary one) is not the first it was told of.
  for ((i = 1; i <= per_host && tcp == 0; i++)); do
    ips_a+="198.18.0.$((100 + i)) " ips_b+="198.18.0.$((200 + i)) "
    ip -n "$ns_a" addr add "198.18.0.$((100 + i))/24" dev "va-$port" &&
    ip -n "$ns_b" addr add "198.18.0.$((200 + i))/24" dev "vb-$port" || fail "cannot add addresses to the veth"
  done
  # mpirun's rsh agent: `agent HOST COMMAND...` runs COMMAND (an orted) in
  # HOST's namespace; the ranks it starts inherit ROCELAB_MPI_IPS.
  cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  198.18.0.1) ns=$ns_a ips="$ips_a" ;;
  198.18.0.2) ns=$ns_b ips="$ips_b" ;;
  *) echo "agent: no namespace for host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" env ROCELAB_MPI_IPS="\$ips" sh -c "\$*"
EOF
  chmod +x "$work/agent"
  printf '198.18.0.1 slots=%d\n198.18.0.2 slots=%d\n' "$per_host" "$per_host" >"$work/hosts"
  # mpirun is on 198.18.0.1 (a local address: no agent for it); the out-of-band
  # TCP of mpirun and the orted, and btl tcp with -t, stay on the veth.
  args+=(--hostfile "$work/hosts" --map-by node --mca plm_rsh_agent "$work/agent"
         --mca oob_tcp_if_include 198.18.0.0/24 --mca btl_tcp_if_include 198.18.0.0/24)
  prefix=(ip netns exec "$ns_a" env ROCELAB_MPI_IPS="$ips_a")
  # Each rank's device on the address of its local rank on its host
  # (sh -c's $1 is the rocelab binary, the program and its arguments follow).
  pick='n=$OMPI_COMM_WORLD_LOCAL_RANK; for a in $ROCELAB_MPI_IPS; do [ $n = 0 ] && ip=$a; n=$((n - 1)); done
        r=$1; shift; exec "$r" run --counters --ip "$ip" -- "$@"'
  launch=(sh -c "$pick" sh "$rocelab")
else
  args+=(--oversubscribe)
  launch=("$rocelab" run --counters --)
fi
[ $tcp = 1 ] && launch=()
cmd=("${prefix[@]}" timeout -k 10 "$limit" mpirun -np "$nranks" "${args[@]}" "${launch[@]}" "$prog" "${prog_args[@]}")
echo "+ ${cmd[*]}"
start=$EPOCHREALTIME
"${cmd[@]}" >"$work/out" 2>&1
rc=$?
secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
cat "$work/out"
echo "mpirun exit $rc after $secs s"

out=$work/out
[ $rc = 0 ] || { echo "FAIL: mpirun exited $rc"; status=1; }
expect() { grep -Eq -- "$1" "$out" || { echo "FAIL: no line matching /$1/"; status=1; }; }
expect "^mpi_check: $nranks ranks; network namespaces:"
if [ $bench = 1 ]; then
  expect "^mpi_check: bench latency 8 B: [0-9.]+ us"
  expect "^mpi_check: bench bandwidth 1048576 B: [0-9.]+ MB/s"
else
  expect "^mpi_check: p2p ok: "
  expect "^mpi_check: allreduce ok: "
  expect "^mpi_check: rma ok: "
  expect "^mpi_check: all checks passed"
fi
# Two hosts: the ranks ran in exactly two network namespaces.
if [ $netns = 1 ]; then
  n_ns=$(grep "^mpi_check: $nranks ranks; network namespaces:" "$out" | grep -o 'net:\[[0-9]*\]' | sort -u | wc -l)
  check "network namespaces the ranks ran in" "$n_ns" 2
fi
if [ $tcp = 0 ]; then
  # The traffic on rocelab0: every rank's device received packets, and every
  # UCP endpoint (pml's tags; osc's RMA and atomics) is on rc_verbs/rocelab0:1
  # alone.
  check "ranks whose rocelab0 received packets" \
    "$(grep -cE '^rocelab: rocelab0 counters: .*rcvd_pkts=[1-9]' "$out")" "$nranks"
  check "tag endpoints on rc_verbs/rocelab0:1" \
    "$(grep -cE 'ep_cfg\[[0-9]+\]: tag\(rc_verbs/rocelab0:1\)$' "$out")" "$nranks"
  if [ $bench = 0 ]; then
    check "RMA endpoints on rc_verbs/rocelab0:1" \
      "$(grep -cE 'ep_cfg\[[0-9]+\]: rma\(rc_verbs/rocelab0:1\) amo_am\(rc_verbs/rocelab0:1\)$' "$out")" "$nranks"
  fi
  others=$(grep -E 'ep_cfg' "$out" | grep -vE '\((rc|ud)_verbs/rocelab0:1\)' | head -3)
  [ -z "$others" ] || { echo "FAIL: endpoints on other transports: $others"; status=1; }
fi
[ $status = 0 ] && echo "PASS: mpi_check, $nranks ranks$([ $netns = 1 ] && echo ', two hosts')$([ $tcp = 1 ] && echo ', TCP')"
exit $status
