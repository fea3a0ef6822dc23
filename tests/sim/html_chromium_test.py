#!/usr/bin/env python3
"""The step-through page of `rocelab sim --html`, opened in a real browser
(headless Chromium): at given steps (#step=N in the URL) the page shows the QP
states and the packet headers that the engine's own event log (`--events`,
read back with `rocelab events --json`) says hold at that point. On a switched
network (lab 11) the page also holds the network's charts, a line for every
series `--json` gives, and their cursor stands at the current step's time.

Usage: html_chromium_test.py ROCELAB LABS_DIR
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

rocelab, labs = sys.argv[1], sys.argv[2]
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


browser = shutil.which("chromium") or shutil.which("chromium-browser")
if not browser:
    print("FAIL: no chromium (Debian package chromium; make test installs it)")
    sys.exit(1)

tmp = tempfile.mkdtemp()


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"const DATA = (.*?);</script>", text, re.S)
    if not m:
        fail(f"{path}: no DATA in the page")
        return None
    return json.loads(m.group(1))


def dom_at(path, step):
    """The DOM after the page's script ran, opened at #step=step."""
    out = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + tmp + "/profile",
         "--dump-dom", f"file://{path}#step={step}"],
        capture_output=True, text=True, timeout=60)
    return out.stdout


def cell(dom, ident):
    m = re.search(r'id="' + re.escape(ident) + r'"[^>]*>([^<]*)<', dom)
    return html.unescape(m.group(1)) if m else None


