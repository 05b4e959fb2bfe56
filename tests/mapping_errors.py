#!/usr/bin/env python3
"""A mapping that cannot work does not compile, and the compiler says why: each
case below declares an idem::mapping (idem/mapping.hpp), uses it as a unit of
work would, and must fail to compile with the given message. A last case that
is correct must compile, so the failures are the mappings' and not the setup's.
  mapping_errors.py SOURCE_ROOT COMPILER"""
import pathlib
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
compiler = sys.argv[2]

PRELUDE = """
#include <idem/unit_of_work.hpp>
#include <optional>
#include <string>
#include <tuple>
struct row { std::string id; long long n = 0; double d = 0; std::optional<int> o; bool b = false; int v = 0; };
struct other { std::string id; };
struct odd { int x = 0; bool operator==(const odd&) const = default; };
struct with_odd { std::string id; odd member; };
"""

CASES = {
    "no key column": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(column(\"id\", &row::id)); };",
        "needs exactly one idem::key column"),
    "two key columns": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id), key(\"n\", &row::n)); };",
        "needs exactly one idem::key column"),
    "a version that is no integer": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id), version(\"d\", &row::d)); };",
        "the version column must be an integer"),
    "a boolean version": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id), version(\"b\", &row::b)); };",
        "the version column must be an integer"),
    "two versions": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id), version(\"n\", &row::n),"
        " version(\"o\", &row::o)); };",
        "more than one idem::version column"),
    "a member type SOCI cannot bind": (
        "template <> struct idem::mapping<with_odd> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &with_odd::id), column(\"m\", &with_odd::member)); };",
        "a column's member type has no SQL mapping"),
    "an optional key": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"o\", &row::o), column(\"id\", &row::id)); };",
        "the key column must be a std::string or an integer"),
    "a member of another type": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &other::id)); };",
        "a column names a member of another type"),
    "two columns of one name": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id), column(\"id\", &row::n)); };",
        "two columns have the same name"),
    "a column name that is no identifier": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = std::tuple(key(\"id; DROP TABLE x\", &row::id)); };",
        "a column name is not a plain SQL identifier"),
    "a table name that is no identifier": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows r\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id)); };",
        "the table is not a plain SQL identifier"),
    "columns that are no column list": (
        "template <> struct idem::mapping<row> { static constexpr auto table = \"rows\";"
        " static constexpr auto columns = 3; };",
        "needs `static constexpr auto columns = std::tuple("),
}

USE = "void use(idem::unit_of_work& uow) { (void)uow.get<%s>({}); }\n"
GOOD = ("template <> struct idem::mapping<row> { static constexpr auto table = \"bank.rows\";"
        " static constexpr auto columns = std::tuple(key(\"id\", &row::id), column(\"n\", &row::n),"
        " column(\"d\", &row::d), column(\"o\", &row::o), column(\"b\", &row::b), version(\"v\", &row::v)); };")


def compile_source(source):
    return subprocess.run(
        [compiler, "-std=c++20", "-fsyntax-only", "-I", str(root / "include"), "-x", "c++", "-"],
        input=source, text=True, capture_output=True)


failures = []
for name, (mapping, message) in CASES.items():
    used = "with_odd" if "with_odd" in mapping else "row"
    result = compile_source(PRELUDE + mapping + "\n" + USE % used)
    if result.returncode == 0:
        failures.append(f"{name}: compiled")
    elif message not in result.stderr:
        first = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr[:300])
        failures.append(f"{name}: failed without '{message}'; the compiler said: {first}")
good = compile_source(PRELUDE + GOOD + "\n" + USE % "row")
if good.returncode != 0:
    failures.append("a correct mapping does not compile:\n" + good.stderr[:2000])
for failure in failures:
    print(failure)
print(f"{len(CASES)} mappings that must not compile and 1 that must, {len(failures)} wrong")
sys.exit(1 if failures else 0)
