#!/usr/bin/env python3
"""Checks `rocelab stat --json` against what programs/stat_objects.c knows of
its own objects (its "expect" line) and did with them (see its header), and
the device's counters against `rocelab run --counters`' line at close.

  stat_objects_check.py OUT ERR STAT_JSON QP_JSON STAT_TXT"""
import json
import re
import sys

out, err, stat_json, qp_json, stat_txt = sys.argv[1:6]
expect = json.loads(next(l for l in open(out) if l.startswith("expect "))[7:])
host = json.load(open(stat_json))
failures = 0


def check(what, got, want):
    global failures
    if got == want:
        print(f"ok: {what} = {got!r}")
    else:
        print(f"FAIL: {what} = {got!r}, want {want!r}")
        failures += 1


def counters(obj):
    return {c["name"]: int(c["value"]) for c in obj["counters"]}


check("problems", host["problems"], [])
procs = [p for p in host["processes"] if "shim_stat_objects" in p["cmdline"]]
check("processes running stat_objects", len(procs), 1)
proc = procs[0]
check("comm", proc["comm"], "shim_stat_objec")  # /proc's 15 characters
check("devices", len(proc["devices"]), 1)
dev = proc["devices"][0]
check("device name", dev["name"], expect["device"])
check("device address", dev["address"], expect["address"])
check("qpn_block (not shared)", dev["qpn_block"], -1)
for k, v in {"pds": 1, "ahs": 0, "mws": 0, "channels": 1, "xrcds": 0}.items():
    check(f"device {k}", dev[k], v)
check("inflight_psns", int(dev["inflight_psns"]), 0)

# CQs, in creation order: scq (a, b, c send and receive... ), rcq, cq3.
cqs = dev["cqs"]
check("CQs", len(cqs), 3)
cqn = [c["cqn"] for c in cqs]
check("CQ numbers distinct", len(set(cqn)), 3)
for i, (cap, held, chan, armed, qps) in enumerate(
        [(expect["cqs"][0], 0, False, False, 3), (expect["cqs"][1], 4, False, False, 3),
         (expect["cqs"][2], 0, True, True, 1)]):
    c = cqs[i]
    check(f"CQ {i} capacity", c["capacity"], cap)
    check(f"CQ {i} completions held", c["completions"], held)
    check(f"CQ {i} has_channel", c["has_channel"], chan)
    check(f"CQ {i} armed", c["armed"], armed)
    check(f"CQ {i} overflowed", c["overflowed"], False)
    check(f"CQ {i} qps", c["qps"], qps)

mrs = dev["mrs"]
check("MRs", len(mrs), 2)
for i, (lkey, rkey, addr, length, access) in enumerate(expect["mrs"]):
    m = mrs[i]
    check(f"MR {i} lkey", m["lkey"], lkey)
    check(f"MR {i} rkey", m["rkey"], rkey)
    check(f"MR {i} addr", int(m["addr"]), addr)
    check(f"MR {i} iova", int(m["iova"]), addr)
    check(f"MR {i} length", int(m["length"]), length)
    check(f"MR {i} access", m["access"], access)
    check(f"MR {i} pd", m["pd"], expect["pd"])

srqs = dev["srqs"]
check("SRQs", len(srqs), 1)
s = srqs[0]
check("SRQ number", s["srq_num"], expect["srq"][0])
check("SRQ max_wr", s["max_wr"], expect["srq"][1])
check("SRQ posted", s["posted"], 5)
check("SRQ limit", s["limit"], 2)
check("SRQ qps", s["qps"], 1)
check("SRQ xrc", s["xrc"], False)
check("SRQ pd", s["pd"], expect["pd"])

check("multicast groups", [(g["group"], g["qpns"]) for g in dev["mcast"]], [("239.1.2.3", [expect["qps"]["u"]])])

