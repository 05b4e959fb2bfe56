#!/usr/bin/env python3
"""Every public header's example compiles. Each header in include/idem opens with
a comment whose example lines begin with `//   ` (three spaces); each run of
such lines is one snippet. A snippet is compiled (-fsyntax-only) inside a
function body of its own, after the header and the header's prelude,
tests/header_examples/NAME.prelude.hpp (NAME: the header's path under idem/,
with / as _), which declares what the snippet uses but does not declare itself
(`key`, `store`, `use(...)`): stubs, never definitions of idem's own names. The
snippet's own #include lines go before it; a prelude line
`// namespace scope: 1 2` puts those snippets (counted from 1) at namespace
scope instead, for examples that declare types or main().

A header being reworked elsewhere may be listed in PENDING with the reason:
its example is compiled and reported, but a failure does not fail the test;
one that compiles fails it, so that it comes off the list."""
import pathlib
import re
import subprocess
import sys

# {"header.hpp": "why"} while a header's example is being reworked elsewhere.
PENDING = {}

root = pathlib.Path(sys.argv[1])
compiler = sys.argv[2]
include = root / "include"
preludes = root / "tests" / "header_examples"


def snippets(text):
    """The runs of example lines in the comment before #pragma once."""
    runs, current = [], []
    for line in text.split("#pragma once")[0].splitlines():
        if line.startswith("//   "):
            current.append(line[5:])
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def unit(name, runs, prelude):
    at_namespace = set()
    match = re.search(r"^// namespace scope:((?: \d+)+)$", prelude, re.M)
    if match:
        at_namespace = {int(n) for n in match.group(1).split()}
    head = [f'#include "idem/{name}"']
    if prelude:
        head.append(f'#include "header_examples/{name[:-4].replace("/", "_")}.prelude.hpp"')
    body = []
    for number, run in enumerate(runs, 1):
        code = [line for line in run if not line.lstrip().startswith("#include")]
        head += [line.strip() for line in run if line.lstrip().startswith("#include")]
        if number in at_namespace:
            body += [f"// snippet {number}"] + code
        else:
            body += [f"[[maybe_unused]] static auto idem_example_{number}() {{"] + code + ["}"]
    return "\n".join(head + body) + "\n"


failures, pending_failed, checked = [], [], 0
# include/idem, and the public headers a store keeps in its folder (stores/<name>/include/idem).
for header in sorted([*(include / "idem").rglob("*.hpp"), *root.glob("stores/*/include/idem/*.hpp")]):
    store_include = next(p for p in header.parents if p.name == "idem").parent
    name = header.relative_to(store_include / "idem").as_posix()
    if name.startswith("detail/"):
        continue  # not API: a comment, no example (tests/public_headers.py)
    runs = snippets(header.read_text())
    if not runs:
        failures.append(f"{name}: no example lines ('//   ...') in its opening comment")
        continue
    prelude_file = preludes / (name[:-4].replace("/", "_") + ".prelude.hpp")
    prelude = prelude_file.read_text() if prelude_file.exists() else ""
    source = unit(name, runs, prelude)
    result = subprocess.run(
        [compiler, "-std=c++20", "-fsyntax-only", "-I", str(include), "-I", str(store_include), "-I", str(root / "tests"),
         "-x", "c++", "-"],
        input=source, text=True, capture_output=True)
    checked += 1
    if name in PENDING:
        if result.returncode == 0:
            failures.append(f"{name}: its example compiles now; take it off PENDING in {sys.argv[0]}")
        else:
            pending_failed.append(f"{name}: not checked yet ({PENDING[name]})")
        continue
    if result.returncode != 0:
        numbered = "\n".join(f"{i:4}  {line}" for i, line in enumerate(source.splitlines(), 1))
        failures.append(f"{name}: its example does not compile:\n{numbered}\n{result.stderr}")
for line in pending_failed:
    print(line)
for failure in failures:
    print(failure)
print(f"{checked} headers' examples compiled, {len(pending_failed)} pending, {len(failures)} problems")
sys.exit(1 if failures else 0)
