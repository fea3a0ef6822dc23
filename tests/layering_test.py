#!/usr/bin/env python3
"""Includes point down: every `#include "dir/..."` of a file under src/ is
allowed by docs/style.md §2, whose table is the rule. A file's row is the
longest directory in the table's first column that holds it; the second
column's `dir/` entries are the directories it may include, `dir/file.h`
entries single headers. A directory always includes itself."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
style = (root / "docs/style.md").read_text()
section = style.split("## §2", 1)[1].split("\n## ", 1)[0]

rules = {}  # "src/emu/records" -> (allowed dirs, allowed headers)
for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 2 or not cells[0].startswith("`src/"):
        continue
    dirs = {t for t in re.findall(r"`([^`]+)`", cells[1]) if t.endswith("/")}
    headers = {t for t in re.findall(r"`([^`]+)`", cells[1]) if t.endswith(".h")}
    for d in re.findall(r"`(src/[^`]+)`", cells[0]):
        rules[d.rstrip("/")] = (dirs, headers)
if "src/wire" not in rules or "src/emu" not in rules:
    sys.exit("FAIL: no layering table found in docs/style.md §2")

bad = 0
for f in sorted((root / "src").rglob("*")):
    if f.suffix not in (".h", ".cc"):
        continue
    rel = f.relative_to(root).as_posix()
    rows = [d for d in rules if rel.startswith(d + "/")]
    if not rows:
        print(f"FAIL: {rel}: its directory has no row in docs/style.md §2")
        bad += 1
        continue
    row = max(rows, key=len)
    dirs, headers = rules[row]
    own = row.split("/")[1] + "/"  # src/emu/records -> emu/
    for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m or "/" not in m.group(1):
            continue
        inc = m.group(1)
        top = inc.split("/")[0] + "/"
        if top == own or top in dirs or inc in headers:
            continue
        print(f"FAIL: {rel}:{n}: includes {inc}, which the row of {row} does not allow")
        bad += 1

print(f"{'FAIL' if bad else 'ok'}: {len(rules)} rows, {bad} files or includes against the rule")
sys.exit(1 if bad else 0)
