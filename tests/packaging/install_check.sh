#!/usr/bin/env bash
# `meson install` puts headers, libraries, pkg-config files and the idem
# command in place. The installed command runs with no LD_LIBRARY_PATH, also
# after the tree is moved (a --prefix install is the same tree elsewhere), and
# programs build against the installed tree with pkg-config alone and with
# CMake's pkg_check_modules, as docs/building.md's "Use idem in your project" shows.
# The .pc files of a SQLite user require nothing of PostgreSQL, and idem_sql
# links no driver.
#   install_check.sh BUILD_DIR COMPILER
set -euo pipefail
build=$1 cxx=$2 sanitize=${3:-none}
# A sanitized library needs its runtime in the consumer too, as a user of such a build would link it.
flags=()
[ "$sanitize" = none ] || flags=("-fsanitize=$sanitize" -fno-sanitize=vptr)
dest=$(mktemp -d)
trap 'rm -rf "$dest" "$dest.moved"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild >/dev/null
pcdir=$(dirname "$(find "$dest" -name idem.pc | head -1)")
libdir=$(dirname "$pcdir")
# pkg-config reads the .pc files from the destdir and puts the destdir before
# every path in them: as docs/building.md documents for a --destdir install.
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest

# The command, with no LD_LIBRARY_PATH: its RUNPATH finds idem's libraries.
idem=$(find "$dest" -path '*/bin/idem' | head -1)
[ -x "$idem" ] || { echo "the idem command is not installed"; exit 1; }
check_command() {
  env -u LD_LIBRARY_PATH "$1" --help | grep -q "idem: operate idempotency records" || { echo "$1 --help failed"; exit 1; }
  derived=$(env -u LD_LIBRARY_PATH "$1" key derive refund order-1 r-2)
  [ "$derived" = "6:refund|7:order-1|3:r-2" ] || { echo "$1 key derive printed: $derived"; exit 1; }
}
check_command "$idem"
cp -a "$dest" "$dest.moved"
check_command "${idem/#$dest/$dest.moved}"
echo "installed idem runs in place and moved: $derived"

# The .pc files require only what each library needs.
for pc in idem-sql idem-sqlite; do
  [ -f "$pcdir/$pc.pc" ] || continue
  if grep -E 'libpq|soci_postgresql' "$pcdir/$pc.pc"; then echo "$pc.pc mentions PostgreSQL"; exit 1; fi
  pkg-config --cflags --libs "$pc" >/dev/null
done
sql=$(find "$libdir" -name 'libidem_sql.so.*' | head -1)
if [ -n "$sql" ] && readelf -d "$sql" | grep -E 'NEEDED.*(libpq|soci_postgresql|sqlite3)'; then
  echo "libidem_sql links a driver"; exit 1
fi

cat >"$dest/consumer.cpp" <<'CPP'
#include <idem/idem.hpp>
#include <idem/memory_store.hpp>
#include <iostream>
int main() {
    idem::executor exec{std::make_shared<idem::memory_store>()};
    auto run = [] { return std::string("done"); };
    auto first = exec.execute(idem::record_key("ns", "k"), "fp", {}, run, idem::string_codec{});
    auto again = exec.execute(idem::record_key("ns", "k"), "fp", {}, run, idem::string_codec{});
    std::cout << idem::to_string(first.status()) << " " << idem::to_string(again.status()) << "\n";
}
CPP
expect_replay() {
  local out
  out=$(env LD_LIBRARY_PATH="$libdir" "$1")
  [ "$out" = "executed replayed" ] || { echo "$1 printed: $out"; exit 1; }
}

# pkg-config.
# shellcheck disable=SC2046
"$cxx" -std=c++20 "${flags[@]}" "$dest/consumer.cpp" $(pkg-config --cflags --libs idem-memory) -o "$dest/consumer"
expect_replay "$dest/consumer"
echo "pkg-config consumer: executed replayed"

# The documented idem::database example (examples/transfer), built against the
# installed tree with pkg-config idem-database alone, then run on a SQLite file.
if pkg-config --exists idem-database; then
  # shellcheck disable=SC2046
  "$cxx" -std=c++20 "${flags[@]}" "$(dirname "$0")/../../examples/transfer/main.cpp" $(pkg-config --cflags --libs idem-database) \
    -o "$dest/transfer"
  out=$(env LD_LIBRARY_PATH="$libdir" "$dest/transfer" --db "sqlite:$dest/bank.db" | tail -1)
  [ "$out" = "each transfer moved money exactly once" ] || { echo "the database example printed: $out"; exit 1; }
  echo "pkg-config idem-database consumer (the documented transfer): $out"
fi

