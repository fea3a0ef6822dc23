#!/usr/bin/env bash
# `make demo`: write a capture with one packet of every opcode and decode it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin/rocelab
out=build/demo
mkdir -p "$out"
echo "== rocelab: a capture with one packet of every RC, UC and UD opcode"
"$bin" opcodes --pcap "$out/opcodes.pcap"
"$bin" decode --summary "$out/opcodes.pcap"
