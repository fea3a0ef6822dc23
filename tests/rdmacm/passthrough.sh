#!/bin/bash
# Pass-through: librocelab_rdmacm.so preloaded WITHOUT the verbs shim (so no
# emulated device) hands every call to the real librdmacm: each program
# behaves exactly as without the preload (same output, same exit status).
# On this machine that is the real library's "no RDMA device" path.
#
#   passthrough.sh LIBROCELAB_RDMACM PROG ARGS...
set -u
lib=$1
shift
plain=$(timeout 20 "$@" 2>&1); plain_rc=$?
shimmed=$(LD_PRELOAD=$lib timeout 20 "$@" 2>&1); shim_rc=$?
echo "without the shim (exit $plain_rc):"; echo "$plain"
echo "with the shim preloaded (exit $shim_rc):"; echo "$shimmed"
[ "$plain_rc" = "$shim_rc" ] || { echo "FAIL: exit status differs"; exit 1; }
[ "$plain" = "$shimmed" ] || { echo "FAIL: output differs"; exit 1; }
echo PASS
