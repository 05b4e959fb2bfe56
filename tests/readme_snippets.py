#!/usr/bin/env python3
"""Every `readme:begin NAME` ... `readme:end NAME` region of a compiled example
must appear verbatim in README.md, so the README's code cannot drift from code
the build compiles; and every link to a section of the README (#anchor) must
lead to a heading it has."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
regions = 0
failures = []
for source in sorted((root / "examples").rglob("*.cpp")):
    text = source.read_text()
    for match in re.finditer(r"// readme:begin (\S+)\n(.*?)[ \t]*// readme:end \1\n", text, re.S):
        regions += 1
        if match.group(2) not in readme:
            failures.append(f"{source.relative_to(root)}: region '{match.group(1)}' differs from README.md")
# The transfer a SQL user writes (examples/transfer: open, row, mapping, transfer)
# names at most five of idem's types.
transfer = (root / "examples" / "transfer" / "main.cpp").read_text()
names = set()
for region in ("database-open", "database-row", "database-mapping", "database-transfer"):
    match = re.search(r"// readme:begin " + region + r"\n(.*?)// readme:end " + region + r"\n", transfer, re.S)
    if not match:
        failures.append(f"examples/transfer/main.cpp: no region '{region}'")
        continue
    names |= set(re.findall(r"idem::(\w+)", match.group(1)))
print(f"the README's transfer names {len(names)} idem types: {', '.join(sorted(names))}")
if len(names) > 5:
    failures.append("the README's transfer names more than five idem types")
# GitHub's anchors: the heading in lower case, spaces to hyphens, other punctuation dropped.
anchors = set()
in_code = False
for line in readme.splitlines():
    if re.match(r" {0,3}```", line):  # a fence indented further is code, and leaves a block open
        in_code = not in_code
    elif not in_code and line.startswith("#"):
        title = line.lstrip("#").strip().lower()
        anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
for anchor in sorted(set(re.findall(r"\]\(#([^)]+)\)", readme))):
    if anchor not in anchors:
        failures.append(f"README.md links to #{anchor}, a section it does not have")
for failure in failures:
    print(failure)
print(f"{regions} regions checked, {len(failures)} out of date")
sys.exit(1 if failures or regions == 0 else 0)
