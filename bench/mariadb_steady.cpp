// MariaDB at steady state: postgresql_steady.cpp's workload (random transfers
// among 100,000 accounts, the ledger and idem_records prefilled) on InnoDB,
// at the server's innodb_flush_log_at_trx_commit (bench/run starts it at 1: a
// commit waits for its redo log flush), 1 and 8 clients. Each configuration
// times, in alternating rounds: the bare transfer; idem in the caller's
// transaction (the default, and reserve_first); idem in lease mode (a detached
// reserve and completion, each on a connection of the store's pool around the
// caller's transaction, as a store outside it runs); the same guarantee by hand on
// idem's table, the reserve first (INSERT, work, UPDATE with COMMIT), and idem's
// form (a lookup, the work, the completed record's INSERT, COMMIT). Every
// statement goes as text, one round trip each, as SOCI's mysql backend sends
// idem's own.
#include <mysql.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>

#include "bench.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/mariadb_store.hpp"
#include "idem/transaction_runner.hpp"
#include "steady_state.hpp"

namespace idem::bench {
namespace {

MYSQL* native(soci::session& s) {
    return static_cast<soci::mysql_session_backend*>(s.get_backend())->conn_;
}

// Runs one statement: the rows it returned (a SELECT) or changed.
std::uint64_t run(MYSQL* conn, const std::string& sql) {
    if (mysql_real_query(conn, sql.data(), sql.size()) != 0)
        throw std::runtime_error(sql.substr(0, 200) + ": " + mysql_error(conn));
    if (MYSQL_RES* result = mysql_store_result(conn)) {
        const std::uint64_t rows = mysql_num_rows(result);
        mysql_free_result(result);
        return rows;
    }
    if (mysql_field_count(conn) != 0) throw std::runtime_error(sql.substr(0, 200) + ": " + mysql_error(conn));
    return mysql_affected_rows(conn);
}

// The first column of the first row `sql` returns.
std::string scalar(MYSQL* conn, const std::string& sql) {
    if (mysql_real_query(conn, sql.data(), sql.size()) != 0)
        throw std::runtime_error(sql.substr(0, 200) + ": " + mysql_error(conn));
    const std::unique_ptr<MYSQL_RES, decltype(&mysql_free_result)> result(mysql_store_result(conn), &mysql_free_result);
    const MYSQL_ROW row = result ? mysql_fetch_row(result.get()) : nullptr;
    if (row == nullptr || row[0] == nullptr) throw std::runtime_error(sql.substr(0, 200) + ": no value");
    return row[0];
}

std::string hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out = "X'";
    for (char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out + "'";
}

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

constexpr std::int64_t day_ms = 86'400'000;
constexpr const char* dirty_sql =
    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = "
    "'INNODB_BUFFER_POOL_PAGES_DIRTY'";

// The tables, filled as years of use would leave them: a ledger line and a
// completed record per past transfer, their times in insertion order. Keys
// are inserted in key order (a bulk load); new ones land at random.
void prefill(MYSQL* conn, std::size_t rows) {
    const std::string n = std::to_string(rows), now = std::to_string(now_ms()), day = std::to_string(day_ms);
    const std::string seq = " FROM seq_1_to_" + n;
    run(conn, "DROP TABLE IF EXISTS bench_accounts, bench_ledger");
    run(conn, "CREATE TABLE bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB");
    run(conn, "INSERT INTO bench_accounts SELECT seq, 1000000000 FROM seq_1_to_" + std::to_string(steady_accounts));
    run(conn, "CREATE TABLE bench_ledger (transfer_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL) ENGINE = InnoDB");
    run(conn, "INSERT INTO bench_ledger SELECT seq, 1" + seq);
    run(conn, "TRUNCATE idem_records");
    const std::string created = now + " - " + day + " + seq * " + day + " DIV " + n;
    run(conn,
        "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at, "
        "scope_id) SELECT UNHEX(LEFT(SHA2(seq, 256), 32)) AS k, 'bench.transfer', 'fp', X'0123456789abcdef', 1, "
        "'ok', " +
            created + " + " + day + ", " + created + ", X'0011223344556677'" + seq + " ORDER BY k");
    run(conn, "ANALYZE TABLE bench_accounts, bench_ledger, idem_records");
    // PostgreSQL's CHECKPOINT: the prefill's dirty pages written out before the
    // first round, so that their flushing slows none of the variants (the first
    // rounds' would be timed against the server's catch-up).
    run(conn, "SET GLOBAL innodb_max_dirty_pages_pct = 0");
    for (int tenths = 0; tenths < 1200 && std::stol(scalar(conn, dirty_sql)) >= 100; ++tenths)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    run(conn, "SET GLOBAL innodb_max_dirty_pages_pct = DEFAULT");
}

// One client: its own session, for idem (through a runner) and by hand alike.
struct client {
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    MYSQL* conn;
    std::mt19937_64 rng;
    std::string token = std::string(16, '\0');

    client(const std::string& url, std::uint64_t seed) : rng(seed) {
        open_mariadb_session(session, url);
        runner = std::make_unique<transaction_runner>(session);
        conn = native(session);
    }

