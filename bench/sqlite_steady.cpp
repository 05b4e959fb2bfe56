// SQLite at steady state: random transfers among 100,000 accounts, the ledger
// and the record table prefilled, WAL at synchronous FULL and NORMAL, one
// writer (SQLite has one). Each level times, in alternating rounds: the bare
// transfer; idem inside the transaction; the same guarantee written by hand
// (the reserve, the work, the completion); and the candidate floors, one write
// per record: a lookup (a retry is answered before any work), the work, then
// the completed record, on idem's table, on the same without its expires_at
// index, on a lean rowid table with a unique
// 16-byte digest index, and on a lean WITHOUT ROWID table. The lean tables
// carry no names and no expires_at index (purge goes by rowid or creation order).
// All of it on files of 4 KiB pages (SQLite's default), 1 KiB and 16 KiB.
#include <filesystem>
#include <memory>

#include <soci/soci.h>

#include "bench.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "sqlite_api.hpp"
#include "sqlite_transfer.hpp"
#include "steady_state.hpp"
#include "steady_tables.hpp"

namespace idem::bench {
namespace {

void prefill(sqlite3* db, std::size_t rows) {
    const std::string n = std::to_string(rows);
    const std::string series = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + n + ") ";
    // Creation times one per row over the last day, in insertion order; retention one day.
    const std::string now = "(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))";
    // A cache that holds the tables while they fill: random keys would otherwise
    // read a page from the file for nearly every row.
    exec(db, "PRAGMA cache_size = -524288");
    exec(db, "BEGIN");
    sqlite_transfer::create_tables(db, rows);
    exec(db, series +
                 "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, "
                 "expires_at, updated_at) SELECT randomblob(16), 'bench.transfer', 'fp', "
                 "'token', 1, 'ok', " +
                 now + " + i * 86400000 / " + n + ", " + now + " - 86400000 + i * 86400000 / " + n + " FROM n");
    exec(db,
         "CREATE TABLE bench_lean_rowid (key_hash BLOB NOT NULL, fingerprint BLOB NOT NULL, token BLOB NOT NULL, "
         "state INTEGER NOT NULL, payload BLOB, expires_at INTEGER NOT NULL, created_at INTEGER NOT NULL)");
    exec(db, "CREATE UNIQUE INDEX bench_lean_rowid_key ON bench_lean_rowid (key_hash)");
    exec(db,
         "CREATE TABLE bench_lean_norowid (key_hash BLOB PRIMARY KEY, fingerprint BLOB NOT NULL, "
         "token BLOB NOT NULL, state INTEGER NOT NULL, payload BLOB, expires_at INTEGER NOT NULL, "
         "created_at INTEGER NOT NULL) WITHOUT ROWID");
    // idem's columns and key, without the expires_at index: what the index alone costs.
    exec(db,
         "CREATE TABLE bench_unindexed (key_hash BLOB PRIMARY KEY, namespace TEXT NOT NULL, "
         "fingerprint BLOB NOT NULL, token TEXT NOT NULL, state INTEGER NOT NULL, payload BLOB, "
         "expires_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID");
    exec(db, series +
                 "INSERT INTO bench_unindexed SELECT randomblob(16), 'bench.transfer', 'fp', "
                 "'token', 1, 'ok', " +
                 now + " + i * 86400000 / " + n + ", " + now + " - 86400000 + i * 86400000 / " + n + " FROM n");
    for (const char* table : {"bench_lean_rowid", "bench_lean_norowid"})
        exec(db, series + "INSERT INTO " + table + " SELECT randomblob(16), 'fp', 'token', 1, 'ok', " + now +
                     " + i * 86400000 / " + n + ", " + now + " - 86400000 + i * 86400000 / " + n + " FROM n");
    exec(db, "COMMIT");
    exec(db, "ANALYZE");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    exec(db, "PRAGMA cache_size = -2000");  // SQLite's default again
}

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The connection the application writes through, and the statements it prepared on it.
struct bank {
    std::shared_ptr<sqlite_store> store;
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    sqlite3* db;
    sqlite_transfer work;
    statement reserve, complete, lookup, insert_completed, unindexed_lookup, unindexed_insert, lean_rowid_lookup,
        lean_rowid_insert, lean_norowid_lookup, lean_norowid_insert;

