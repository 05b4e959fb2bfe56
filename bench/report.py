#!/usr/bin/env python3
"""Turns idem-bench and pgbench results (JSON lines on stdin) into the Markdown
table docs/performance.md shows. Rates are medians; ratios are idem / baseline (rate)."""
import json
import statistics
import sys
from collections import defaultdict

lines = [json.loads(line) for line in sys.stdin if line.startswith("{")]
machine = sys.argv[1] if len(sys.argv) > 1 else ""
steady = [r for r in lines if r.get("group", "").endswith("-steady")]
bench = [r for r in lines if "group" in r and r not in steady]
pgbench = defaultdict(list)
for r in lines:
    if "pgbench" in r:
        pgbench[(r["pgbench"], r["clients"])].append(r["tps"])

out = [machine, ""] if machine else []

# The steady-state scenarios: one row per configuration, each variant's rate
# over the bare transfer's in the same alternating rounds.
STEADY_COLUMNS = {
    "pg-steady": [("idem", "idem"), ("idem-reserve-first", "idem, reserve_first"),
                  ("hand", "by hand, reserve first"),
                  ("hand-first-schema", "the same on the first schema's table"),
                  ("hand-optimistic", "work, then the completed record with COMMIT"),
                  ("lean-reserve", "lean table: reserve, HOT completion"),
                  ("lean-optimistic", "lean table: work, then the completed record with COMMIT")],
    "mariadb-steady": [("idem", "idem"), ("idem-reserve-first", "idem, reserve_first"),
                       ("idem-lease", "idem, lease mode (detached reserve, complete)"),
                       ("hand", "by hand, reserve first"),
                       ("hand-optimistic", "work, then the completed record with COMMIT")],
    "sqlite-steady": [("idem", "idem"), ("idem-reserve-first", "idem, reserve_first"),
                      ("hand", "by hand, reserve first"),
                      ("hand-one-write", "lookup, work, one INSERT"),
                      ("unindexed-one-write", "the same without the expires_at index"),
                      ("lean-rowid", "lean rowid table + unique digest index: one INSERT"),
                      ("lean-without-rowid", "lean WITHOUT ROWID table: one INSERT")],
}
for group, columns in STEADY_COLUMNS.items():
    rows = [r for r in steady if r["group"] == group]
    if not rows:
        continue
    configs = list(dict.fromkeys(r["name"] for r in rows))
    by = {(r["name"], r["subject"]): r for r in rows}
    title = {"pg-steady": "PostgreSQL", "mariadb-steady": "MariaDB"}.get(group, "SQLite")
    out.append(f"{title} at steady state ({rows[0]['note']} prefilled, 100,000 accounts at random): "
               "rates over the bare transfer in the same run.")
    out.append("")
    out.append("| configuration | bare transfers/s | idem transfers/s | " +
               " | ".join(f"{label} / bare" for _, label in columns) + " | idem / its form by hand |")
    out.append("| --- | ---: | ---: | " + " | ".join("---:" for _ in columns) + " | ---: |")
    for config in configs:
        idem = by.get((config, "idem"))
        # idem's own form written by hand: the record inserted after the work.
        hand = by.get((config, "hand-one-write" if group == "sqlite-steady" else "hand-optimistic"))
        cells = [f"{by[(config, key)]['subject_per_s'] / by[(config, key)]['baseline_per_s']:.2f}"
                 if (config, key) in by else "" for key, _ in columns]
        versus_hand = f"{idem['subject_per_s'] / hand['subject_per_s']:.2f}" if idem and hand else ""
        out.append(f"| {config} | {idem['baseline_per_s']:,.0f} | {idem['subject_per_s']:,.0f} | " +
                   " | ".join(cells) + f" | {versus_hand} |")
    out.append("")

# Mapped objects: the steady-state transfer through the mapping over the same
# statements written by hand, in the same alternating rounds.
mapped = [r for r in steady if r["group"] == "mapping-steady"]
if mapped:
    out.append(f"Mapped objects at steady state ({mapped[0]['note']} prefilled, 100,000 accounts at random): "
               "the transfer through the mapping over the same statements by hand in the same run.")
    out.append("")
    out.append("| configuration | accounts | mapping transfers/s | by hand transfers/s | mapping / by hand |")
    out.append("| --- | --- | ---: | ---: | ---: |")
    for r in mapped:
        kind = r["subject"].split(", ", 1)[1]
        out.append(f"| {r['name']} | {kind} | {r['subject_per_s']:,.0f} | {r['baseline_per_s']:,.0f} | "
                   f"{r['subject_per_s'] / r['baseline_per_s']:.2f} |")
    out.append("")

out.append("The hot-row scenarios: every transfer moves money between the same two accounts, so "
           "several clients wait on those rows' locks (lock-bound); the record table starts empty.")
out.append("")
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
        out.append(f"| pgbench | idem fast path, {clients} client{'s' if clients > 1 else ''}, hot row (lock-bound) | "
                   f"{idem:,.0f} transfers/s | {base:,.0f}: {label} | {idem / base:.2f} |")
print("\n".join(out))
