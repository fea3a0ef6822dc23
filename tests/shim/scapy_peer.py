#!/usr/bin/python3
"""An independent RoCEv2 peer for rocelab, written apart from
rocelab's engine: packets are built with scapy (scapy.contrib.roce computes the
ICRC) and sent from a raw socket with random IPv4 IDs, TTLs and DSCPs and a UDP
checksum now set, now zero — as the kernel's Soft-RoCE and NICs send — and
every packet rocelab sends back is checked: its ICRC (recomputed by scapy over
the header rocelab sends: ID 0, DF, TTL 64), opcode, PSN, AETH syndrome and MSN.

It plays one side of rdma-core's ibv_rc_pingpong or ibv_ud_pingpong, which runs
unmodified under `rocelab run` on the other side: the same TCP exchange of
"LID:QPN:PSN:GID" (pingpong.c), then message for message, single-packet SENDs.

  scapy_peer.py --kind rc|ud --role server|client --ip MY_ADDR --port TCP_PORT
                [--server ADDR] [--size N] [--iters N]

Prints one summary line; exit 0 when every exchange and check passed, 1 when a
check failed, 2 on a usage or setup error. Every wait is bounded.
"""
import argparse
import os
import random
import select
import socket
import struct
import sys
import time

from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.compat import raw

RC_SEND_ONLY, RC_ACK, UD_SEND_ONLY = 0x04, 0x11, 0x64
UD_QKEY = 0x11111111
MASK24 = 0xFFFFFF
MSG_LEN = len("0000:000000:000000:00000000000000000000000000000000") + 1  # pingpong's sizeof msg


class Failure(Exception):
    pass


def gid_of(ip):
    """::ffff:a.b.c.d as pingpong's wire GID (the 16 raw bytes in hex)."""
    return (b"\0" * 10 + b"\xff\xff" + socket.inet_aton(ip)).hex()


def ip_of_gid(wire_gid):
    raw_gid = bytes.fromhex(wire_gid)
    return socket.inet_ntoa(raw_gid[12:16])