    bank(const std::string& path, sqlite_synchronous sync)
        : store(
              std::make_shared<sqlite_store>(sqlite_store_options{.path = path, .connection = {.synchronous = sync}})),
          db(open(session, path, sync)),
          work(db),
          reserve(db,
                  "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, "
                  "expires_at, updated_at) VALUES (?1, 'bench.transfer', 'fp', 'token', 0, NULL, "
                  "?2 + 60000, ?2) ON CONFLICT DO NOTHING RETURNING 1"),
          complete(db,
                   "UPDATE idem_records SET state = 1, payload = 'ok', expires_at = ?2 + 86400000, updated_at = ?2 "
                   "WHERE key_hash = ?1 AND token = 'token' AND state = 0"),
          lookup(db, "SELECT state, fingerprint, payload FROM idem_records WHERE key_hash = ?1 AND expires_at > ?2"),
          insert_completed(db,
                           "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, "
                           "payload, expires_at, updated_at) VALUES (?1, 'bench.transfer', 'fp', "
                           "'token', 1, 'ok', ?2 + 86400000, ?2)"),
          unindexed_lookup(db,
                           "SELECT state, fingerprint, payload FROM bench_unindexed WHERE key_hash = ?1 "
                           "AND expires_at > ?2"),
          unindexed_insert(db,
                           "INSERT INTO bench_unindexed (key_hash, namespace, fingerprint, token, "
                           "state, payload, expires_at, updated_at) VALUES (?1, 'bench.transfer', "
                           "'fp', 'token', 1, 'ok', ?2 + 86400000, ?2)"),
          lean_rowid_lookup(db,
                            "SELECT state, fingerprint, payload FROM bench_lean_rowid WHERE key_hash = ?1 "
                            "AND expires_at > ?2"),
          lean_rowid_insert(db,
                            "INSERT INTO bench_lean_rowid (key_hash, fingerprint, token, state, payload, "
                            "expires_at, created_at) VALUES (?1, 'fp', 'token', 1, 'ok', ?2 + 86400000, ?2)"),
          lean_norowid_lookup(db,
                              "SELECT state, fingerprint, payload FROM bench_lean_norowid WHERE key_hash = ?1 "
                              "AND expires_at > ?2"),
          lean_norowid_insert(db,
                              "INSERT INTO bench_lean_norowid (key_hash, fingerprint, token, state, payload, "
                              "expires_at, created_at) VALUES (?1, 'fp', 'token', 1, 'ok', ?2 + 86400000, ?2)") {
        runner = std::make_unique<transaction_runner>(session);
    }

private:
    static sqlite3* open(soci::session& s, const std::string& path, sqlite_synchronous sync) {
        open_sqlite_session(s, path, {.synchronous = sync});
        return native(s);
    }
};

std::uint64_t next_transfer = 0;

// execute_in_transaction: by default the lookup, the work and one INSERT;
// `reserve_first` as before the one-statement form (reserve, work, complete).
void idem_inside(bank& b, executor& exec, std::uint64_t id, bool reserve_first = false) {
    require_executed(idem::detail::execute_in_transaction(
        exec, *b.runner, transfer_key(id), "fp", {.reserve_first = reserve_first},
        [&](unit_of_work&) {
            b.work.transfer(id);
            return std::string("ok");
        },
        string_codec{}));
}

void reserve_first(bank& b, std::uint64_t id) {
    const record_key key = transfer_key(id);
    const std::int64_t now = now_ms();
    b.work.begin.run();
    if (b.reserve.bind(1, key.digest().data(), 16).bind(2, now).run() != 1)
        throw std::logic_error("a fresh key was not reserved");
    b.work.transfer(id);
    b.complete.bind(1, key.digest().data(), 16).bind(2, now_ms()).run();
    b.work.commit.run();
}

// A lookup (a retry replays before any work), the work, one INSERT of the completed record.
void one_write(bank& b, statement& lookup, statement& insert, std::uint64_t id) {
    const record_key key = transfer_key(id);
    const std::int64_t now = now_ms();
    b.work.begin.run();
    if (lookup.bind(1, key.digest().data(), 16).bind(2, now).run() != 0)
        throw std::logic_error("a fresh key was found");
    b.work.transfer(id);
    insert.bind(1, key.digest().data(), 16).bind(2, now_ms()).run();
    b.work.commit.run();
}

const char* level_name(sqlite_synchronous s) {
    return s == sqlite_synchronous::full ? "FULL" : "NORMAL";
}

// A new file whose pages are `page_size` bytes: set before its first table,
// and before WAL mode, which fixes it.
void create_with_page_size(const std::string& path, int page_size) {
    sqlite3* db = nullptr;
    if (sqlite_api::sqlite3_open(path.c_str(), &db) != SQLITE_OK)
        throw std::runtime_error("bench: cannot create " + path);
    try {
        exec(db, "PRAGMA page_size = " + std::to_string(page_size) +
                     "; CREATE TABLE page_size_probe (x); "
                     "DROP TABLE page_size_probe");
    } catch (...) {
        sqlite_api::sqlite3_close(db);
        throw;
    }
    sqlite_api::sqlite3_close(db);
}

// Both levels on a file of `page_size` bytes a page.
void run_at_page_size(const options& o, report& out, int page_size) {
    // One file for both levels: the synchronous level belongs to the connection.
    const std::string path =
        (std::filesystem::path(o.sqlite_dir) / ("steady-" + std::to_string(page_size) + ".db")).string();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    {
        const auto started = std::chrono::steady_clock::now();
        create_with_page_size(path, page_size);
        (void)sqlite_store(sqlite_store_options{.path = path});  // creates idem_records
        soci::session s;
        open_sqlite_session(s, path, {.synchronous = sqlite_synchronous::off});
        prefill(native(s), o.steady_rows);
        std::fprintf(stderr, "prefilled %zu rows in %.0f s\n", o.steady_rows,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    next_transfer = o.steady_rows + 1;
    const std::string pages = page_size == 4096 ? "" : ", " + std::to_string(page_size / 1024) + " KiB pages";
    for (const auto sync : {sqlite_synchronous::full, sqlite_synchronous::normal}) {
        bank b(path, sync);
        executor exec(b.store);
        const auto timed = [&](std::function<void(std::uint64_t)> op) {
            return [&, op = std::move(op)] { return measure([&](std::uint64_t) { op(next_transfer++); }, o.span); };
        };
        const std::vector<std::function<double()>> subjects{
            timed([&](std::uint64_t id) { b.work.bare(id); }),
            timed([&](std::uint64_t id) { idem_inside(b, exec, id); }),
            timed([&](std::uint64_t id) { idem_inside(b, exec, id, true); }),
            timed([&](std::uint64_t id) { reserve_first(b, id); }),
            timed([&](std::uint64_t id) { one_write(b, b.lookup, b.insert_completed, id); }),
            timed([&](std::uint64_t id) { one_write(b, b.unindexed_lookup, b.unindexed_insert, id); }),
            timed([&](std::uint64_t id) { one_write(b, b.lean_rowid_lookup, b.lean_rowid_insert, id); }),
            timed([&](std::uint64_t id) { one_write(b, b.lean_norowid_lookup, b.lean_norowid_insert, id); }),
        };
        const std::vector<double> rates = compare_all(subjects, o.rounds);
        const char* names[] = {"bare",
                               "idem",
                               "idem-reserve-first",
                               "hand",
                               "hand-one-write",
                               "unindexed-one-write",
                               "lean-rowid",
                               "lean-without-rowid"};
        for (std::size_t v = 1; v < rates.size(); ++v)
            out.add({.group = "sqlite-steady",
                     .name = std::string("WAL, synchronous=") + level_name(sync) + ", 1 client" + pages,
                     .subject = names[v],
                     .baseline = "bare",
                     .result = {{rates[v], 1e9 / rates[v]}, {rates[0], 1e9 / rates[0]}},
                     .unit = "transfers/s",
                     .note = std::to_string(o.steady_rows) + " rows"});
    }
}

}  // namespace

void prefill_sqlite_steady(soci::session& s, std::size_t rows) {
    prefill(native(s), rows);
}

void run_sqlite_steady(const options& o, report& out) {
    // SQLite's default page size, then smaller and larger pages: a random
    // insertion dirties a leaf, and at NORMAL a commit writes each dirty page to the WAL whole.
    for (const int page_size : {4096, 1024, 16384}) run_at_page_size(o, out, page_size);
}

}  // namespace idem::bench
