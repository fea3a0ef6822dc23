#!/bin/bash
# Runs one rdma_cm program under `rocelab run` on an address of its own and
# passes on its output and exit status (the test's PASS_REGULAR_EXPRESSION
# judges the output).
#
#   cm_alone.sh ROCELAB PROG ARGS...
#
# The program's device holds NET.1, NET the /24 of a port the script claims
# (tests/lib/harness.sh: claim_port, net_of). In ARGS @FREE@ stands for NET.2,
# an address of that /24 which nothing holds.
set -u
rocelab=$1
shift
. "$(dirname "$0")/../lib/harness.sh"
port=$(claim_port) || exit 1
net=$(net_of "$port")
"$rocelab" run --ip "$net.1" -- "${@//@FREE@/$net.2}"
