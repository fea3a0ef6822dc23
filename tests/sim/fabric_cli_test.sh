#!/bin/bash
# `rocelab sim` on a switched network, as a user runs it: the incast lab's
# --json (the series add up to the ports' and flows' totals, the CE marks to
# the switch's marks and to the sink's counter, PFC's pause time to the
# ports'), its --plots (well-formed SVG, parsed: one chart per series kind,
# axes with units, a line per series of the JSON, each point inside its
# chart), the text table after the ladder, and exit 2 with file:line for a
# bad topology or --plots without one.
# Usage: fabric_cli_test.sh ROCELAB LABS_DIR
set -u
rocelab=$1
labs=$2
lab=$labs/11-incast.textproto
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$rocelab" sim "$lab" --json --plots "$dir/plots.svg" > "$dir/run.json"
rc=$?
[ $rc = 0 ] || fail "the incast lab with --json exited $rc"

python3 - "$dir/run.json" "$dir/plots.svg" <<'PY' || fail "the JSON or the plots"
import json, sys, xml.dom.minidom as minidom
objs = [json.loads(l) for l in open(sys.argv[1])]
bad = []
def check(what, got, want):
    if got != want:
        bad.append(f"{what}: {got!r}, want {want!r}")
kinds = [o["type"] for o in objs]
check("the last line", kinds[-1], "result")
res = objs[-1]
check("failures", res["failures"], [])
ports = {o["port"]: o for o in objs if o["type"] == "port"}
flows = [o for o in objs if o["type"] == "flow"]
hosts = {o["node"]: o for o in objs if o["type"] == "host"}
net = [o for o in objs if o["type"] == "network"][0]
series = [o for o in objs if o["type"] == "series"][0]
check("ports (an incast_star of 4: 5 links, 2 directions)", len(ports), 10)
check("network ports", net["ports"], 10)
n = len(series["t_ns"])
check("sample times", series["t_ns"], [series["interval_ns"] * (k + 1) for k in range(n)])
bn = ports["tor->sink"]
if not bn["ecn_marked"] > 0: bad.append("no ECN mark at the bottleneck")
if not bn["max_queue_bytes"] > 10240: bad.append(f"the bottleneck queue stayed at {bn['max_queue_bytes']}")
check("drops", net["dropped"], 0)
check("marks: the network's total", net["ecn_marked"], bn["ecn_marked"])
check("marks: the flows' CE totals", sum(f["ce_marked"] for f in flows), bn["ecn_marked"])
check("marks: the flows' CE series", sum(sum(f["ce_marked"]) for f in series["flows"]), bn["ecn_marked"])
check("marks: the sink's counter", hosts["sink"]["counters"]["np_ecn_marked_roce_packets"], bn["ecn_marked"])
by_flow = {(f["src"], f["dst"], f["sport"]): f for f in flows}
for f in series["flows"]:
    tot = by_flow[(f["src"], f["dst"], f["sport"])]
    check(f"{f['src']}->{f['dst']} bytes series", sum(f["bytes"]), tot["bytes_delivered"])
    check(f"{f['src']}->{f['dst']} samples", len(f["bytes"]), n)
    check(f"{f['src']}->{f['dst']} rate", f["rate_bps"], [b * 8 * 10**9 // series["interval_ns"] for b in f["bytes"]])
for s in range(4):
    f = by_flow[(f"s{s}", "sink", [k for k in by_flow if k[0] == f"s{s}"][0][2])]
    check(f"s{s}'s packets", (f["packets_sent"], f["packets_delivered"], f["lost"], f["qp"]), (128, 128, 0, f"a{s}"))
paused = {p["port"]: p for p in series["ports"]}
for s in range(4):
    p = ports[f"s{s}->tor"]
    if not p["pauses_received"] > 0: bad.append(f"s{s}->tor was never paused")
    check(f"s{s}->tor pause series", sum(paused[f"s{s}->tor"]["paused_ns"]), p["paused_ns"])
check("pauses", net["pauses_received"], sum(p["pauses_received"] for p in ports.values()))

# The plots: five charts stacked in one SVG document.
doc = minidom.parse(sys.argv[2])
root = doc.documentElement
charts = [c for c in root.childNodes if c.nodeType == c.ELEMENT_NODE and c.tagName == "svg"]
check("charts", len(charts), 5)
def texts(c, cls):
    return [t.firstChild.data if t.firstChild else "" for t in c.getElementsByTagName("text") if t.getAttribute("class") == cls]
titles = [texts(c, "title")[0] for c in charts]
check("titles", titles, ["Delivered rate per flow", "Queue depth per egress port", "Time paused by PFC per egress port",
                         "CNPs received per host", "ECN-marked packets delivered per flow"])
units = [(texts(c, "xlabel")[0], texts(c, "ylabel")[0]) for c in charts]
for title, (x, y) in zip(titles, units):
    check(f"{title}: x axis", x, "time (µs)")
    if "(" not in y and "per" not in y: bad.append(f"{title}: y axis {y!r} says no unit")
lines = [len(c.getElementsByTagName("polyline")) for c in charts]
want = [len(series["flows"]),
        sum(1 for p in series["ports"] if max(p["queue_bytes"]) > 0),
        sum(1 for p in series["ports"] if ports[p["port"]]["pauses_received"] > 0),
        len(series["hosts"]),
        sum(1 for f in series["flows"] if sum(f["ce_marked"]) > 0)]
check("lines per chart", lines, want)
check("the CNP chart says it is empty", texts(charts[3], "empty"), ["no CNP in this run"])
for c, title in zip(charts, titles):
    w, h = float(c.getAttribute("width")), float(c.getAttribute("height"))
    for yt in texts(c, "ytick") + texts(c, "xtick"):
        float(yt)  # every tick label is a number
    for pl in c.getElementsByTagName("polyline"):
        pts = [tuple(map(float, p.split(","))) for p in pl.getAttribute("points").split()]
        check(f"{title}: {pl.getAttribute('data-name')} points", len(pts), n)
        if not all(0 <= x <= w and 0 <= y <= h for x, y in pts): bad.append(f"{title}: a point outside the chart")
# The bottleneck's line reaches higher than any other port's on the queue chart (lower y is higher).
q = {pl.getAttribute("data-name"): min(float(p.split(",")[1]) for p in pl.getAttribute("points").split())
     for pl in charts[1].getElementsByTagName("polyline")}
if "tor->sink" not in q: bad.append("no tor->sink line on the queue chart")
for line in bad:
    print("FAIL:", line)
sys.exit(1 if bad else 0)
PY

# The text after the ladder: the bottleneck's row with its marks.
"$rocelab" sim "$lab" > "$dir/text.txt" || fail "the incast lab exited $?"
marks=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"tor->sink\"" in l][0]["ecn_marked"])' "$dir/run.json")
grep -Eq "^tor->sink +512 +532544 +$marks +0 " "$dir/text.txt" || fail "no tor->sink row with $marks marks: $(grep -A3 '^port' "$dir/text.txt")"
grep -q '^network: incast_star, 5 nodes, 1 switch, sampled every 10 us$' "$dir/text.txt" || fail "no network heading"

