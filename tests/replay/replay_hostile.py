#!/usr/bin/env python3
"""`rocelab replay` on hostile input: a seeded generator damages a real
capture (rocelab loopback's) -- bytes flipped inside the RoCEv2 headers and
payloads, records cut short, PSNs, opcodes, R_Keys, VAs and lengths set to
extreme values -- and every variant must end with exit 0, 1 or 2, never a
signal (under ASan+UBSan in `make test`'s second run), within a time limit.

Usage: replay_hostile.py ROCELAB [VARIANTS]
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

rocelab = sys.argv[1]
variants = int(sys.argv[2]) if len(sys.argv) > 2 else 40
tmp = tempfile.mkdtemp()
base = os.path.join(tmp, "base.pcap")
subprocess.run([rocelab, "loopback", "--transport", "sim", "--qp-type", "rc", "--op", "all", "--count", "8",
                "--size", "3000", "--pcap", base], check=True, capture_output=True)
data = open(base, "rb").read()
# pcap records: 24-byte file header, then 16-byte record headers.
records, off = [], 24
while off + 16 <= len(data):
    incl = struct.unpack_from("<I", data, off + 8)[0]
    records.append((off, off + 16, incl))
    off += 16 + incl
failures = 0
codes = {}
for v in range(variants):
    rng = random.Random(v)
    buf = bytearray(data)
    kind = v % 4
    for _ in range(rng.randint(1, 12)):
        _, start, incl = rng.choice(records)
        bth = start + 14 + 20 + 8  # Ethernet, IPv4, UDP
        if kind == 0:  # random bytes anywhere in the transport packet
            p = rng.randrange(bth, start + incl)
            buf[p] = rng.randrange(256)
        elif kind == 1:  # extreme header fields: opcode, PSN, RETH (VA, R_Key, length)
            p = bth + rng.choice([0, 5, 6, 7, 9, 10, 11, 12, 16, 20, 24, 25, 26, 27])
            if p < start + incl:
                buf[p] = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif kind == 2:  # a PSN far away
            struct.pack_into(">I", buf, bth + 8, rng.randrange(1 << 24) | (rng.randrange(2) << 31))
        else:  # the opcode of another packet kind
            buf[bth] = rng.choice([0x00, 0x01, 0x02, 0x06, 0x07, 0x0C, 0x0D, 0x0E, 0x10, 0x11, 0x12, 0x13, 0x14,
                                   0x24, 0x64, 0x81, 0xA0])
    if v % 5 == 4:  # and cut inside a record
        buf = buf[:rng.randrange(24, len(buf))]
    path = os.path.join(tmp, f"v{v}.pcap")
    open(path, "wb").write(buf)
    for args in (["--as-fast-as-possible"], ["--to-scenario", os.path.join(tmp, "s.textproto")]):
        try:
            r = subprocess.run([rocelab, "replay", *args, path], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            print(f"FAIL: variant {v} {args}: no end within 60 s")
            failures += 1
            continue
        codes[r.returncode] = codes.get(r.returncode, 0) + 1
        if r.returncode not in (0, 1, 2):
            print(f"FAIL: variant {v} {args}: exit {r.returncode}: {r.stderr[-800:]}")
            failures += 1
print(f"{variants} damaged captures replayed (exit statuses: {codes}), {failures} failures")
sys.exit(1 if failures else 0)
