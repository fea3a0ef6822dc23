#!/usr/bin/python3
"""Independent ICRC check: scapy's RoCE layer (scapy.contrib.roce, BTH.compute_icrc).

Usage: scapy_icrc.py CAPTURE
Prints one line per RoCEv2 packet: "<frame> <carried> <computed>", both as the
4 ICRC bytes in wire order (hex). Exits 1 if scapy is missing or finds no BTH;
the caller compares the values with its own decoder.
"""
import struct
import sys

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP
from scapy.utils import rdpcap


def main() -> int:
    packets = rdpcap(sys.argv[1])
    found = 0
    for frame, pkt in enumerate(packets, start=1):
        if BTH not in pkt or IP not in pkt:  # scapy computes the ICRC over IPv4 only
            continue
        bth = pkt[BTH]
        carried = struct.pack("!I", bth.icrc)  # FCSField "!I": the wire bytes as they are
        computed = bth.compute_icrc(None)      # already in wire order (little-endian CRC)
        print(frame, carried.hex(), computed.hex())
        found += 1
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
