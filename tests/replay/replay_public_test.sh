#!/bin/bash
# `rocelab replay` on the real captures of ../shared/traces/public: the RC
# connections are replayed against a live emulated responder to the end, with
# the differences docs/replay.md ("Replay") explains; the captures without an
# RC/UC connection exit 2 saying so. Skips (77) when ../shared is absent.
# Usage: replay_public_test.sh ROCELAB SHARED_DIR
set -u
rocelab=$1
traces=$2/traces/public
[ -d "$traces" ] || { echo "SKIP: $traces is absent (a user's clone has no ../shared)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
result() { grep '"type":"result"' <<< "$1"; }
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<< "$1"; }

# Soft-RoCE in VMs: a WRITE of 18 bytes and a 4 KiB READ from the same
# address: the first READ response's first 18 bytes are what the WRITE put
# there (compared: the same live); the rest is the remote application's.
for f in montybeatnik_roce_capture_read-write-ecn.pcap montybeatnik_test.pcap; do
  out=$("$rocelab" replay --json "$traces/$f"); rc=$?
  r=$(result "$out")
  [ $rc = 0 ] || fail "$f: exit $rc: $out"
  [ "$(field "$r" requests)" = 2 ] && [ "$(field "$r" live_responses)" = 5 ] &&
    [ "$(field "$r" captured_responses)" = 5 ] && [ "$(field "$r" reads_compared)" = 1 ] &&
    [ "$(field "$r" read_bytes_compared)" = 18 ] && [ "$(field "$r" reads_undetermined)" = 3 ] &&
    [ "$(field "$r" behaviour)" = 0 ] &&
    [ "$(field "$r" policy)" = 0 ] && [ "$(field "$r" network)" = 0 ] || fail "$f: $r"
done

# The Huawei NIC: 67 SENDs one way. It advertises end-to-end credits (5, 6)
# where rocelab says 31 (none), and acknowledges one SEND First without
# AckReq that rocelab covers with the next ACK: policy only.
f=oferby_proxy_roce.pcap
out=$("$rocelab" replay --json --max-differences 0 "$traces/$f"); rc=$?
r=$(result "$out")
[ $rc = 0 ] || fail "$f: exit $rc"
[ "$(field "$r" requests)" = 67 ] && [ "$(field "$r" behaviour)" = 0 ] && [ "$(field "$r" network)" = 0 ] ||
  fail "$f: $r"
[ "$(grep -c '"kind":"credits"' <<< "$out")" = 35 ] || fail "$f: credit differences: $out"
[ "$(grep -c '"kind":"ack_coalescing"' <<< "$out")" = 1 ] || fail "$f: coalescing: $out"
# The other direction, chosen with --qp: one SEND with Immediate.
out=$("$rocelab" replay --json --qp 0x45 "$traces/$f"); rc=$?
[ $rc = 0 ] && [ "$(field "$(result "$out")" requests)" = 1 ] || fail "$f --qp 0x45: exit $rc: $out"

# One READ request of 64 KiB, no response captured: the live responder's 64
# responses are network differences (the capture ends), nothing behavioural.
f=pcapplusplus_InfiniBandPacket.pcap
out=$("$rocelab" replay --json "$traces/$f"); rc=$?
r=$(result "$out")
[ $rc = 0 ] && [ "$(field "$r" live_responses)" = 64 ] && [ "$(field "$r" behaviour)" = 0 ] || fail "$f: exit $rc: $r"

# No RC or UC connection: a CNP alone, native InfiniBand.
for f in scapy_roce_uts_cnp_connectx4lx.pcap srinivaskoritala_infiniband.pcap; do
  err=$("$rocelab" replay "$traces/$f" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && grep -q "no RC or UC connection" <<< "$err" || fail "$f: exit $rc: $err"
done
[ $failures = 0 ] && echo "rocelab replay: every public RC connection replayed"
exit $((failures > 0))