def check_lab(name, checks_per_kind=3):
    lab = os.path.join(labs, name + ".textproto")
    page = os.path.join(tmp, name + ".html")
    events = os.path.join(tmp, name + ".ev")
    r = subprocess.run([rocelab, "sim", "-q", lab, "--html", page, "--events", events], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{name}: rocelab sim exited {r.returncode}: {r.stdout}{r.stderr}")
        return
    log = [json.loads(l) for l in subprocess.run([rocelab, "events", "--json", events], capture_output=True,
                                                 text=True, check=True).stdout.splitlines()]
    data = page_data(page)
    if data is None:
        return
    steps = data["steps"]
    # QP names by (node, qpn), from the page's "a: RC QP, qpn 0x000011" lines.
    names = {}
    for s in steps:
        m = re.match(r"(\S+) \S+: (\S+): \S+ QP, qpn 0x([0-9a-f]+)", s["text"])
        if m:
            names[(m.group(1), int(m.group(3), 16))] = m.group(2)
    # Every QP state change of the event log is a step of the page, in order.
    changes = [e for e in log if e["kind"] == "QP_STATE_CHANGE"]
    change_steps = [i + 1 for i, s in enumerate(steps) if " → " in s["text"] and not s["text"].count(": ") < 2
                    and re.search(r": \S+: [A-Z]+ → [A-Z]+$", s["text"])]
    if len(changes) != len(change_steps):
        fail(f"{name}: the event log has {len(changes)} QP state changes, the page {len(change_steps)}")
        return
    picks = sorted(set([0, len(changes) - 1] + list(range(0, len(changes), max(1, len(changes) // checks_per_kind)))))
    for k in picks:
        ev, step = changes[k], change_steps[k]
        qp = names.get((ev["device"], ev["qpn"]))
        if qp is None:
            fail(f"{name}: no QP named for {ev['device']} qpn {ev['qpn']}")
            continue
        dom = dom_at(page, step)
        if cell(dom, "step") != str(step):
            fail(f"{name}: opened #step={step}, the page shows step {cell(dom, 'step')}")
        got = cell(dom, f"qp-{qp}-state")
        if got != ev["to_state"]:
            fail(f"{name}: step {step}: the page shows {qp} in {got}, the event log says {ev['to_state']}")
    # Every packet sent is a step whose headers carry the PSN the event log names.
    sent = [e for e in log if e["kind"] == "PACKET_SENT"]
    packet_steps = [i + 1 for i, s in enumerate(steps) if s["headers"]]
    if len(sent) != len(packet_steps):
        fail(f"{name}: the event log sent {len(sent)} packets, the page has {len(packet_steps)} packet steps")
        return
    for ev, step in zip(sent, packet_steps):
        if f" psn {ev.get('psn', 0)}\n" not in steps[step - 1]["headers"]:
            fail(f"{name}: step {step}: headers {steps[step - 1]['headers']!r} lack psn {ev.get('psn', 0)}")
    for k in (0, len(sent) // 2, len(sent) - 1):
        step = packet_steps[k]
        dom = dom_at(page, step)
        headers = html.unescape(re.search(r'<pre id="headers">(.*?)</pre>', dom, re.S).group(1))
        want = f"psn {sent[k].get('psn', 0)}"
        if want not in headers or sent[k]["opcode_name"] not in headers:
            fail(f"{name}: step {step}: the browser shows headers {headers!r}, want {sent[k]['opcode_name']} {want}")
        if f'<mark id="current">' not in dom:
            fail(f"{name}: step {step}: no current row marked")
    print(f"{name}: {len(picks)} state checks and 3 header checks in Chromium agree with the event log")


def check_fabric_page(name):
    lab = os.path.join(labs, name + ".textproto")
    page = os.path.join(tmp, name + ".html")
    r = subprocess.run([rocelab, "sim", lab, "--json", "--html", page], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{name}: rocelab sim exited {r.returncode}: {r.stdout}{r.stderr}")
        return
    objs = [json.loads(l) for l in r.stdout.splitlines()]
    series = [o for o in objs if o["type"] == "series"][0]
    ports = {o["port"]: o for o in objs if o["type"] == "port"}
    want = {"plot-rate": len(series["flows"]),
            "plot-queue": sum(1 for p in series["ports"] if max(p["queue_bytes"]) > 0),
            "plot-pause": sum(1 for p in series["ports"] if ports[p["port"]]["pauses_received"] > 0),
            "plot-cnp": len(series["hosts"]),
            "plot-ecn": sum(1 for f in series["flows"] if sum(f["ce_marked"]) > 0)}
    data = page_data(page)
    if data is None:
        return
    steps = data["steps"]
    # The ladder is the one QP pair the lab draws: two lanes.
    if "sink 10.0.0.1" not in data["header"] or "s0 10.0.0.2" not in data["header"] or "s1 " in data["header"]:
        fail(f"{name}: the ladder's lanes are {data['header']!r}, want sink and s0")
    packet_steps = [i + 1 for i, s in enumerate(steps) if s["headers"]]
    picks = [1, packet_steps[len(packet_steps) // 2], len(steps)]
    xs = []
    for step in picks:
        dom = dom_at(page, step)
        if cell(dom, "step") != str(step):
            fail(f"{name}: opened #step={step}, the page shows step {cell(dom, 'step')}")
        for fig, n in want.items():
            m = re.search(r'<figure id="' + fig + r'">(.*?)</figure>', dom, re.S)
            if not m:
                fail(f"{name}: step {step}: no figure {fig} in the page")
                continue
            body = m.group(1)
            got = body.count("<polyline")
            if got != n:
                fail(f"{name}: step {step}: {fig} draws {got} lines, --json has {n} series")
            svg = re.search(r"<svg[^>]*>", body).group(0)
            attr = {k: float(v) for k, v in re.findall(r'data-(x0|x1|t0|t1)="([0-9.e+-]+)"', svg)}
            cur = re.search(r'<line class="cursor"[^>]*>', body)
            if not cur or len(attr) != 4:
                fail(f"{name}: step {step}: {fig} has no cursor or no data-x0/x1/t0/t1")
                continue
            cx = float(re.search(r' x1="([0-9.]+)"', cur.group(0)).group(1))
            if 'visibility="visible"' not in cur.group(0):
                fail(f"{name}: step {step}: {fig}'s cursor is hidden")
            t = float(steps[step - 1]["time"])
            f = min(max((t - attr["t0"]) / (attr["t1"] - attr["t0"]), 0), 1)
            want_x = attr["x0"] + (attr["x1"] - attr["x0"]) * f
            if abs(cx - want_x) > 0.11:
                fail(f"{name}: step {step} at {t} us: {fig}'s cursor at x {cx}, want {want_x:.1f}")
            if fig == "plot-queue":
                xs.append(cx)
        if "tor-&gt;sink" not in (re.search(r'<pre id="extras-text">(.*?)</pre>', dom, re.S) or [None, ""])[1]:
            fail(f"{name}: step {step}: the network's totals are not on the page")
    if not xs == sorted(xs) or xs[0] == xs[-1]:
        fail(f"{name}: the cursor does not move along with time: {xs}")
    print(f"{name}: {len(picks)} steps in Chromium: {len(want)} charts, their lines and cursors agree with --json")


check_lab("03-lost-packet-go-back-n")
check_lab("06-retry-exhausted")
check_fabric_page("11-incast")
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failures else 0)
