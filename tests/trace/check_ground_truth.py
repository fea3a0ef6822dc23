#!/usr/bin/env python3
"""`rocelab check` against the fault injector's own record.

`rocelab loopback` runs RC traffic on the simulated fabric with seeded faults,
writes its capture (--pcap, at the senders: --pcap-at tx, or where the
receivers see the packets: --pcap-at rx) and what the injectors did
(--fault-log). Then:
  * nothing is wrong (exit 0) in any run, and a run without faults has no
    finding at all;
  * every retransmission `check` reports has a cause the injector explains: a
    NAK names a request PSN that was dropped, a timeout follows a dropped
    request or response; nothing is called spurious;
  * none missed: at the senders every dropped request is reported sent again;
    where the receivers are, every gap starts at a dropped PSN and every
    duplicate the network made (and only those) is reported as one.

Usage: check_ground_truth.py ROCELAB
"""
import json
import re
import subprocess
import sys
import tempfile
import os

rocelab = sys.argv[1]
tmp = tempfile.mkdtemp()
failures = []
M24 = 1 << 24


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def is_response(opcode):
    return 0x0D <= opcode <= 0x12  # RC READ responses, Acknowledge, ATOMIC Acknowledge


def ahead(a, b):
    """a - b modulo 2^24, as a small non-negative number when a is at or after b."""
    return (a - b) % M24


