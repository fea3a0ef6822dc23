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
want=" ${*:-rc ud uc srq write_bw read_bw send_lat atomic_bw read_lat write_lat} "

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
table="| program | kernel as | result | time (s) | kernel's counters (non-zero) |\n|---|---|---|---|---|\n"
for row in "${rows[@]}"; do
  IFS='|' read -r name guest host port <<< "$row"
  [[ $want == *" $name "* ]] || continue
  for kernel in server client; do
    dir=$out/$name-kernel-$kernel
    if [ $kernel = server ]; then
      args=(--guest "$guest" --host "$rocelab run --counters --ip 192.0.2.3 -- $host 192.0.2.1" --guest-first)
    else
      args=(--guest "$guest 192.0.2.3" --host "$rocelab run --counters --ip 192.0.2.3 -- $host" --host-first)
    fi
    echo "== $name, kernel as $kernel"
    BUILD=$build "$harness/run-interop.sh" --out "$dir" "${args[@]}" --wait-port "$port" --timeout 120 \
      > "$dir.log" 2>&1
    rc=$?
    t=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("commands_s","?"))' \
        "$dir/results.json" 2>/dev/null || echo "?")
    if [ $rc = 0 ]; then result=pass; else result="FAIL ($rc)"; failed=1; fi
    table+="| \`${host%% *}\` | $kernel | $result | $t | $(counters "$dir/results.json") |\n"
    echo "   $result in $t s"
  done
done
echo
printf "%b" "$table"
exit $failed
