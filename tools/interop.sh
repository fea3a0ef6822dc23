#!/bin/bash
# `make interop`: rocelab against the Linux kernel's Soft-RoCE (rdma_rxe) on a
# real Ethernet link, with ../shared/tools/rxe-qemu (a qemu guest on a tap
# device; see its README). Each row runs an unmodified program in the guest on
# rxe0 and the same program under `rocelab run --ip 192.0.2.3` on the host,
# once with the kernel as server and once as client, and records exit codes,
# times and the guest's rxe counters. Prints a Markdown table; the runs'
# captures and logs stay in $OUT (default build/interop).
#
# Not part of `make test`: a guest boots in 1-2 minutes per run (TCG). Exits 0
# with a notice when qemu, the guest image or ../shared are missing; otherwise
# 0 when every run passed, 1 when one failed.
#
#   tools/interop.sh [ROW...]      rows: rc ud uc srq write_bw read_bw send_lat atomic_bw read_lat write_lat
#                                  and the same with a 6 (rc6, ud6 ...): IPv6;
#                                  rdma_cm rows (IPv4 only): rping write_bw_cm
#
# IPv4 rows use the guest's GID 1 (::ffff:192.0.2.1) and `--ip 192.0.2.3`.
# IPv6 rows use the guest's GID 0, its link-local address fe80::5054:ff:fec0:201
# (from the MAC the harness gives it), and give tap0 a link-local address of
# its own for rocelab: `--ip fe80::3%tap0`. The TCP exchange of the programs
# stays on IPv4 (192.0.2.x) in both cases; only the RoCE traffic changes family.
set -u
cd "$(dirname "$0")/.."
harness=${RXE_QEMU:-../shared/tools/rxe-qemu}
build=${BUILD:-/var/tmp/rxe-qemu-build}
out=${OUT:-build/interop}
rocelab=build/bin/rocelab
if [ ! -x "$harness/run-interop.sh" ]; then
  echo "make interop: $harness is missing (it comes with ../shared): nothing run"; exit 0
fi
if ! command -v qemu-system-x86_64 > /dev/null || [ ! -e "$build/rootfs.img" ]; then
  echo "make interop: no qemu or no guest image in $build; build it once with"
  echo "  sudo $harness/make-vm.sh   (about 5 minutes; Debian packages only)"
  echo "nothing run"; exit 0
fi
[ -x "$rocelab" ] || { echo "make interop: build first (make build)"; exit 1; }
mkdir -p "$out"

# row: name | guest program and args (rxe0, GID index 1 = ::ffff:192.0.2.1) |
#      host program and args (rocelab0, GID 0) | TCP port
rows=(
  "rc|ibv_rc_pingpong -d rxe0 -g 1 -s 100 -n 20|ibv_rc_pingpong -g 0 -s 100 -n 20|18515"
  "ud|ibv_ud_pingpong -d rxe0 -g 1 -s 512 -n 20|ibv_ud_pingpong -g 0 -s 512 -n 20|18515"
  "uc|ibv_uc_pingpong -d rxe0 -g 1 -s 4096 -n 20|ibv_uc_pingpong -g 0 -s 4096 -n 20|18515"
  "srq|ibv_srq_pingpong -d rxe0 -g 1 -s 100 -n 20|ibv_srq_pingpong -g 0 -s 100 -n 20|18515"
  "write_bw|ib_write_bw -d rxe0 -x 1 -F -s 65536 -n 200|ib_write_bw -x 0 -F -s 65536 -n 200|18515"
  "read_bw|ib_read_bw -d rxe0 -x 1 -F -s 65536 -n 200|ib_read_bw -x 0 -F -s 65536 -n 200|18515"
  "send_lat|ib_send_lat -d rxe0 -x 1 -F -n 200|ib_send_lat -x 0 -F -n 200|18515"
  "atomic_bw|ib_atomic_bw -d rxe0 -x 1 -F -n 200|ib_atomic_bw -x 0 -F -n 200|18515"
  "read_lat|ib_read_lat -d rxe0 -x 1 -F -n 200|ib_read_lat -x 0 -F -n 200|18515"
  "write_lat|ib_write_lat -d rxe0 -x 1 -F -n 200|ib_write_lat -x 0 -F -n 200|18515"
)
all4="rc ud uc srq write_bw read_bw send_lat atomic_bw read_lat write_lat"
# rdma_cm rows: both sides connect through the CM (MADs to QP 1), no TCP port
# to wait for, so the second side starts after a delay. Fields: name | guest as
# server | guest as client | host as server | host as client.
cm_rows=(
  "rping|rping -s -a 192.0.2.1 -v -C 10|rping -c -a 192.0.2.3 -v -C 10|rping -s -a 192.0.2.3 -v -C 10|rping -c -a 192.0.2.1 -v -C 10"
  "write_bw_cm|ib_write_bw -R -d rxe0 -F -s 65536 -n 200|ib_write_bw -R -d rxe0 -F -s 65536 -n 200 192.0.2.3|ib_write_bw -R -F -s 65536 -n 200|ib_write_bw -R -F -s 65536 -n 200 192.0.2.1"
)
allcm="rping write_bw_cm"
want=" ${*:-$all4 ${all4// /6 }6 $allcm} "