class Peer:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.port)
        self.my_qpn = 0x000A00 + (args.port % 0x100)
        self.my_psn = self.rng.randrange(0, MASK24 + 1)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.bind((args.ip, 4791))
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)  # IP_HDRINCL
        self.sport = 0xC000 + self.rng.randrange(0, 0x4000)
        self.checked = 0
        self.ids = set()

    # ---- the pingpong programs' TCP exchange (pingpong.c) -------------------
    def exchange(self):
        mine = "%04x:%06x:%06x:%s" % (0, self.my_qpn, self.my_psn, gid_of(self.args.ip))
        mine_b = mine.encode() + b"\0"
        if self.args.role == "client":
            s = None
            for _ in range(100):  # the server may not be listening yet
                try:
                    s = socket.create_connection((self.args.server, self.args.port), timeout=10)
                    break
                except OSError:
                    time.sleep(0.1)
            if s is None:
                raise Failure("cannot connect to the pingpong server")
            s.sendall(mine_b)
            theirs = self.read_exact(s, MSG_LEN)
            s.sendall(b"done\0")
        else:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind(("0.0.0.0", self.args.port))
            ls.listen(1)
            ls.settimeout(30)
            s, _ = ls.accept()
            ls.close()
            s.settimeout(30)
            theirs = self.read_exact(s, MSG_LEN)
            s.sendall(mine_b)
            self.read_exact(s, 5)  # "done"
        s.close()
        lid, qpn, psn, gid = theirs.rstrip(b"\0").decode().split(":")
        self.peer_qpn, self.peer_psn, self.peer_ip = int(qpn, 16), int(psn, 16), ip_of_gid(gid)

    @staticmethod
    def read_exact(s, n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise Failure("the pingpong program closed the exchange")
            buf += chunk
        return buf

    # ---- the wire -------------------------------------------------------------
    def send(self, bth, *layers):
        """Sends with a random ID, TTL and DSCP; UDP checksum now computed, now 0."""
        ident = self.rng.randrange(1, 0x10000)
        self.ids.add(ident)
        pkt = IP(src=self.args.ip, dst=self.peer_ip, id=ident, flags="DF",
                 ttl=self.rng.randrange(16, 256), tos=self.rng.randrange(0, 64) << 2)
        udp = UDP(sport=self.sport, dport=4791)
        if self.rng.random() < 0.5:
            udp.chksum = 0
        p = pkt / udp / bth
        for layer in layers:
            p = p / layer
        self.tx.sendto(raw(p), (self.peer_ip, 0))

    def receive(self, timeout=5.0):
        """The next RoCEv2 packet from the peer, its ICRC checked; None after timeout."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.rx], [], [], left)[0]:
                return None
            data, (src, sport) = self.rx.recvfrom(65536)
            if src != self.peer_ip:
                continue
            # What rocelab sent on the wire: ID 0, DF, TTL 64, TOS 0 (its unconnected DF socket).
            pkt = IP(src=src, dst=self.args.ip, id=0, flags="DF", ttl=64) / UDP(sport=sport, dport=4791) / BTH(data)
            bth = pkt[BTH]
            carried = struct.pack("!I", bth.icrc)
            if bth.compute_icrc(None) != carried:
                raise Failure("bad ICRC on a packet from rocelab (opcode 0x%02x psn %d)" % (bth.opcode, bth.psn))
            self.checked += 1
            return bth, data

    # ---- RC -------------------------------------------------------------------
    def rc_send(self, i, payload):
        psn = (self.my_psn + i) & MASK24
        for attempt in range(20):
            self.send(BTH(opcode=RC_SEND_ONLY, dqpn=self.peer_qpn, psn=psn, ackreq=1), Raw(payload))
            got = self.receive(0.2)
            while got is not None:
                bth, data = got
                if bth.opcode == RC_ACK and bth.dqpn == self.my_qpn:
                    syndrome, msn = data[12], int.from_bytes(data[13:16], "big")
                    if syndrome >> 5 != 0:
                        raise Failure("NAK 0x%02x for PSN %d" % (syndrome, psn))
                    if bth.psn == psn:
                        if msn != (i + 1) & MASK24:
                            raise Failure("ACK of PSN %d carries MSN %d, expected %d" % (psn, msn, i + 1))
                        return
                elif bth.opcode == RC_SEND_ONLY:
                    self.pending = got  # the peer's next message came first
                got = self.receive(0.01) if self.pending is None else None
        raise Failure("no ACK for PSN %d after 20 tries" % psn)

    def rc_receive(self, i):
        expect = (self.peer_psn + i) & MASK24
        got, self.pending = self.pending, None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if got is None:
                got = self.receive(1.0)
                if got is None:
                    continue
            bth, data = got
            got = None
            if bth.opcode != RC_SEND_ONLY or bth.dqpn != self.my_qpn:
                continue
            if bth.psn != expect:
                # A duplicate (our ACK was late): ACK again what we have.
                self.rc_ack((expect - 1) & MASK24, i)
                continue
            if len(data) - 16 != self.args.size:
                raise Failure("message %d: %d bytes, expected %d" % (i, len(data) - 16, self.args.size))
            self.rc_ack(expect, i + 1)
            return
        raise Failure("message %d never came" % i)

    def rc_ack(self, psn, msn):
        self.send(BTH(opcode=RC_ACK, dqpn=self.peer_qpn, psn=psn), AETH(syndrome=0x1F, msn=msn & MASK24))

    # ---- UD -------------------------------------------------------------------
    def ud_send(self, i, payload):
        deth = struct.pack("!II", UD_QKEY, self.my_qpn)  # Q_Key, then reserved byte + source QP
        self.send(BTH(opcode=UD_SEND_ONLY, dqpn=self.peer_qpn, psn=(self.my_psn + i) & MASK24), Raw(deth + payload))

    def ud_receive(self, i):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = self.receive(1.0)
            if got is None:
                continue
            bth, data = got
            if bth.opcode != UD_SEND_ONLY or bth.dqpn != self.my_qpn:
                continue
            qkey, src_qp = struct.unpack("!II", data[12:20])
            if qkey != UD_QKEY or src_qp & MASK24 != self.peer_qpn:
                raise Failure("UD message %d: Q_Key 0x%x, source QP 0x%x" % (i, qkey, src_qp))
            if len(data) - 24 != self.args.size:
                raise Failure("UD message %d: %d bytes, expected %d" % (i, len(data) - 24, self.args.size))
            return
        raise Failure("UD message %d never came" % i)

    # ---- the ping-pong ----------------------------------------------------------
    def run(self):
        self.pending = None
        self.exchange()
        send, recv = (self.rc_send, self.rc_receive) if self.args.kind == "rc" else (self.ud_send, self.ud_receive)
        # pingpong's rhythm: the client sends first; each side sends after it received.
        for i in range(self.args.iters):
            payload = os.urandom(self.args.size)
            if self.args.role == "client":
                send(i, payload)
                recv(i)
            else:
                recv(i)
                send(i, payload)
        if self.args.kind == "rc" and self.args.role == "server":
            pass  # our last SEND was ACKed inside rc_send
        print("ok: %s %s, %d messages each way, %d packets from rocelab checked (ICRC, PSN, AETH), %d distinct IPv4 IDs sent"
              % (self.args.kind, self.args.role, self.args.iters, self.checked, len(self.ids)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["rc", "ud"], required=True)
    ap.add_argument("--role", choices=["server", "client"], required=True)
    ap.add_argument("--ip", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--server")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    if args.role == "client" and not args.server:
        ap.error("--server is needed with --role client")
    try:
        Peer(args).run()
    except Failure as e:
        print("FAIL:", e)
        return 1
    except OSError as e:
        print("setup error:", e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
