#!/usr/bin/env python3
"""Public headers stand alone and leak no driver, crypto or server-library header:
each compiles by itself, includes none of the forbidden headers, and opens with a
doc comment that shows an example (idem/detail/ headers, which are not API,
need the comment only)."""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
compiler = sys.argv[2]
forbidden = re.compile(
    r'#\s*include\s*[<"](soci/|libpq|postgresql/|sqlite3|mysql|mariadb/|openssl/|hiredis/|httplib|CLI/|nlohmann/)')
failures = []
# include/idem, and the public headers a store keeps in its folder (stores/<name>/include/idem).
headers = sorted([*(root / "include" / "idem").rglob("*.hpp"), *root.glob("stores/*/include/idem/*.hpp")])
for header in headers:
    include_root = next(p for p in header.parents if p.name == "idem").parent
    name = header.relative_to(include_root)
    text = header.read_text()
    if forbidden.search(text):
        failures.append(f"{name}: includes a driver, crypto or server-library header")
    opening = text.split("#pragma once")[0]
    # idem/detail/ holds what public templates are built on, not API: a comment, no example.
    example_required = "detail" not in name.parts
    if not opening.startswith("//") or (example_required and not re.search(r"^//   \S", opening, re.M)):
        failures.append(f"{name}: does not open with a doc comment showing an example")
    result = subprocess.run(
        [compiler, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
         "-I", str(root / "include"), "-I", str(include_root), "-x", "c++", "-"],
        input=f'#include "{name}"\n', text=True, capture_output=True)
    if result.returncode != 0:
        failures.append(f"{name}: does not compile alone:\n{result.stderr}")
for failure in failures:
    print(failure)
print(f"{len(headers)} public headers checked, {len(failures)} problems")
sys.exit(1 if failures else 0)
