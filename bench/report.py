#!/usr/bin/env python3
"""Turns idem-bench and pgbench results (JSON lines on stdin) into the Markdown
table the README shows. Rates are medians; ratios are idem / baseline (rate)."""
import json
import statistics
import sys
from collections import defaultdict

lines = [json.loads(line) for line in sys.stdin if line.startswith("{")]
machine = sys.argv[1] if len(sys.argv) > 1 else ""
bench = [r for r in lines if "group" in r]
pgbench = defaultdict(list)
for r in lines:
    if "pgbench" in r:
        pgbench[(r["pgbench"], r["clients"])].append(r["tps"])

out = [machine, ""] if machine else []
out.append("| area | measurement | idem | baseline | idem / baseline |")
out.append("| --- | --- | ---: | --- | ---: |")
clients_rates = defaultdict(list)
for r in bench:
    if r["group"] == "pgbench":
        clients_rates[int(r["name"].split(", ")[1].split()[0])].append(r["subject_per_s"])
        continue
    if "purge" in r["name"]:
        out.append(f"| {r['group']} | {r['name']} | {r['note']} | | |")
        continue
    ratio = r["subject_per_s"] / r["baseline_per_s"] if r["baseline_per_s"] else 0
    out.append(f"| {r['group']} | {r['name']} | {r['subject_per_s']:,.0f} {r['unit']} | "
               f"{r['baseline_per_s']:,.0f}: {r['baseline']} | {ratio:.2f} |")
for clients, rates in sorted(clients_rates.items()):
    idem = statistics.median(rates)
    for script, label in (("bare", "pgbench -M prepared, bare transfer"),
                          ("by_hand", "pgbench -M prepared, the record statements by hand")):
        tps = pgbench.get((script, clients))
        if not tps:
            continue
        base = statistics.median(tps)
        out.append(f"| pgbench | idem fast path, {clients} client{'s' if clients > 1 else ''} | "
                   f"{idem:,.0f} transfers/s | {base:,.0f}: {label} | {idem / base:.2f} |")
print("\n".join(out))
