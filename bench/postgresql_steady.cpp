// PostgreSQL at steady state: random transfers among 100,000 accounts, the
// ledger and the record table prefilled, 1 to 16 clients, synchronous_commit on
// and off. Each configuration times, in alternating rounds: the bare transfer;
// idem's fast path (the one-statement form, and reserve_first); the same
// guarantee written by hand (the reserve with BEGIN, the completion with
// COMMIT), on idem's table and on the first schema's (32-byte key, the key's
// text, full pages); and the completed record inserted with COMMIT after the
// work (idem's form by hand), on idem's table and on a leaner one (no
// namespace, no expires_at B-tree, fillfactor 90, so a completion is a HOT update).
#include <atomic>
#include <memory>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/postgresql_store.hpp"
#include "idem/transaction_runner.hpp"
#include "pq.hpp"
#include "steady_state.hpp"
#include "steady_tables.hpp"

namespace idem::bench {
namespace {

PGconn* native(soci::session& s) {
    return static_cast<soci::postgresql_session_backend*>(s.get_backend())->conn_;
}

// The tables, filled as years of use would leave them: a ledger line and a
// completed record per past transfer, their creation times in insertion order.
void prefill(PGconn* conn, std::size_t rows) {
    const std::string n = std::to_string(rows);
    const std::string series = " FROM (SELECT i, now() - interval '1 day' * (1 - i::float8 / " + n +
                               ") AS at FROM generate_series(1, " + n + ") AS i) AS s";
    pq::execute(conn, "DROP TABLE IF EXISTS bench_accounts, bench_ledger, bench_first_records, bench_lean_records");
    pq::execute(conn, "CREATE TABLE bench_accounts (id bigint PRIMARY KEY, balance bigint NOT NULL)");
    pq::execute(conn, "INSERT INTO bench_accounts SELECT i, 1000000000 FROM generate_series(1, 100000) AS i");
    pq::execute(conn, "CREATE TABLE bench_ledger (transfer_id bigint PRIMARY KEY, amount bigint NOT NULL)");
    pq::execute(conn, ("INSERT INTO bench_ledger SELECT i, 1 FROM generate_series(1, " + n + ") AS i").c_str());
    pq::execute(conn, "TRUNCATE idem_records");
    pq::execute(conn, ("INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, completed, "
                       "created_at, expires_at) SELECT substring(sha256(int8send(i)) FROM 1 FOR 16), "
                       "'bench.transfer', '\\x0123456789abcdef', 'fp', 'ok', true, at, at + interval '1 day'" +
                       series)
                          .c_str());
    // The first schema's layout (migrations/postgresql/0001): the 32-byte key,
    // the key's text in each row, the expires_at index, full pages.
    pq::execute(conn,
                "CREATE TABLE bench_first_records (key_hash bytea PRIMARY KEY, namespace text NOT NULL, "
                "scope text NOT NULL, key text NOT NULL, token bytea NOT NULL, fingerprint bytea NOT NULL, "
                "payload bytea, completed boolean NOT NULL, created_at timestamptz NOT NULL, "
                "expires_at timestamptz NOT NULL)");
    pq::execute(conn, ("INSERT INTO bench_first_records SELECT sha256(int8send(i)), 'bench.transfer', 'global', "
                       "'p-' || i, '\\x0123456789abcdef', 'fp', 'ok', true, at, at + interval '1 day'" +
                       series)
                          .c_str());
    pq::execute(conn, "CREATE INDEX bench_first_records_expires_at ON bench_first_records (expires_at)");
    // The leanest: no namespace, no expires_at B-tree (a BRIN on creation time),
    // pages kept 10% free, so that a completion is a HOT update.
    pq::execute(conn,
                "CREATE TABLE bench_lean_records (key_hash bytea PRIMARY KEY, token bytea NOT NULL, "
                "fingerprint bytea NOT NULL, payload bytea, completed boolean NOT NULL, "
                "created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL) WITH (fillfactor = 90)");
    pq::execute(conn, ("INSERT INTO bench_lean_records SELECT substring(sha256(int8send(i)) FROM 1 FOR 16), "
                       "'\\x0123456789abcdef', 'fp', 'ok', true, at, at + interval '1 day'" +
                       series)
                          .c_str());
    pq::execute(conn, "CREATE INDEX bench_lean_records_created_at ON bench_lean_records USING brin (created_at)");
    pq::execute(conn, "VACUUM ANALYZE");
    pq::execute(conn, "CHECKPOINT");
}

// What every variant prepares on its connection. Each record table has the
// same four statements, all keyed by $1, the digest (as long as the table's).
// The inserts take on the first schema's table $2 the key's text, then the
// token and the payload; the completion $2 the token, $3 the payload.
void prepare_statements(PGconn* conn) {
    pq::prepare(conn, "s_begin", "BEGIN");
    pq::prepare(conn, "s_commit", "COMMIT");
    pq::prepare(conn, "s_debit", "UPDATE bench_accounts SET balance = balance - 1 WHERE id = $1::bigint");
    pq::prepare(conn, "s_credit", "UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1::bigint");
    pq::prepare(conn, "s_ledger", "INSERT INTO bench_ledger (transfer_id, amount) VALUES ($1::bigint, 1)");
    struct table {
        const char* prefix;
        const char* name;
        const char* columns;  // after key_hash
        const char* values;   // after $1, up to the token
        const char* token;    // the token's parameter, the payload's next
        const char* payload;
    };
    for (const table& t : {table{"s_", "idem_records", "namespace", "'bench.transfer'", "$2", "$3"},
                           table{"s_first_", "bench_first_records", "namespace, scope, key",
                                 "'bench.transfer', 'global', $2", "$3", "$4"},
                           table{"s_lean_", "bench_lean_records", "", "", "$2", "$3"}}) {
        const std::string p = t.prefix, name = t.name, tok = t.token, pay = t.payload;
        const std::string columns = name + " (key_hash, " + (*t.columns ? std::string(t.columns) + ", " : "") +
                                    "token, fingerprint, payload, completed, created_at, expires_at)";
        const std::string head = "VALUES ($1, " + (*t.values ? std::string(t.values) + ", " : "") + tok + ", 'fp', ";
        pq::prepare(conn, (p + "reserve").c_str(),
                    "INSERT INTO " + columns + " " + head +
                        "NULL, false, now(), now() + interval '1 minute') "
                        "ON CONFLICT DO NOTHING RETURNING 1");
        pq::prepare(conn, (p + "complete").c_str(),
                    "UPDATE " + name +
                        " SET payload = $3, completed = true, expires_at = now() + "
                        "interval '1 day' WHERE key_hash = $1 AND token = $2 AND NOT completed");
        pq::prepare(conn, (p + "lookup").c_str(),
                    "SELECT completed, fingerprint, payload FROM " + name + " WHERE key_hash = $1");
        pq::prepare(conn, (p + "insert_completed").c_str(),
                    "INSERT INTO " + columns + " " + head + pay + ", true, now(), now() + interval '1 day')");
    }
}

// One client: its own connection, for idem (through a runner) and by hand alike.
struct client {
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    PGconn* conn;
    std::mt19937_64 rng;
    std::string token = std::string(16, '\0');