def run(name, args, at):
    pcap, flog = os.path.join(tmp, name + ".pcap"), os.path.join(tmp, name + ".faults")
    r = subprocess.run([rocelab, "loopback", "--transport", "sim", "--qp-type", "rc", "--pcap", pcap,
                        "--pcap-at", at, "--fault-log", flog] + args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{name}: loopback exited {r.returncode}: {r.stdout[-300:]}{r.stderr[-300:]}")
        return None
    faults = []
    for line in open(flog):
        t, dev, d, acts, op, psn, qpn = line.split()
        faults.append({"dev": dev, "acts": acts.split(","), "op": int(op, 16), "psn": int(psn)})
    c = subprocess.run([rocelab, "check", "--json", "--max-findings", "0", pcap], capture_output=True, text=True)
    objs = [json.loads(l) for l in c.stdout.splitlines()]
    if c.returncode != 0:
        errs = [o["rule"] + ": " + o["text"] for o in objs if o.get("severity") == "error"]
        fail(f"{name}: check exited {c.returncode}: {errs[:5]} {c.stderr}")
    return faults, [o for o in objs if o["type"] == "finding"]


def psn_of(text):
    return int(re.search(r"PSN (\d+)", text).group(1))


def judge(name, args, at, strict=True):
    # strict=False (reordering): a late original and its retransmission are the
    # same bytes, so which copy is which cannot be told; only exit 0, the gaps
    # and the overtaken PSNs are judged.
    got = run(name, args, at)
    if got is None:
        return
    faults, findings = got
    drop_req = {f["psn"] for f in faults if "drop" in f["acts"] and not is_response(f["op"])}
    drop_resp = {f["psn"] for f in faults if "drop" in f["acts"] and is_response(f["op"])}
    dup_req = {f["psn"] for f in faults if "dup" in f["acts"] and not is_response(f["op"])}
    dup_resp = {f["psn"] for f in faults if "dup" in f["acts"] and is_response(f["op"])}
    held = {f["psn"] for f in faults if "reorder" in f["acts"] or "delay" in f["acts"]}
    rules = {}
    for f in findings:
        rules.setdefault(f["rule"], []).append(f)
    if not faults and findings:
        fail(f"{name}: no faults, yet {len(findings)} findings: {findings[0]['text']}")
    retx = rules.get("psn.retransmission", [])
    for f in (retx if strict else []):
        p, text = psn_of(f["text"]), f["text"]
        m = re.search(r"NAK #\d+ \(it named PSN (\d+)\)", text)
        if "spurious" in text:
            # At the senders the capture holds an ACK the injector then dropped:
            # check cannot know it never arrived, and says so.
            # Where the receivers are, a retransmission the injector held back
            # arrives after the ACK it crossed.
            ack = int(re.search(r"ACK PSN (\d+)", text).group(1))
            if not (at == "tx" and any(ahead(ack, d) <= ahead(ack, p) for d in drop_resp)) and p not in held:
                fail(f"{name}: a spurious retransmission where every loss was injected: {text}")
        elif m:
            # The PSN the NAK names was dropped, or held back, or it overtook
            # one that was held back (the responder discards what comes early).
            q = int(m.group(1))
            if not any(ahead(q, d) < 64 for d in drop_req | held):
                fail(f"{name}: the NAK named PSN {q}, which the injector did not drop or hold back: {text}")
        elif "timeout" in text:
            if not any(ahead(d, p) < 1024 for d in drop_req | drop_resp):
                fail(f"{name}: a timeout with no dropped request or response at or after PSN {p}: {text}")
        elif "to resume the READ" in text:
            if p not in drop_resp:
                fail(f"{name}: a READ resumed at PSN {p}, but the injector did not drop that response: {text}")
        elif "not in this capture" in text:
            if at == "tx":
                fail(f"{name}: at the sender every transmission is in the capture: {text}")
        else:
            fail(f"{name}: a retransmission with an unknown cause: {text}")
    if at == "tx":
        sent_again = {psn_of(f["text"]) for f in retx}
        for p in sorted(drop_req):
            if p not in sent_again:
                fail(f"{name}: the injector dropped request PSN {p}; check reports no retransmission of it")
        if rules.get("psn.gap") or rules.get("psn.network_duplicate"):
            fail(f"{name}: at the sender there are no gaps or network copies to see")
    else:
        for f in rules.get("psn.gap", []):
            m = re.search(r"expected PSN (\d+)", f["text"])
            e = int(m.group(1))
            if e not in drop_req | drop_resp | held:
                fail(f"{name}: a gap from PSN {e}, which the injector did not drop or hold back: {f['text']}")
        for f in rules.get("psn.out_of_order", []):
            if psn_of(f["text"]) not in held:
                fail(f"{name}: PSN {psn_of(f['text'])} reported overtaken, the injector did not hold it back")
        seen_dups = {psn_of(f["text"]) for f in rules.get("psn.network_duplicate", [])}
        if strict and seen_dups - dup_req - dup_resp:
            fail(f"{name}: network copies reported that the injector did not make: {sorted(seen_dups - dup_req - dup_resp)}")
        if dup_req - seen_dups:
            fail(f"{name}: the injector duplicated request PSNs {sorted(dup_req - seen_dups)}; check did not see it")
    print(f"{name} ({at}): {len(faults)} faults injected; check: {len(retx)} retransmissions, "
          f"{len(rules.get('psn.gap', []))} gaps, {len(rules.get('psn.network_duplicate', []))} network copies, "
          "every one explained by the injector's record")


base = ["--op", "all", "--count", "40", "--size", "4096", "--retry-forever"]
judge("clean", base, "rx")
judge("clean", base, "tx")
for seed in (3, 11):
    for at in ("rx", "tx"):
        judge(f"loss-dup-{seed}", base + ["--loss", "0.04", "--duplicate", "0.03", "--seed", str(seed)], at)
judge("reorder", base + ["--reorder", "0.05", "--seed", "5"], "rx", strict=False)
for at in ("rx", "tx"):
    judge("ack-drops", ["--op", "write", "--count", "60", "--size", "2048", "--retry-forever",
                        "--drop-schedule", "drop:class=ack:every=4"], at)
    judge("scheduled", ["--op", "all", "--count", "20", "--size", "3000", "--retry-forever",
                        "--drop-schedule", "drop:class=request:every=9;drop:class=read:dir=tx:every=5"], at)
sys.exit(1 if failures else 0)