    // The business statements of one transfer, inside an open transaction.
    void transfer(std::uint64_t id) {
        const auto [from, to] = account_pair(rng);
        run(conn, "UPDATE bench_accounts SET balance = balance - 1 WHERE id = " + std::to_string(from));
        run(conn, "UPDATE bench_accounts SET balance = balance + 1 WHERE id = " + std::to_string(to));
        run(conn, "INSERT INTO bench_ledger (transfer_id, amount) VALUES (" + std::to_string(id) + ", 1)");
    }
};

std::atomic<std::uint64_t> next_transfer{0};

std::string key_hash(std::uint64_t id) {
    const record_key key = transfer_key(id);
    return hex(std::string_view(reinterpret_cast<const char*>(key.digest().data()), 16));
}

// The completed record's columns and values, as idem writes them (its scope id 8 bytes).
const std::string record_columns =
    "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at, "
    "scope_id) VALUES (";

std::string record_values(const std::string& key, const std::string& token, int state, const char* payload,
                          std::int64_t span_ms) {
    const std::int64_t now = now_ms();
    return key + ", 'bench.transfer', 'fp', " + token + ", " + std::to_string(state) + ", " + payload + ", " +
           std::to_string(now + span_ms) + ", " + std::to_string(now) + ", X'0011223344556677')";
}

void bare(client& c, std::uint64_t id) {
    run(c.conn, "START TRANSACTION");
    c.transfer(id);
    run(c.conn, "COMMIT");
}

void idem_inside(executor& exec, client& c, std::uint64_t id, bool reserve_first = false) {
    require_executed(idem::detail::execute_in_transaction(
        exec, *c.runner, transfer_key(id), "fp", {.reserve_first = reserve_first},
        [&](unit_of_work&) {
            c.transfer(id);
            return std::string("ok");
        },
        string_codec{}));
}

// The reserve and the completion in transactions of their own, on the store's connections.
void idem_lease(executor& exec, client& c, std::uint64_t id) {
    require_executed(exec.execute(
        transfer_key(id), "fp", {},
        [&] {
            c.runner->run([&](unit_of_work&) { c.transfer(id); });
            return std::string("ok");
        },
        string_codec{}));
}

// The reserve (an in-flight row), the work, the completion, COMMIT.
void reserve_first(client& c, std::uint64_t id) {
    const std::string key = key_hash(id), token = hex(fill_random(c.rng, c.token));
    run(c.conn, "START TRANSACTION");
    if (run(c.conn, record_columns + record_values(key, token, 0, "NULL", 60'000)) != 1)
        throw std::logic_error("a fresh key was not reserved");
    c.transfer(id);
    run(c.conn, "UPDATE idem_records SET state = 1, payload = 'ok', expires_at = " + std::to_string(now_ms() + day_ms) +
                    " WHERE key_hash = " + key + " AND token = " + token + " AND state = 0");
    run(c.conn, "COMMIT");
}

// idem's form: the lookup (a retry replays before any work), the work, then
// the completed record: a duplicate's INSERT fails on the primary key, and
// its work rolls back with it.
void optimistic(client& c, std::uint64_t id) {
    const std::string key = key_hash(id);
    run(c.conn, "START TRANSACTION");
    if (run(c.conn,
            "SELECT state, token, fingerprint, payload, expires_at FROM idem_records WHERE key_hash = " + key) != 0)
        throw std::logic_error("a fresh key was found");
    c.transfer(id);
    run(c.conn, record_columns + record_values(key, "'-'", 1, "'ok'", day_ms));
    run(c.conn, "COMMIT");
}

}  // namespace

void run_mariadb_steady(const options& o, report& out) {
    // Opening a store creates idem_records as its migrations define it.
    (void)mariadb_store(mariadb_store_options{.connection = o.mariadb});
    soci::session admin;
    open_mariadb_session(admin, o.mariadb);
    const auto started = std::chrono::steady_clock::now();
    prefill(native(admin), o.steady_rows);
    std::fprintf(stderr, "prefilled %zu rows in %.0f s\n", o.steady_rows,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    next_transfer = o.steady_rows + 1;
    int flush = 0;
    admin << "SELECT @@innodb_flush_log_at_trx_commit", soci::into(flush);

    for (int clients : o.client_counts) {
        auto store = std::make_shared<mariadb_store>(
            mariadb_store_options{.connection = o.mariadb, .pool_size = static_cast<std::size_t>(clients)});
        executor exec(store);
        std::vector<std::unique_ptr<client>> pool;
        for (int c = 0; c < clients; ++c)
            pool.push_back(std::make_unique<client>(o.mariadb, 0x5eed + static_cast<std::uint64_t>(c)));
        const auto timed = [&](std::function<void(client&, std::uint64_t)> op) {
            return on_each_client(pool, o.span, next_transfer, std::move(op));
        };
        report_steady(
            out, o, "mariadb-steady",
            "innodb_flush_log_at_trx_commit=" + std::to_string(flush) + ", " + clients_label(clients),
            {
                {"bare", timed(bare)},
                {"idem", timed([&](client& c, std::uint64_t id) { idem_inside(exec, c, id); })},
                {"idem-reserve-first", timed([&](client& c, std::uint64_t id) { idem_inside(exec, c, id, true); })},
                {"idem-lease", timed([&](client& c, std::uint64_t id) { idem_lease(exec, c, id); })},
                {"hand", timed(reserve_first)},
                {"hand-optimistic", timed(optimistic)},
            });
    }
}

}  // namespace idem::bench