    client(const std::string& conninfo, std::uint64_t seed) : rng(seed) {
        open_postgresql_session(session, conninfo);
        runner = std::make_unique<transaction_runner>(session);
        conn = native(session);
        prepare_statements(conn);
    }

    // The business statements of one transfer, inside an open transaction.
    void transfer(std::uint64_t id) {
        const auto [from, to] = account_pair(rng);
        pq::run(conn, "s_debit", pq::values().text(std::to_string(from)));
        pq::run(conn, "s_credit", pq::values().text(std::to_string(to)));
        pq::run(conn, "s_ledger", pq::values().text(std::to_string(id)));
    }

    const std::string& fresh_token() { return fill_random(rng, token); }
};

std::atomic<std::uint64_t> next_transfer{0};

// A record table the hand-written variants write to: its statements, the
// digest's length and whether rows carry the key's text.
struct layout {
    const char* reserve;
    const char* complete;
    const char* insert_completed;
    const char* lookup;
    std::size_t digest_size;
    bool named;
};
constexpr layout current{"s_reserve", "s_complete", "s_insert_completed", "s_lookup", 16, false};
constexpr layout first_schema{
    "s_first_reserve", "s_first_complete", "s_first_insert_completed", "s_first_lookup", 32, true};
constexpr layout lean{"s_lean_reserve", "s_lean_complete", "s_lean_insert_completed", "s_lean_lookup", 16, false};

void bare(client& c, std::uint64_t id) {
    pq::run(c.conn, "s_begin");
    c.transfer(id);
    pq::run(c.conn, "s_commit");
}

// By default the lookup with BEGIN, the work, the completed record with COMMIT;
// `reserve_first` as before the one-statement form (reserve, work, complete).
void idem_fast_path(executor& exec, client& c, std::uint64_t id, bool reserve_first = false) {
    require_executed(idem::detail::execute_in_transaction(
        exec, *c.runner, transfer_key(id), "fp", {.reserve_first = reserve_first},
        [&](unit_of_work&) {
            c.transfer(id);
            return std::string("ok");
        },
        string_codec{}));
}

// The reserve in one round trip with BEGIN, the work, the completion with COMMIT.
void reserve_first(client& c, std::uint64_t id, const layout& table) {
    const record_key key = transfer_key(id);
    pq::values reserve, complete;
    reserve.bytes(key.digest().data(), table.digest_size);
    if (table.named) reserve.text("t-" + std::to_string(id));
    reserve.bytes(c.fresh_token());
    complete.bytes(key.digest().data(), table.digest_size).bytes(c.token).bytes("ok");
    pq::pipeline begin(c.conn);
    begin.prepared("s_begin", {}).prepared(table.reserve, reserve);
    if (!begin.run() || begin.last_rows() != 1) throw std::logic_error("a fresh key was not reserved");
    c.transfer(id);
    pq::pipeline end(c.conn);
    end.prepared(table.complete, complete).prepared("s_commit", {});
    if (!end.run()) throw std::logic_error("the completion failed");
}

// The lookup with BEGIN (a retry replays before any work), the work, then the
// completed record in one round trip with COMMIT: a duplicate's INSERT fails on
// the unique key, and its work rolls back with it.
void optimistic(client& c, std::uint64_t id, const layout& table) {
    const record_key key = transfer_key(id);
    pq::values done;
    done.bytes(key.digest().data(), table.digest_size);
    if (table.named) done.text("t-" + std::to_string(id));
    done.bytes(c.fresh_token()).bytes("ok");
    pq::values by_key;
    by_key.bytes(key.digest().data(), table.digest_size);
    pq::pipeline begin(c.conn);
    begin.prepared("s_begin", {}).prepared(table.lookup, by_key);
    if (!begin.run() || begin.last_rows() != 0) throw std::logic_error("a fresh key was found");
    c.transfer(id);
    pq::pipeline end(c.conn);
    end.prepared(table.insert_completed, done).prepared("s_commit", {});
    if (!end.run()) throw std::logic_error("the completed record was refused");
}

}  // namespace

void prefill_postgresql_steady(soci::session& s, std::size_t rows) {
    prefill(native(s), rows);
}

void run_postgresql_steady(const options& o, report& out) {
    soci::session admin;
    open_postgresql_session(admin, o.postgresql);
    PGconn* admin_conn = native(admin);
    // Opening a store creates idem_records as its migrations define it.
    (void)postgresql_store(postgresql_store_options{.connection = o.postgresql});
    const auto started = std::chrono::steady_clock::now();
    prefill(admin_conn, o.steady_rows);
    const double prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "prefilled %zu rows in %.0f s\n", o.steady_rows, prefill_s);
    next_transfer = o.steady_rows + 1;
    std::string database;
    admin << "SELECT current_database()", soci::into(database);

