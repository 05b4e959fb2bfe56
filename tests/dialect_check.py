#!/usr/bin/env python3
"""Each database owns its SQL: the layers above the stores write none.

idem's own tables are read and written through the statements interfaces of
lib/sql (outbox_statements.hpp, operations_statements.hpp, schema_statements.hpp,
mapping_statements.hpp), which each store's dialect fills in its own SQL under
stores/<dialect>/. This check fails when a string literal in lib/ or database/
holds a statement keyword, or when the core names a database engine: a third
engine must need no edit there. The installed contract suites (lib/contract,
lib/sql_contract) are exempt: they are tests, and their bank is an
application's own SQL. The `idem` command (tools/) reaches those tables through
the public operator's functions (store_admin.hpp, table_admin.hpp), never the
private statements of lib/sql.

usage: dialect_check.py SOURCE_ROOT
"""
import pathlib
import re
import sys

STATEMENT = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|MERGE|UPSERT)\b")
PRIVATE_SQL = re.compile(r'#include\s+"sql/')
ENGINE = re.compile(r"\b(sqlite3?|postgres(?:ql)?|libpq|mariadb|mysql)\b", re.IGNORECASE)
LITERAL = re.compile(r'"(?:\\.|[^"\\])*"')
EXEMPT = ("lib/contract/", "lib/sql_contract/")


def code_lines(path):
    """The file's lines with comments removed (// to the end of the line, /* */ spans)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), path.read_text(), flags=re.S)
    for number, line in enumerate(text.splitlines(), 1):
        # A // inside a literal is kept: cut at the first // outside one.
        out, i = "", 0
        while i < len(line):
            if line.startswith("//", i):
                break
            if line[i] == '"':
                m = LITERAL.match(line, i)
                if m:
                    out += m.group(0)
                    i = m.end()
                    continue
            out += line[i]
            i += 1
        yield number, out


def main():
    root = pathlib.Path(sys.argv[1])
    failures = []
    for folder in ("lib", "database"):
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.suffix not in (".cpp", ".hpp", ".h") or rel.startswith(EXEMPT):
                continue
            for number, line in code_lines(path):
                for literal in LITERAL.findall(line):
                    if STATEMENT.search(literal):
                        failures.append(f"{rel}:{number}: SQL text {literal}: it belongs in a store's dialect")
                    elif ENGINE.search(literal) and "#include" not in line:
                        failures.append(f"{rel}:{number}: names a database engine {literal}")
    for path in sorted((root / "tools").rglob("*")):
        if path.suffix in (".cpp", ".hpp"):
            for number, line in code_lines(path):
                if PRIVATE_SQL.search(line):
                    failures.append(f"{path.relative_to(root).as_posix()}:{number}: the command includes a private "
                                    "lib/sql header: use the store's admin functions")
    for failure in failures:
        print(failure)
    if failures:
        print(f"{len(failures)} place(s) in lib/, database/ or tools/ speak one dialect", file=sys.stderr)
        return 1
    print("no SQL text and no engine named in lib/ or database/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
