// SQLite without the expires_at index, at the sizes SQLite files reach: one
// file filled as a retention window leaves it (--rows completed records in
// random key order, the oldest --expired of them past their retention, 100-byte
// payloads; as many ledger lines; 100,000 accounts), then copied, and the
// copy's expires_at index dropped. On each file: the transfer through idem
// against the bare transfer, at FULL and NORMAL, in alternating rounds. Then
// the purge of the expired rows while one thread reserves and completes fresh
// keys (against the same traffic alone): through the index (idem::purge) on
// the first file; on the copy by a cursor over the primary key kept in the
// file, each batch reading up to 1000 expired keys going round the table from
// it without the write lock, then deleting them and moving it on in one short
// write transaction.
#include <filesystem>
#include <memory>
#include <thread>

#include "bench.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "idem/purge.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "purge_bench.hpp"
#include "sqlite_api.hpp"
#include "sqlite_transfer.hpp"
#include "steady_state.hpp"

namespace idem::bench {
namespace {

using steady = std::chrono::steady_clock;

double seconds_since(steady::time_point start) {
    return std::chrono::duration<double>(steady::now() - start).count();
}

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string fixed(double v, int digits = 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", digits, v);
    return text;
}

// The records in random key order (a B-tree grown by random insertions), the
// oldest `expired` a day past their retention, the others written within the
// last hours; the index built afterwards. The ledger in transfer order.
void fill(const std::string& path, std::size_t rows, std::size_t expired) {
    (void)sqlite_store(sqlite_store_options{.path = path});  // idem's schema
    soci::session s;
    open_sqlite_session(s, path, {.synchronous = sqlite_synchronous::off});
    sqlite3* db = native(s);
    const std::string n = std::to_string(rows), old = std::to_string(expired), now = std::to_string(now_ms());
    const std::string series = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + n + ") ";
    exec(db, "PRAGMA cache_size = -4194304");  // 4 GiB: random keys would otherwise read a page per row
    exec(db, "BEGIN");
    sqlite_transfer::create_tables(db, rows);
    exec(db, "DROP INDEX idem_records_expires_at");
    exec(db, series +
                 "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, "
                 "updated_at) SELECT randomblob(16), 'payments.transfer', randomblob(32), lower(hex(randomblob(16))), "
                 "1, randomblob(100), e, e - 86400000 FROM (SELECT CASE WHEN i <= " +
                 old + " THEN " + now + " - 86400000 + i ELSE " + now + " + 82800000 + i END AS e FROM n)");
    exec(db, "CREATE INDEX idem_records_expires_at ON idem_records (expires_at)");
    exec(db, "COMMIT");
    exec(db, "ANALYZE");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
}

// The purge on a file without the index: a cursor over the primary key. A
// batch reads up to `limit` expired keys going round the table from the
// cursor, without the write lock, then deletes them and moves the cursor on in
// one short write transaction; fewer than `limit` means it went all the way round.
class cursor_purge {
public:
    explicit cursor_purge(const std::string& path) {
        open_sqlite_session(session_, path);
        db_ = native(session_);
        exec(db_,
             "CREATE TABLE IF NOT EXISTS idem_purge_cursor (id INTEGER PRIMARY KEY CHECK (id = 1), "
             "after BLOB NOT NULL); INSERT OR IGNORE INTO idem_purge_cursor VALUES (1, x'')");
        read_ = std::make_unique<statement>(db_, "BEGIN");
        write_ = std::make_unique<statement>(db_, "BEGIN IMMEDIATE");
        commit_ = std::make_unique<statement>(db_, "COMMIT");
        cursor_ = std::make_unique<statement>(db_, "SELECT after FROM idem_purge_cursor");
        after_ = std::make_unique<statement>(db_,
                                             "SELECT key_hash FROM idem_records WHERE key_hash > ?1 AND "
                                             "expires_at <= ?2 ORDER BY key_hash LIMIT ?3");
        before_ = std::make_unique<statement>(db_,
                                              "SELECT key_hash FROM idem_records WHERE key_hash <= ?1 AND "
                                              "expires_at <= ?2 ORDER BY key_hash LIMIT ?3");
        remove_ = std::make_unique<statement>(db_, "DELETE FROM idem_records WHERE key_hash = ?1 AND expires_at <= ?2");
        move_ = std::make_unique<statement>(db_, "UPDATE idem_purge_cursor SET after = ?1");
    }

