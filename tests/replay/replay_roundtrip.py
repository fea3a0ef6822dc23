#!/usr/bin/env python3
"""`rocelab replay` round trips: a `rocelab loopback` run on the simulated
fabric is captured (at the senders, --pcap-at tx, or where the receivers see
the packets, --pcap-at rx), with and without seeded faults, and its requester
side is replayed against a fresh live responder. Judged:
  * exit 0 and zero behavioural differences in every run;
  * a run without faults has no difference of any class, and the live
    responder answered as many times as the capture's;
  * what was sent: every request of the capture (none skipped), and the live
    responder answered (RC);
  * --pcap records the live exchange: tshark decodes every packet as
    InfiniBand, requests and answers, the first PSN 0; and replaying that
    recording gives no difference of any class (replay is its own fixed
    point), its READ data compared where it reads what its WRITEs wrote;
  * --as-fast-as-possible gives the same differences as the original timing,
    and --speed 4 takes a quarter of its virtual time;
  * --to-scenario writes a scenario that `rocelab sim` runs to the end, and
    the requests it sends are the capture's, each PSN once, in PSN order,
    opcode by opcode (retransmissions are not work requests); UC: a message
    the capture holds only part of is left out.

  * the captures of the labs (docs/labs, `rocelab sim --pcap`: go-back-N, lost
    ACKs, RNR, retries exhausted, PSN wrap, UC, atomics), every connection:
    zero behavioural differences; the RNR lab's RNR NAKs are policy.

Usage: replay_roundtrip.py ROCELAB [LABS_DIR]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

rocelab = sys.argv[1]
tmp = tempfile.mkdtemp()
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def replay(pcap, extra=()):
    r = subprocess.run([rocelab, "replay", "--json", "--max-differences", "0", *extra, pcap],
                       capture_output=True, text=True)
    objs = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    res = [o for o in objs if o["type"] == "result"]
    return r.returncode, [o for o in objs if o["type"] == "difference"], res[0] if res else None, r.stderr


def first_transmissions(pcap):
    """The requests of a capture, each PSN once, in PSN order: (opcode name, PSN offset from the first)."""
    out = subprocess.run([rocelab, "decode", pcap], capture_output=True, text=True).stdout
    seen, seq, first = set(), [], None
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or f[3] != "->" or " QP=" not in line or "PSN=" not in line:
            continue
        name = line[line.index(f[5]):line.index(" QP=")]
        if "Acknowledge" in name or "response" in name:
            continue
        psn = int(line.split("PSN=")[1].split()[0])
        first = psn if first is None else first
        rel = (psn - first) % (1 << 24)
        if rel in seen:
            continue
        seen.add(rel)
        n = 1
        if "READ Request" in name:  # one PSN per response (MTU 1024): a resumed READ lies inside them
            n = max(1, (int(line.split("RETH[")[1].split("len=")[1].split("]")[0]) + 1023) // 1024)
        seq.append((name, rel, n))
    out, covered = [], -1
    for name, rel, n in sorted(seq, key=lambda x: x[1]):
        if rel <= covered:
            continue
        covered = rel + n - 1
        out.append((name, rel))
    return out


def scenario_case(name, pcap, uc=False):
    sc, simcap = os.path.join(tmp, name + ".textproto"), os.path.join(tmp, name + "-sim.pcap")
    r = subprocess.run([rocelab, "replay", "--to-scenario", sc, pcap], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{name}: --to-scenario exited {r.returncode}: {r.stderr}")
        return
    r = subprocess.run([rocelab, "sim", "-q", "--pcap", simcap, sc], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{name}: rocelab sim of the scenario exited {r.returncode}: {r.stdout[-300:]}{r.stderr[-300:]}")
        return
    want, got = first_transmissions(pcap), first_transmissions(simcap)
    if uc:  # messages cut by a loss are left out: fewer, never more
        if not (0.8 * len(want) <= len(got) <= len(want)):
            fail(f"{name}: the scenario sends {len(got)} requests, the capture has {len(want)}")
        else:
            print(f"ok {name} --to-scenario: {len(got)} of the capture's {len(want)} requests (whole messages)")
    elif want != got:
        i = next((k for k in range(min(len(want), len(got))) if want[k] != got[k]), min(len(want), len(got)))
        fail(f"{name}: the scenario sends {len(got)} requests, the capture's first transmissions are {len(want)}; "
             f"first difference at {i}: {want[i:i+2]} vs {got[i:i+2]}")
    else:
        print(f"ok {name} --to-scenario: {len(got)} requests, the capture's, in PSN order")


def case(name, args, at, clean=False):
    pcap = os.path.join(tmp, name + ".pcap")
    lo = subprocess.run([rocelab, "loopback", "--transport", "sim", "--pcap", pcap, "--pcap-at", at] + args,
                        capture_output=True, text=True)
    if lo.returncode != 0:
        fail(f"{name}: loopback exited {lo.returncode}: {lo.stdout[-300:]}{lo.stderr[-300:]}")
        return
    rc, diffs, res, err = replay(pcap)
    if res is None:
        fail(f"{name}: no result (exit {rc}): {err}")
        return
    beh = [d for d in diffs if d["class"] == "behaviour"]
    if rc != 0 or beh or res["behaviour"] != 0:
        fail(f"{name}: exit {rc}, {res['behaviour']} behavioural differences: "
             + "; ".join(f"PSN+{d['psn']} {d['kind']}: capture {d['capture']} | live {d['live']}" for d in beh[:5]))
    if res["requests"] == 0 or res["requests_skipped"] != 0:
        fail(f"{name}: {res['requests']} requests sent, {res['requests_skipped']} skipped")
    rc_qp = "--qp-type" not in args or args[args.index("--qp-type") + 1] == "rc"
    if rc_qp and res["live_responses"] == 0:
        fail(f"{name}: the live responder never answered")
    if clean:
        if diffs or res["policy"] or res["network"]:
            fail(f"{name}: a run without faults has differences: {diffs[:3]}")
        if res["live_responses"] != res["captured_responses"]:
            fail(f"{name}: {res['captured_responses']} responses captured, {res['live_responses']} live")
    rc2, diffs2, res2, _ = replay(pcap, ["--as-fast-as-possible"])
    if rc2 != rc or res2 is None or (res2["behaviour"], res2["policy"], res2["network"]) != (
            res["behaviour"], res["policy"], res["network"]):
        fail(f"{name}: --as-fast-as-possible differs: exit {rc2}, {res2 and (res2['behaviour'], res2['policy'], res2['network'])}"
             f" against {(res['behaviour'], res['policy'], res['network'])}")
    if clean and shutil.which("tshark"):  # --pcap, read by tshark
        live = os.path.join(tmp, name + "-live.pcap")
        replay(pcap, ["--pcap", live])
        def tshark(*a):
            return subprocess.run(["tshark", "-r", live, *a], capture_output=True, text=True).stdout.split()
        total, undecoded = len(tshark("-T", "fields", "-e", "frame.number")), len(
            tshark("-Y", "udp.dstport == 4791 && !infiniband", "-T", "fields", "-e", "frame.number"))
        psns = tshark("-T", "fields", "-e", "infiniband.bth.psn")
        if total != res["requests"] + res["live_responses"] or undecoded or not psns or psns[0] != "0":
            fail(f"{name}: --pcap: tshark reads {total} packets ({undecoded} not InfiniBand, first PSN "
                 f"{psns[:1]}), replay sent {res['requests']} and got {res['live_responses']}")
    live2 = os.path.join(tmp, name + "-live2.pcap")
    replay(pcap, ["--pcap", live2])
    rc3, diffs3, res3, err3 = replay(live2)
    if rc3 != 0 or res3 is None or diffs3 or res3["policy"] or res3["network"] or res3["behaviour"]:
        fail(f"{name}: replaying the replay's own recording: exit {rc3}, {diffs3[:3]} {err3}")
    if clean:  # --speed divides the capture's gaps: the virtual time they take
        _, _, fast, _ = replay(pcap, ["--speed", "4"])
        if fast is None or abs(fast["virtual_time_ns"] * 4 - res["virtual_time_ns"]) > 4000:
            fail(f"{name}: --speed 4 took {fast and fast['virtual_time_ns']} ns of virtual time, "
                 f"--speed 1 {res['virtual_time_ns']} ns")
    scenario_case(name, pcap, uc=not rc_qp)
    print(f"ok {name}: {res['requests']} requests, {res['captured_responses']} responses captured, "
          f"{res['live_responses']} live; differences: {res['policy']} policy, {res['network']} network")


rc_all = ["--qp-type", "rc", "--op", "all", "--count", "60", "--retry-forever"]
for at in ("tx", "rx"):
    case(f"clean-{at}", rc_all, at, clean=True)
    case(f"clean-big-{at}", ["--qp-type", "rc", "--op", "all", "--size", "10000", "--count", "20"], at, clean=True)
    case(f"loss-{at}", rc_all + ["--loss", "0.05", "--seed", "3"], at)
    case(f"heavy-loss-{at}", rc_all + ["--loss", "0.2", "--seed", "7"], at)
    case(f"duplicate-{at}", rc_all + ["--duplicate", "0.05", "--seed", "2"], at)
    case(f"reorder-{at}", rc_all + ["--reorder", "0.05", "--seed", "4"], at)
    case(f"uc-loss-{at}", ["--qp-type", "uc", "--op", "all", "--size", "4096", "--count", "50", "--loss", "0.05",
                           "--seed", "3"], at)
labs = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "docs", "labs")
for lab in sorted(f for f in os.listdir(labs) if f.endswith(".textproto")):
    pcap = os.path.join(tmp, lab + ".pcap")
    subprocess.run([rocelab, "sim", "-q", "--pcap", pcap, os.path.join(labs, lab)], capture_output=True)
    if not os.path.exists(pcap):
        fail(f"{lab}: rocelab sim wrote no capture")
        continue
    probe = subprocess.run([rocelab, "replay", pcap], capture_output=True, text=True)
    picks = [[]]
    if probe.returncode == 2 and "several connections" in probe.stderr:
        # A listed selector is "--qp N", or "--qp N --from ADDR" where QPs of
        # several senders share a number.
        picks = []
        for f in (x.split() for x in probe.stderr.splitlines() if x.strip().startswith("--qp ")):
            picks.append(f[0:4] if len(f) >= 4 and f[2] == "--from" else f[0:2])
    kinds = set()
    for pick in picks:
        rc, diffs, res, err = replay(pcap, pick)
        if rc != 0 or res is None or res["behaviour"] != 0:
            fail(f"{lab} {' '.join(pick)}: exit {rc}: {err} "
                 + "; ".join(f"{d['kind']}: capture {d['capture']} | live {d['live']}" for d in diffs
                             if d["class"] == "behaviour")[:500])
        kinds |= {(d["class"], d["kind"]) for d in diffs}
    if lab.startswith("05-") and ("policy", "rnr_nak") not in kinds:
        fail(f"{lab}: the RNR NAKs are not reported as policy: {kinds}")
    print(f"ok lab {lab}: {len(picks)} connection(s), differences {sorted(kinds)}")
sys.exit(1 if failures else 0)
