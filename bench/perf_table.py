#!/usr/bin/env python3
"""docs/performance.md shows bench/RESULTS.md between its bench markers.
  perf_table.py ROOT write   puts RESULTS.md there (bench/run does, after a run)
  perf_table.py ROOT check   exits 1 when the page's table differs from RESULTS.md"""
import pathlib
import re
import sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

root, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
page_path = root / "docs" / "performance.md"
page = page_path.read_text()
results = (root / "bench" / "RESULTS.md").read_text().strip()
# Whatever lies between the markers, nothing included (adjacent markers hold an empty table).
markers = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.S)
found = markers.findall(page)
if len(found) != 1:
    sys.exit(f"docs/performance.md: expected one {BEGIN} ... {END} pair, found {len(found)}")
if mode == "write":
    page_path.write_text(markers.sub(lambda _: f"{BEGIN}\n{results}\n{END}", page))
elif mode == "check":
    shown = found[0].strip()
    if shown != results:
        sys.exit("docs/performance.md's benchmark table differs from bench/RESULTS.md: run "
                 "`python3 bench/perf_table.py . write` (bench/run does it after measuring)")
    print(f"docs/performance.md shows bench/RESULTS.md ({len(results.splitlines())} lines)")
else:
    sys.exit(f"unknown mode {mode}: write or check")
