#!/bin/bash
# Pass-through: librocelab_rdmacm.so preloaded WITHOUT the verbs shim (so no
# emulated device) hands every call to the real librdmacm: each program
# behaves exactly as without the preload (same output, same exit status).
# On this machine that is the real library's "no RDMA device" path.
#
#   passthrough.sh LIBROCELAB_RDMACM PROG ARGS...
#
# In ARGS @PORT@ stands for a TCP port the script claims (tests/lib/harness.sh,
# claim_port): with a real device the real library's rdma_cm ports are the
# kernel's (on iWARP, TCP ports), which another suite on the machine must not
# hold at the same time.
set -u
lib=$1
shift
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
args=("${@//@PORT@/$port}")
plain=$(timeout 20 "${args[@]}" 2>&1); plain_rc=$?
shimmed=$(LD_PRELOAD=$lib timeout 20 "${args[@]}" 2>&1); shim_rc=$?
echo "without the shim (exit $plain_rc):"; echo "$plain"
echo "with the shim preloaded (exit $shim_rc):"; echo "$shimmed"
[ "$plain_rc" = "$shim_rc" ] || { echo "FAIL: exit status differs"; exit 1; }
[ "$plain" = "$shimmed" ] || { echo "FAIL: output differs"; exit 1; }
echo PASS