# CMake, through pkg_check_modules (the CMakeLists.txt of docs/building.md). The sysroot
# stands for a whole system, so Debian's own .pc files (fmt, libcrypto) point
# into it too, and CMake wants every include directory to exist. Ninja, which
# the build needs anyway, so the test needs no make.
mkdir -p "$dest/cmake" "$dest/usr/include"
sed -n '/^```cmake/,/^```$/p' "$(dirname "$0")/../../docs/building.md" | sed '1d;$d' >"$dest/cmake/CMakeLists.txt"
grep -q pkg_check_modules "$dest/cmake/CMakeLists.txt" || { echo "docs/building.md has no CMake example"; exit 1; }
cp "$dest/consumer.cpp" "$dest/cmake/main.cpp"
cmake -G Ninja -S "$dest/cmake" -B "$dest/cmake/build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="${flags[*]}" >/dev/null
cmake --build "$dest/cmake/build" >/dev/null
expect_replay "$dest/cmake/build/app"
echo "CMake consumer (pkg_check_modules): executed replayed"

# The contract suite, installed, run against a store of the consumer's choosing
# (here the memory store) through idem-contract alone.
# With --broken, the store forgets fingerprints (a mismatch answers in_flight): the
# suite must catch it.
cat >"$dest/contract.cpp" <<'CPP'
#include <idem/contract.hpp>
#include <idem/memory_store.hpp>
#include <cstring>
struct forgetful_store final : idem::record_store {
    idem::memory_store inner;
    explicit forgetful_store(std::shared_ptr<idem::manual_clock> c) : inner(std::move(c)) {}
    idem::reservation do_try_reserve(const idem::record_key& k, std::string_view fp, idem::duration d) override {
        auto r = inner.try_reserve(k, fp, d);
        return r.status == idem::reservation_status::fingerprint_mismatch ? idem::reservation::in_flight() : r;
    }
    bool do_complete(const idem::record_key& k, std::string_view t, std::string_view fp, std::string_view p,
                     idem::duration d, idem::duration) override { return inner.complete(k, t, fp, p, d); }
    bool do_release(const idem::record_key& k, std::string_view t) override { return inner.release(k, t); }
    std::size_t do_purge_expired(std::size_t limit) override { return inner.purge_expired(limit); }
};
struct memory_context final : idem::contract::store_context {
    bool broken = false;
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    std::string name() const override { return "memory, installed"; }
    std::shared_ptr<idem::record_store> make_store() override {
        if (broken) return std::make_shared<forgetful_store>(clock);
        return std::make_shared<idem::memory_store>(clock);
    }
    void advance(idem::duration by) override { clock->advance(by); }
    idem::duration short_span() const override { return std::chrono::minutes(1); }
};
int main(int argc, char** argv) {
    memory_context context;
    context.broken = argc > 1 && std::strcmp(argv[argc - 1], "--broken") == 0;
    return idem::contract::run(context, context.broken ? argc - 1 : argc, argv);
}
CPP
# shellcheck disable=SC2046
"$cxx" -std=c++20 "${flags[@]}" "$dest/contract.cpp" $(pkg-config --cflags --libs idem-contract idem-memory) -o "$dest/contract"
report=$(LD_LIBRARY_PATH=$libdir "$dest/contract" --no-colors) || { echo "$report"; echo "the contract suite failed"; exit 1; }
summary=$(grep -E "test cases: +[0-9]+ \| +[0-9]+ passed \| +0 failed" <<<"$report") ||
    { echo "$report"; echo "no passing summary"; exit 1; }
ran=$(sed -E 's/.*test cases: +([0-9]+) .*/\1/' <<<"$summary")
[ "$ran" -ge 15 ] || { echo "$report"; echo "only $ran scenarios ran"; exit 1; }
grep -q "joins_transactions: the store joins no transaction" <<<"$report" ||
    { echo "$report"; echo "the traits did not pick the scenarios"; exit 1; }
if LD_LIBRARY_PATH=$libdir "$dest/contract" --no-colors --broken >"$dest/broken.txt"; then
    cat "$dest/broken.txt"; echo "the contract suite passed a store that forgets fingerprints"; exit 1
fi
grep -q "fingerprint_mismatch" "$dest/broken.txt" || { cat "$dest/broken.txt"; echo "no mismatch failure named"; exit 1; }
echo "installed contract suite against the memory store: $ran scenarios passed; a broken store fails it"

# The SQL-store contract suite, installed, run against the SQLite store on a
# file of the consumer's, through idem-sql-contract and idem-sqlite alone.
# With --broken, the store writes its records through its own connection
# instead of the caller's transaction (the record no longer commits or rolls
# back with the business rows): the suite must catch it.
if pkg-config --exists idem-sql-contract idem-sqlite; then
  cat >"$dest/sql_contract.cpp" <<'CPP'
