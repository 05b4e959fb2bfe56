#!/usr/bin/env python3
"""Turns idem-bench and pgbench results (JSON lines on stdin) into the Markdown
table the README shows."""
import json
import sys

rows = [json.loads(line) for line in sys.stdin if line.startswith("{")]
machine = sys.argv[1] if len(sys.argv) > 1 else ""

out = []
if machine:
    out.append(machine)
    out.append("")
out.append("| group | measurement | idem | baseline | idem / baseline (rate) |")
out.append("| --- | --- | ---: | ---: | ---: |")
for r in rows:
    if r.get("note") and "purge" in r["name"]:
        out.append(f"| {r['group']} | {r['name']} | {r['note']} | | |")
        continue
    rate_ratio = r["subject_per_s"] / r["baseline_per_s"] if r["baseline_per_s"] else 0
    out.append(
        f"| {r['group']} | {r['name']} | {r['subject_per_s']:,.0f} {r['unit']} | "
        f"{r['baseline_per_s']:,.0f} ({r['baseline']}) | {rate_ratio:.2f} |"
    )
    if r.get("note"):
        out[-1] = out[-1][:-1] + f" {r['note']} |"
print("\n".join(out))
