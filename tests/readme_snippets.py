#!/usr/bin/env python3
"""Every `readme:begin NAME` ... `readme:end NAME` region of a compiled example
must appear verbatim in README.md, so the README's code cannot drift from code
the build compiles."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
regions = 0
failures = []
for source in sorted((root / "examples").rglob("*.cpp")):
    text = source.read_text()
    for match in re.finditer(r"// readme:begin (\S+)\n(.*?)// readme:end \1\n", text, re.S):
        regions += 1
        if match.group(2) not in readme:
            failures.append(f"{source.relative_to(root)}: region '{match.group(1)}' differs from README.md")
for failure in failures:
    print(failure)
print(f"{regions} regions checked, {len(failures)} out of date")
sys.exit(1 if failures or regions == 0 else 0)
