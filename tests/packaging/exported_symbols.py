#!/usr/bin/env python3
"""idem's shared libraries export their public API only. Lists each library's
exported symbols (nm -D --defined-only, demangled) and fails on any of idem's
own symbols that is internal (idem::detail, an anonymous namespace, a
store's private namespace) unless the allow list below names it and says why.
A symbol is judged by its name, not by its parameter types: a public member
taking a detail type (the type-erased callable the public templates pass) is
public. Symbols of the standard library's templates instantiated for idem's
types are the C++ runtime's, not idem's API, and are not judged.
  exported_symbols.py BUILD_ROOT [SQL_STORE_LIBRARY ...]   (e.g. libidem_sqlite)"""
import pathlib
import re
import subprocess
import sys

# What must stay visible although it is not API, and why. Each entry is a
# regular expression on the demangled name, for the libraries named;
# SQL_STORES stands for every SQL store library the build has (the names
# after BUILD_ROOT), so that a new store needs no line here.
SQL_STORES = "<every SQL store library>"
ALLOWED = [
    # Declared in the public record_store.hpp for record-store implementations
    # (the store libraries, and stores applications write): argument checks and
    # fencing tokens, and the remembered window's check and fingerprint digest (tombstones).
    (r"^idem::detail::(check_fingerprint|check_token|check_duration|new_token|check_remember|fingerprint_digest)$",
     {"libidem"}),
    # The SQL plumbing the SQLite and PostgreSQL store libraries are built on,
    # exported by idem_sql for them (lib/sql/*.hpp, not installed): SOCI error
    # translation, migrations, the transactions open on a thread, the registry
    # of dialects each store library adds its own to, the owners of the
    # runner's per-connection cache, and the preparing of statements sent
    # unnamed (idem_database's steps and operations).
    (r"^idem::detail::(rethrow_soci_as_store_error|register_dialect|dialect_of"
     r"|apply_migrations|open_transactions|new_connection_cache_owner|prepare_statement)$", {"libidem_sql"}),
    # The interfaces between the runner (idem_sql) and the store libraries: a
    # dialect and its control connection (each store library implements one),
    # the transaction's internals the stores reach through
    # transaction::internals(), and the fast path among them, with the
    # statements of idem's own tables it sends with COMMIT (deferred_sql: the
    # PostgreSQL connection recognises them by their typeinfo).
    (r"^idem::detail::(sql_dialect|sql_connection|sql_transaction)(::|$)", {"libidem_sql", SQL_STORES}),
    (r"^idem::detail::(fast_path|deferred_statement|deferred_sql)(::|$)", {"libidem_sql", SQL_STORES}),
    # What the public templates of mapped objects call in idem_sql (declared in
    # include/idem/detail/mapped_session.hpp): the identity map, flush, hooks,
    # SOCI's conversion of a mapped type.
    (r"^idem::detail::mapped_session::", {"libidem_sql"}),
    # The unit of work's state beyond its SQL (include/idem/detail/unit_state.hpp),
    # which every feature's library keeps its part of a unit of work in (its
    # inline members and typeinfo are emitted where a part is defined, too).
    (r"^idem::detail::(unit_state|unit_part)(::|$)", {"libidem", "libidem_sql"}),
    # What unit_of_work::publish calls in idem_sql (declared in the public
    # outbox.hpp), and the outbox table's statements (lib/sql/outbox_table.hpp)
    # the relay and the operator's functions in idem_database run.
    (r"^idem::detail::(publish|publishing_record)(::|$)", {"libidem_sql"}),
    (r"^idem::detail::outbox_table::", {"libidem_sql"}),
    # How idem's own statements reach the server, unnamed behind a transaction
    # pooler (lib/sql/unnamed_statement.hpp): the statements of idem_database
    # (steps, the completer) are prepared through idem_sql's.
    (r"^idem::detail::prepare_statement$", {"libidem_sql"}),
    # The statements on the operations in steps' tables (lib/sql/operations_table.hpp)
    # that the completer and the operator's functions in idem_database run.
    (r"^idem::detail::operations_table::", {"libidem_sql"}),
    # The watch that ends the connections of open transactions whose server fell
    # silent (lib/sql/answer_watch.hpp): the runner's, and the PostgreSQL
    # store's own connections'.
    (r"^idem::detail::answer_watch(::|$)", {"libidem_sql"}),
    # The test-only switch that shows the lost updates the mapped objects' checks prevent.
    (r"^idem::detail::set_concurrency_checks$", {"libidem_sql"}),
    # SHA-1, SHA-256 and hex of libidem's crypto: the Redis store names its Lua scripts by their SHA-1
    # (EVALSHA); the SQL stores keep a scope's id, the first bytes of its SHA-256 (lib/sql/record_id.hpp).
    (r"^idem::detail::(sha1|sha256|hex)$", {"libidem"}),
    # Random bytes and UUIDv4s of libidem's CSPRNG: the HTTP client's keys (idem_httplib), message ids and
    # claim tokens (idem_sql, idem_database).
    (r"^idem::detail::(random_bytes|random_uuid)$", {"libidem"}),
    # Declared in the public result_codec.hpp for default_codec's integers: the checked parse.
    (r"^idem::detail::(parse_signed|parse_unsigned)$", {"libidem"}),
]

# Internal: a detail namespace, an anonymous one, or a class's private implementation (pimpl).
INTERNAL = re.compile(r"idem::(detail|redis_detail)::|\(anonymous namespace\)|::impl(::|$)")
PREFIX = re.compile(r"^(vtable for |typeinfo for |typeinfo name for |VTT for |guard variable for |non-virtual thunk to )")


def entity(symbol):
    """The qualified name a symbol defines: without its parameters, return type,
    template arguments and ABI tags."""
    name = PREFIX.sub("", symbol)
    depth, cut = 0, len(name)
    for i, c in enumerate(name):
        depth += c == "<"
        depth -= c == ">"
        if c == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    depth, start = 0, 0
    for i, c in enumerate(name):  # a return type ends at the last space outside <>
        depth += c == "<"
        depth -= c == ">"
        if c == " " and depth == 0:
            start = i + 1
    name = name[start:]
    while re.search(r"<[^<>]*>", name):
        name = re.sub(r"<[^<>]*>", "", name)
    return name.replace("[abi:cxx11]", "")


root = pathlib.Path(sys.argv[1])
sql_stores = set(sys.argv[2:])
ALLOWED = [(pattern, (libs - {SQL_STORES}) | (sql_stores if SQL_STORES in libs else set())) for pattern, libs in ALLOWED]
libraries = sorted(p for p in root.rglob("libidem*.so") if "subprojects" not in p.parts)
if not libraries:
    sys.exit(f"no libidem*.so under {root}")
failures = []
for library in libraries:
    name = library.name.removesuffix(".so")
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", str(library)], capture_output=True, text=True,
                         check=True).stdout
    symbols = [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]
    own = [s for s in symbols if entity(s).startswith("idem::")]
    internal = [s for s in own if INTERNAL.search(entity(s))]
    judged = [s for s in internal
              if not any(re.search(pattern, entity(s)) and name in libs for pattern, libs in ALLOWED)]
    print(f"{name}: {len(symbols)} exported, {len(own)} of idem's, {len(internal) - len(judged)} internal allowed")
    failures += [f"{name}: exports internal {s}" for s in judged]
for failure in failures:
    print(failure)
sys.exit(1 if failures else 0)