qps = {q["qpn"]: q for q in dev["qps"]}
check("QPs", sorted(qps), sorted(expect["qps"].values()))
n = {k: qps[v] for k, v in expect["qps"].items()}
a, b, c, u = n["a"], n["b"], n["c"], n["u"]
for name, q, want in [
    ("a", a, dict(type="RC", state="RTS", connected=True, peer=expect["address"], dest_qpn=b["qpn"],
                  sq_psn=0x107, unacked_psn=0x107, epsn=0x200, rq_posted=3, srq=0,
                  send_cq=cqn[0], recv_cq=cqn[1])),
    ("b", b, dict(type="RC", state="RTS", connected=True, peer=expect["address"], dest_qpn=a["qpn"],
                  sq_psn=0x200, unacked_psn=0x200, epsn=0x107, rq_posted=2, srq=0,
                  send_cq=cqn[0], recv_cq=cqn[1])),
    ("c", c, dict(type="RC", state="INIT", connected=False, peer="", dest_qpn=0, rq_posted=0,
                  srq=expect["srq"][0], send_cq=cqn[0], recv_cq=cqn[1])),
    ("u", u, dict(type="UD", state="RTS", connected=False, peer="", sq_psn=0x300, rq_posted=0, srq=0,
                  send_cq=cqn[2], recv_cq=cqn[2])),
]:
    for k, v in want.items():
        check(f"QP {name} {k}", q[k], v)
    check(f"QP {name} pd", q["pd"], expect["pd"])
    check(f"QP {name} sq_outstanding", q["sq_outstanding"], 0)
    check(f"QP {name} max_send_wr >= 16", q["max_send_wr"] >= 16, True)
for name, q in (("a", a), ("b", b)):
    for k, v in dict(path_mtu=1024, retry_cnt=6, rnr_retry=5, retry_left=6, rnr_retry_left=5, timeout=14).items():
        check(f"QP {name} {k}", q[k], v)

# Counters: a sent 4 SENDs + 3 WRITE packets and no retransmission, b got
# them all and answered with ACKs, which a received.
ca, cb, cc, cu, cd = counters(a), counters(b), counters(c), counters(u), counters(dev)
check("a sent_pkts", ca["sent_pkts"], 7)
check("a rdma_sends", ca["rdma_sends"], 4)
check("b rcvd_pkts", cb["rcvd_pkts"], 7)
check("b rdma_recvs", cb["rdma_recvs"], 4)
check("a rcvd_pkts (b's ACKs)", ca["rcvd_pkts"], cb["sent_pkts"])
check("b sent at least one ACK", cb["sent_pkts"] >= 1, True)
clean = {"sent_pkts", "rcvd_pkts", "rdma_sends", "rdma_recvs", "ack_deferred", "icrc_ip_recovered"}
for name, cs in (("a", ca), ("b", cb), ("c", cc), ("u", cu)):
    check(f"QP {name}: error and drop counters", {k: v for k, v in cs.items() if v and k not in clean}, {})
check("c and u counted nothing", sum(cc.values()) + sum(cu.values()), 0)
for k in ("sent_pkts", "rcvd_pkts", "rdma_sends", "rdma_recvs"):
    check(f"device {k} = its QPs'", cd[k], ca[k] + cb[k] + cc[k] + cu[k])
line = next((l for l in open(err) if re.match(r"rocelab: \S+ counters:", l)), "")
at_close = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in line.split("counters:")[1].split()) if line else {}
check("device counters = rocelab run --counters at close", {k: v for k, v in cd.items() if v}, at_close)

# stat qp N --json: that QP alone, as in the full answer.
one = json.load(open(qp_json))
got = [q for p in one["processes"] for d in p["devices"] for q in d["qps"]]
check("stat qp: QPs", [q["qpn"] for q in got], [a["qpn"]])
check("stat qp: the QP", got[0] if got else None, a)

# The table: a row for the device and one per QP.
txt = open(stat_txt).read()
check("table: device row", bool(re.search(rf"^{proc['pid']}\s+shim_stat_objec\s+{dev['name']}\s+{re.escape(dev['address'])}\s+4\s+3\s+2\s+1\s+1\s", txt, re.M)), True)
for name, q in n.items():
    check(f"table: row of QP {name}", bool(re.search(rf"^{proc['pid']}\s+{dev['name']}\s+0x{q['qpn']:06x}\s+{q['type']}\s+{q['state']}\s", txt, re.M)), True)

sys.exit(1 if failures else 0)
