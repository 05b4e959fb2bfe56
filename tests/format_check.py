#!/usr/bin/env python3
"""The C++ sources follow the repository's .clang-format: lists every file that
clang-format would change, with the first lines of the change."""
import pathlib
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
clang_format = sys.argv[2]
folders = ["include", "lib", "stores", "tools", "examples", "tests", "bench"]
files = sorted(p for folder in folders for p in (root / folder).rglob("*")
               if p.suffix in (".cpp", ".hpp") and "corpus" not in p.parts)
failures = []
for path in files:
    result = subprocess.run([clang_format, "--style=file", str(path)], cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        failures.append(f"{path.relative_to(root)}: clang-format failed: {result.stderr.strip()}")
    elif result.stdout != path.read_text():
        failures.append(f"{path.relative_to(root)}: not formatted (clang-format -i --style=file {path.relative_to(root)})")
for failure in failures:
    print(failure)
print(f"{len(files)} files checked, {len(failures)} not formatted")
sys.exit(1 if failures else 0)
