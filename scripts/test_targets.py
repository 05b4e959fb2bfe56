#!/usr/bin/env python3
"""The ninja targets the named tests need (their programs and what they depend
on), so a build directory that runs a few tests builds only those:
    ninja -C BUILD $(python3 scripts/test_targets.py BUILD [--installed] [--suite=S] TEST...)
--suite=S names every test of suite S; --installed adds what `meson install`
installs. A name that is no test of BUILD is an error, so a renamed test is not
silently skipped."""
import json
import os
import subprocess
import sys

build, args = sys.argv[1], sys.argv[2:]


def introspect(what):
    return json.loads(subprocess.run(["meson", "introspect", build, what], check=True, capture_output=True,
                                     text=True).stdout)


tests = {t["name"]: t for t in introspect("--tests")}
targets = introspect("--targets")
files = {t["id"]: t["filename"] for t in targets}
names = [a for a in args if not a.startswith("--")]
wanted = set()
for arg in args:
    if arg == "--installed":
        wanted.update(f for t in targets if t["installed"] for f in t["filename"])
    elif arg.startswith("--suite="):
        suite = arg.removeprefix("--suite=")
        in_suite = [n for n, t in tests.items() if any(s.split(":")[-1] == suite for s in t["suite"])]
        if not in_suite:
            sys.exit("test_targets.py: no test of suite " + suite + " in " + build)
        names += in_suite
    elif arg.startswith("--"):
        sys.exit("test_targets.py: unknown option " + arg)
missing = [n for n in names if n not in tests]
if missing:
    sys.exit("test_targets.py: no such test in " + build + ": " + " ".join(missing))
build_root = os.path.realpath(build)
for name in names:
    test = tests[name]
    for target in test["depends"]:
        wanted.update(files.get(target, []))
    program = os.path.realpath(test["cmd"][0])
    if program.startswith(build_root + os.sep):
        wanted.add(program)
print(" ".join(sorted(os.path.relpath(os.path.realpath(f), build_root) for f in wanted)))