    std::size_t batch(std::size_t limit, duration older_than) {
        const std::int64_t cutoff = now_ms() - std::chrono::ceil<std::chrono::milliseconds>(older_than).count();
        std::vector<std::string> keys;
        read_->run();
        std::string from;
        if (cursor_->step()) from = cursor_->blob(0);
        cursor_->reset();
        collect(*after_, from, cutoff, limit, keys);
        if (keys.size() < limit) collect(*before_, from, cutoff, limit - keys.size(), keys);  // round from the start
        commit_->run();
        write_->run();
        std::size_t deleted = 0;
        for (const std::string& key : keys) {
            remove_->bind(1, key.data(), key.size()).bind(2, cutoff).run();
            deleted += static_cast<std::size_t>(sqlite_api::sqlite3_changes(db_));
        }
        const std::string& next = keys.size() == limit ? keys.back() : from;  // all the way round: stays
        move_->bind(1, next.data(), next.size()).run();
        commit_->run();
        return deleted;
    }

private:
    static void collect(statement& scan, const std::string& from, std::int64_t cutoff, std::size_t limit,
                        std::vector<std::string>& keys) {
        scan.bind(1, from.data(), from.size()).bind(2, cutoff).bind(3, static_cast<std::int64_t>(limit));
        while (scan.step()) keys.push_back(scan.blob(0));
    }

    soci::session session_;
    sqlite3* db_ = nullptr;
    std::unique_ptr<statement> read_, write_, commit_, cursor_, after_, before_, remove_, move_;
};

// One file's store, executor and the bare transfer's statements, at one synchronous level.
struct file_bank {
    std::shared_ptr<sqlite_store> store;
    executor exec;
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    sqlite_transfer work;

    file_bank(const std::string& path, sqlite_synchronous sync)
        : store(
              std::make_shared<sqlite_store>(sqlite_store_options{.path = path, .connection = {.synchronous = sync}})),
          exec(store),
          work(open(session, path, sync)) {
        runner = std::make_unique<transaction_runner>(session);
    }