# A scenario without a topology: --json is the result alone, --plots an error.
out=$("$rocelab" sim "$labs/01-rc-bring-up.textproto" --json)
[ $? = 0 ] || fail "lab 1 with --json exited non-zero"
[ "$(wc -l <<< "$out")" = 1 ] && grep -q '^{"type":"result","expectations":' <<< "$out" || fail "lab 1's --json: $out"
out=$("$rocelab" sim "$labs/01-rc-bring-up.textproto" --plots "$dir/none.svg" 2>&1)
[ $? = 2 ] || fail "--plots without a topology did not exit 2"
grep -q 'has no topology' <<< "$out" || fail "--plots without a topology: $out"

# A bad topology: file:line, exit 2, before anything runs.
sed 's/preset: "incast_star"/preset: "incast-star"/' "$lab" > "$dir/bad.textproto"
line=$(grep -n 'preset:' "$dir/bad.textproto" | cut -d: -f1)
out=$("$rocelab" sim "$dir/bad.textproto" 2>&1)
[ $? = 2 ] || fail "an unknown preset did not exit 2"
grep -qF "bad.textproto:$line: unknown preset \"incast-star\"" <<< "$out" || fail "unknown preset: $out"
sed 's/kmin_bytes: 10240 kmax_bytes: 40960/kmin_bytes: 40960 kmax_bytes: 10240/' "$lab" > "$dir/kmin.textproto"
line=$(grep -n 'ecn {' "$dir/kmin.textproto" | cut -d: -f1)
out=$("$rocelab" sim "$dir/kmin.textproto" 2>&1)
[ $? = 2 ] || fail "Kmin > Kmax did not exit 2"
grep -qF "kmin.textproto:$line: ecn: kmin_bytes (40960) is above kmax_bytes (10240)" <<< "$out" || fail "Kmin > Kmax: $out"

# A failed expect_port: exit 1, with its line.
sed 's/name: "dropped" value: 0/name: "dropped" value: 3/' "$lab" > "$dir/drops.textproto"
line=$(grep -n 'name: "dropped" value: 3' "$dir/drops.textproto" | cut -d: -f1)
out=$("$rocelab" sim "$dir/drops.textproto")
[ $? = 1 ] || fail "a failed expect_port did not exit 1"
grep -qF "drops.textproto:$line: expected port tor->sink dropped = 3, got 0" <<< "$out" || fail "expect_port: $(tail -3 <<< "$out")"

[ $failures = 0 ] && echo "rocelab sim on a switched network: JSON, plots, text and errors as expected"
exit $((failures > 0))