#include <idem/sql_contract.hpp>
#include <idem/sqlite_store.hpp>
#include <cstring>
#include <future>
using idem::duration;
// Runs f on a thread of its own: the store's connection there joins no open transaction.
template <class F> auto elsewhere(F f) { return std::async(std::launch::async, f).get(); }
struct own_connection_store final : idem::transactional_record_store {
    std::shared_ptr<idem::sqlite_store> inner;
    explicit own_connection_store(std::shared_ptr<idem::sqlite_store> s) : inner(std::move(s)) {}
    idem::store_traits traits() const noexcept override { return inner->traits(); }
    idem::reservation do_try_reserve(const idem::record_key& k, std::string_view fp, duration d) override {
        return inner->try_reserve(k, fp, d);
    }
    bool do_complete(const idem::record_key& k, std::string_view t, std::string_view fp, std::string_view p,
                     duration d, duration r) override { return inner->complete(k, t, fp, p, d, r); }
    bool do_release(const idem::record_key& k, std::string_view t) override { return inner->release(k, t); }
    std::size_t do_purge_expired(std::size_t limit) override { return inner->purge_expired(limit); }
    // The defect: the caller's transaction is ignored, the record written through the store's own connection.
    idem::reservation do_try_reserve_in(idem::unit_of_work&, const idem::record_key& k, std::string_view fp,
                                        duration d) override {
        return elsewhere([&] { return do_try_reserve(k, fp, d); });
    }
    bool do_complete_in(idem::unit_of_work&, const idem::record_key& k, std::string_view t, std::string_view fp,
                        std::string_view p, duration d, duration r) override {
        return elsewhere([&] { return do_complete(k, t, fp, p, d, r); });
    }
    bool do_release_in(idem::unit_of_work&, const idem::record_key& k, std::string_view t) override {
        return elsewhere([&] { return do_release(k, t); });
    }
};
struct sqlite_context final : idem::contract::sql_store_context {
    std::string path;
    bool broken = false;
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    explicit sqlite_context(std::string p) : path(std::move(p)) {}
    std::string name() const override { return "sqlite, installed"; }
    std::shared_ptr<idem::transactional_record_store> make_store() override {
        // A short busy timeout: the broken store's own connection waits for the caller's lock.
        auto store = std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{
            .path = path, .connection = {.busy_timeout = std::chrono::milliseconds(200)}, .time = clock});
        if (broken) return std::make_shared<own_connection_store>(store);
        return store;
    }
    void connect(soci::session& session) override { idem::open_sqlite_session(session, path); }
    void advance(idem::duration by) override { clock->advance(by); }
};
int main(int argc, char** argv) {
    const bool broken = std::strcmp(argv[argc - 1], "--broken") == 0;
    if (broken) --argc;
    sqlite_context context(argv[--argc]);  // the database file comes last (before --broken)
    context.broken = broken;
    return idem::contract::run_sql(context, argc, argv);
}
CPP
  # shellcheck disable=SC2046
  "$cxx" -std=c++20 "${flags[@]}" "$dest/sql_contract.cpp" $(pkg-config --cflags --libs idem-sql-contract idem-sqlite) \
    -o "$dest/sql_contract"
  report=$(LD_LIBRARY_PATH=$libdir "$dest/sql_contract" --no-colors "$dest/sql_contract.db") ||
      { echo "$report"; echo "the SQL contract suite failed"; exit 1; }
  summary=$(grep -E "test cases: +[0-9]+ \| +[0-9]+ passed \| +0 failed" <<<"$report") ||
      { echo "$report"; echo "no passing summary"; exit 1; }
  ran=$(sed -E 's/.*test cases: +([0-9]+) .*/\1/' <<<"$summary")
  [ "$ran" -ge 15 ] || { echo "$report"; echo "only $ran SQL scenarios ran"; exit 1; }
  grep -q "refusals: the context injects no failures" <<<"$report" ||
      { echo "$report"; echo "the context's choices did not pick the scenarios"; exit 1; }
  if LD_LIBRARY_PATH=$libdir "$dest/sql_contract" --no-colors "$dest/broken.db" --broken >"$dest/sql_broken.txt"; then
      cat "$dest/sql_broken.txt"; echo "the SQL contract suite passed a store that ignores the caller's transaction"; exit 1
  fi
  failed=$(grep -E "test cases: .* \| +[1-9][0-9]* failed" "$dest/sql_broken.txt") ||
      { cat "$dest/sql_broken.txt"; echo "the broken store's run ended without failed scenarios"; exit 1; }
  grep -q "a rollback after complete leaves no record" "$dest/sql_broken.txt" ||
      { cat "$dest/sql_broken.txt"; echo "the rollback scenario did not catch the broken store"; exit 1; }
  echo "installed SQL contract suite against the SQLite store: $ran scenarios passed; a store that ignores the caller's transaction fails it ($failed)"
fi