    void with_idem(std::uint64_t id) {
        require_executed(idem::detail::execute_in_transaction(
            exec, *runner, transfer_key(id), "fp", {},
            [&](unit_of_work&) {
                work.transfer(id);
                return std::string("ok");
            },
            string_codec{}));
    }

private:
    static sqlite3* open(soci::session& s, const std::string& path, sqlite_synchronous sync) {
        open_sqlite_session(s, path, {.synchronous = sync});
        return native(s);
    }
};

// Purges `expired` of `rows` records by `batch` (`how`) while reservations run,
// against the same traffic alone.
void timed_purge(report& out, std::size_t expired, std::size_t rows, const std::string& how,
                 record_store& traffic_store, const std::function<std::size_t(std::size_t, duration)>& batch) {
    std::atomic<bool> stop_alone{false};
    std::vector<double> alone;
    std::thread quiet([&] { alone = reserve_latencies(traffic_store, stop_alone, "alone"); });
    std::this_thread::sleep_for(std::chrono::seconds(5));
    stop_alone = true;
    quiet.join();

    std::vector<double> batch_ms;
    const auto timed = [&](std::size_t limit, duration older_than) {
        const auto start = steady::now();
        const std::size_t n = batch(limit, older_than);
        batch_ms.push_back(seconds_since(start) * 1000);
        return n;
    };
    std::atomic<bool> stop{false};
    std::vector<double> during;
    std::thread traffic([&] { during = reserve_latencies(traffic_store, stop, "during"); });
    const purge_result purged = purge_batches(timed, {.batch = 1000});
    stop = true;
    traffic.join();
    // A run with nothing left to purge: what every scheduled run pays at least.
    const auto idle_start = steady::now();
    (void)purge_batches(batch, {.batch = 1000});
    const double idle_ms = seconds_since(idle_start) * 1000;

    double working_ms = 0;
    for (double ms : batch_ms) working_ms += ms;
    const double wall_s = std::chrono::duration<double>(purged.elapsed).count();
    const latency with = percentiles(during), without = percentiles(alone);
    const latency batches = percentiles(batch_ms);  // milliseconds, in fields named for microseconds
    const double deleted = static_cast<double>(purged.deleted);
    out.add({.group = "sqlite-layout",
             .name = "purge " + std::to_string(expired) + " expired of " + std::to_string(rows) + " rows, " + how,
             .subject = "reserve+complete latency during purge",
             .baseline = "the same traffic without purge",
             .result = {{1e6 / with.p50_us, with.p50_us * 1000}, {1e6 / without.p50_us, without.p50_us * 1000}},
             .unit = "ops/s (1/p50)",
             .note = std::to_string(purged.deleted) + " rows: " + fixed(deleted / wall_s) + " rows/s with its rests (" +
                     fixed(wall_s, 1) + " s), " + fixed(deleted / (working_ms / 1000)) +
                     " rows/s while deleting; batch p50/p99 " + fixed(batches.p50_us, 1) + "/" +
                     fixed(batches.p99_us, 1) + " ms; a run with nothing to purge " + fixed(idle_ms, 1) +
                     " ms; reserve p50/p99 " + fixed(with.p50_us) + "/" + fixed(with.p99_us) + " us during vs " +
                     fixed(without.p50_us) + "/" + fixed(without.p99_us) + " us without"});
}

}  // namespace

void run_sqlite_layout(const options& o, report& out) {
    const std::size_t rows = o.steady_rows, expired = o.expired_rows ? o.expired_rows : rows / 10;
    if (expired > rows) throw std::invalid_argument("--expired exceeds --rows");
    const std::filesystem::path dir(o.sqlite_dir);
    const std::string indexed = (dir / "layout-indexed.db").string(), cursor = (dir / "layout-cursor.db").string();
    for (const std::string& path : {indexed, cursor})
        for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    const auto filling = steady::now();
    fill(indexed, rows, expired);
    std::filesystem::copy_file(indexed, cursor);
    {
        soci::session s;
        open_sqlite_session(s, cursor, {.synchronous = sqlite_synchronous::off});
        exec(native(s), "DROP INDEX idem_records_expires_at");
    }
    std::fprintf(stderr, "filled %zu rows (%zu expired) in %.0f s, %ju bytes\n", rows, expired, seconds_since(filling),
                 static_cast<std::uintmax_t>(std::filesystem::file_size(indexed)));

    std::uint64_t next = rows + 1;
    for (const auto sync : {sqlite_synchronous::full, sqlite_synchronous::normal}) {
        file_bank a(indexed, sync), b(cursor, sync);
        const auto timed = [&](file_bank& bank, bool idem) {
            return [&, idem] {
                return measure([&](std::uint64_t) { idem ? bank.with_idem(next++) : bank.work.bare(next++); }, o.span);
            };
        };
        const std::vector<double> rates =
            compare_all({timed(a, false), timed(a, true), timed(b, false), timed(b, true)}, o.rounds);
        const std::string config = std::string("WAL, synchronous=") +
                                   (sync == sqlite_synchronous::full ? "FULL" : "NORMAL") + ", " +
                                   std::to_string(rows) + " rows";
        for (const std::size_t at : {std::size_t{0}, std::size_t{2}})
            out.add({.group = "sqlite-layout",
                     .name = config,
                     .subject = at == 0 ? "idem" : "idem, no expires_at index",
                     .baseline = "bare",
                     .result = {{rates[at + 1], 1e9 / rates[at + 1]}, {rates[at], 1e9 / rates[at]}},
                     .unit = "transfers/s"});
    }

    const sqlite_connection_options normal{.synchronous = sqlite_synchronous::normal};
    {
        sqlite_store store({.path = indexed, .connection = normal});
        timed_purge(out, expired, rows, "by the expires_at index", store,
                    [&](std::size_t limit, duration older_than) { return store.purge_batch(limit, older_than); });
    }
    sqlite_store store({.path = cursor, .connection = normal});
    cursor_purge purger(cursor);
    timed_purge(out, expired, rows, "by a cursor over the primary key", store,
                [&](std::size_t limit, duration older_than) { return purger.batch(limit, older_than); });
}

}  // namespace idem::bench