    for (const char* sync : {"on", "off"}) {
        pq::execute(admin_conn, ("ALTER DATABASE \"" + database + "\" SET synchronous_commit = " + sync).c_str());
        for (int clients : o.client_counts) {
            // Connections opened after the ALTER take its setting.
            auto store = std::make_shared<postgresql_store>(
                postgresql_store_options{.connection = o.postgresql, .pool_size = static_cast<std::size_t>(clients)});
            executor exec(store);
            std::vector<std::unique_ptr<client>> pool;
            for (int c = 0; c < clients; ++c)
                pool.push_back(std::make_unique<client>(o.postgresql, 0x5eed + static_cast<std::uint64_t>(c)));
            const auto timed = [&](std::function<void(client&, std::uint64_t)> op) {
                return on_each_client(pool, o.span, next_transfer, std::move(op));
            };
            report_steady(
                out, o, "pg-steady", "synchronous_commit=" + std::string(sync) + ", " + clients_label(clients),
                {
                    {"bare", timed(bare)},
                    {"idem", timed([&](client& c, std::uint64_t id) { idem_fast_path(exec, c, id); })},
                    {"idem-reserve-first",
                     timed([&](client& c, std::uint64_t id) { idem_fast_path(exec, c, id, true); })},
                    {"hand", timed([](client& c, std::uint64_t id) { reserve_first(c, id, current); })},
                    {"hand-first-schema",
                     timed([](client& c, std::uint64_t id) { reserve_first(c, id, first_schema); })},
                    {"hand-optimistic", timed([](client& c, std::uint64_t id) { optimistic(c, id, current); })},
                    {"lean-reserve", timed([](client& c, std::uint64_t id) { reserve_first(c, id, lean); })},
                    {"lean-optimistic", timed([](client& c, std::uint64_t id) { optimistic(c, id, lean); })},
                });
        }
    }
    pq::execute(admin_conn, ("ALTER DATABASE \"" + database + "\" RESET synchronous_commit").c_str());
}

}  // namespace idem::bench