counters() {  # the guest's rxe counter deltas that tell of trouble, from results.json
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no results (%s)" % e); sys.exit()
d = r.get("rxe_counter_delta", {})
keys = ["duplicate_request", "out_of_seq_request", "completer_retry_err", "rcvd_seq_err", "retry_exceeded_err"]
print(", ".join("%s %d" % (k, d[k]) for k in keys if d.get(k)) or "-")
PY
}

failed=0
table="| program | family | kernel as | result | time (s) | kernel's counters (non-zero) |\n|---|---|---|---|---|---|\n"
for row in "${rows[@]}"; do
  IFS='|' read -r name guest4 host port <<< "$row"
  for family in 4 6; do
    if [ $family = 4 ]; then
      guest=$guest4 ip=192.0.2.3 setup="" id=$name fam=IPv4
    else
      # GID 0 of rxe0 is eth0's link-local address; tap0 gets one for rocelab
      guest=${guest4/ -g 1 / -g 0 } guest=${guest/ -x 1 / -x 0 }
      ip=fe80::3%tap0 setup="ip addr add fe80::3/64 dev tap0 nodad && " id=${name}6 fam=IPv6
    fi
    [[ $want == *" $id "* ]] || continue
    for kernel in server client; do
      dir=$out/$id-kernel-$kernel
      if [ $kernel = server ]; then
        args=(--guest "$guest" --guest-first
              --host "$setup$rocelab run --counters --ip $ip -- $host 192.0.2.1")
      else
        args=(--guest "$guest 192.0.2.3" --host-first
              --host "$setup$rocelab run --counters --ip $ip -- $host")
      fi
      echo "== $name ($fam), kernel as $kernel"
      BUILD=$build "$harness/run-interop.sh" --out "$dir" "${args[@]}" --wait-port "$port" \
        --timeout 120 > "$dir.log" 2>&1
      rc=$?
      t=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("commands_s","?"))' \
          "$dir/results.json" 2>/dev/null || echo "?")
      if [ $rc = 0 ]; then result=pass; else result="FAIL ($rc)"; failed=1; fi
      table+="| \`${host%% *}\` | $fam | $kernel | $result | $t | $(counters "$dir/results.json") |\n"
      echo "   $result in $t s"
    done
  done
done
for row in "${cm_rows[@]}"; do
  IFS='|' read -r name guest_srv guest_cli host_srv host_cli <<< "$row"
  [[ $want == *" $name "* ]] || continue
  for kernel in server client; do
    dir=$out/$name-kernel-$kernel
    if [ $kernel = server ]; then
      args=(--guest "$guest_srv" --guest-first --host "$rocelab run --counters --ip 192.0.2.3 -- $host_cli")
    else
      args=(--guest "$guest_cli" --host-first --host "$rocelab run --counters --ip 192.0.2.3 -- $host_srv")
    fi
    echo "== $name (IPv4, rdma_cm), kernel as $kernel"
    BUILD=$build "$harness/run-interop.sh" --out "$dir" "${args[@]}" --delay 8 \
      --timeout 120 > "$dir.log" 2>&1
    rc=$?
    t=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("commands_s","?"))' \
        "$dir/results.json" 2>/dev/null || echo "?")
    if [ $rc = 0 ]; then result=pass; else result="FAIL ($rc)"; failed=1; fi
    label=${host_srv%% *}
    [[ $host_srv == *" -R "* ]] && label+=" -R"
    table+="| \`$label\` | IPv4 (rdma_cm) | $kernel | $result | $t | $(counters "$dir/results.json") |\n"
    echo "   $result in $t s"
  done
done
echo
printf "%b" "$table"
exit $failed
