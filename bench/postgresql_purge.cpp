// PostgreSQL purge at scale: a record table of --rows completed records (10
// million for the capacity figures), the oldest --expired of them expired, as
// a retention window leaves it; then the purge job (idem::purge: batches of
// 1000, resting between batches as long as the last one took) while one
// thread reserves and completes fresh keys, against the same traffic alone.
#include <libpq-fe.h>

#include <cstdio>
#include <span>

#include "bench.hpp"
#include "idem/postgresql_store.hpp"
#include "idem/purge.hpp"
#include "pq.hpp"
#include "purge_bench.hpp"

namespace idem::bench {
namespace {

using steady = std::chrono::steady_clock;

double seconds_since(steady::time_point start) {
    return std::chrono::duration<double>(steady::now() - start).count();
}

// The table as a retention window leaves it: rows in insertion order, the
// oldest `expired` of them past their retention of a day, the rest written an
// hour ago; 100-byte random payloads and the namespace the payments service
// writes. Filled by the server, the indexes built afterwards (pq::refill).
void fill(PGconn* conn, std::size_t rows, std::size_t expired) {
    pq::execute(conn, "CREATE EXTENSION IF NOT EXISTS pgcrypto");
    const std::string n = std::to_string(rows), old = std::to_string(expired);
    pq::refill(conn, "idem_records",
               "INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, "
               "completed, created_at, expires_at) "
               "SELECT substring(sha256(int8send(i)) FROM 1 FOR 16), 'payments.transfer', "
               "convert_to(md5(i::text), 'UTF8'), convert_to(md5(i::text) || md5((-i)::text), 'UTF8'), "
               "gen_random_bytes(100), true, at, at + interval '1 day' "
               "FROM generate_series(1, " +
                   n +
                   ") AS i, "
                   "LATERAL (SELECT now() - (CASE WHEN i <= " +
                   old +
                   " THEN interval '2 days' ELSE interval '1 hour' END) "
                   "+ interval '1 microsecond' * i AS at) AS t");
}

// The store's purge batches, timed one by one.
class timed_purge final : public store_admin {
public:
    explicit timed_purge(store_admin& inner) : inner_(inner) {}
    std::vector<double> batch_ms;

    std::vector<std::string> migrate() override { return inner_.migrate(); }
    using store_admin::inspect;
    std::optional<record_state> inspect(std::span<const std::byte> digest, bool with_payload) override {
        return inner_.inspect(digest, with_payload);
    }
    std::vector<listed_record> recent(std::string_view name_space, std::size_t limit) override {
        return inner_.recent(name_space, limit);
    }
    using store_admin::completed_since;
    std::vector<listed_record> completed_since(std::string_view name_space, const std::optional<scope>& owner,
                                               time_point since, std::size_t limit) override {
        return inner_.completed_since(name_space, owner, since, limit);
    }
    forget_result forget(std::span<const std::byte> digest, bool force) override {
        return inner_.forget(digest, force);
    }
    std::size_t count_expired(duration older_than) override { return inner_.count_expired(older_than); }
    std::size_t purge_batch(std::size_t limit, duration older_than) override {
        const auto start = steady::now();
        const std::size_t n = inner_.purge_batch(limit, older_than);
        batch_ms.push_back(seconds_since(start) * 1000);
        return n;
    }

private:
    store_admin& inner_;
};

std::string fixed(double v, int digits = 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", digits, v);
    return text;
}

}  // namespace

void run_postgresql_purge(const options& o, report& out) {
    const std::size_t rows = o.steady_rows, expired = o.expired_rows ? o.expired_rows : rows / 10;
    if (expired > rows) throw std::invalid_argument("--expired exceeds --rows");
    auto store = std::make_shared<postgresql_store>(postgresql_store_options{.connection = o.postgresql});
    PGconn* conn = PQconnectdb(o.postgresql.c_str());
    if (PQstatus(conn) != CONNECTION_OK) pq::fail(conn, "connecting");
    const auto filling = steady::now();
    fill(conn, rows, expired);
    const double fill_s = seconds_since(filling);
    const auto table_bytes = pq::column(conn, "SELECT pg_total_relation_size('idem_records')");
    PQfinish(conn);
    std::fprintf(stderr, "filled %zu rows (%zu expired) in %.0f s, %s bytes\n", rows, expired, fill_s,
                 table_bytes.at(0).c_str());

    std::atomic<bool> stop_alone{false};
    std::vector<double> alone;
    std::thread quiet([&] { alone = reserve_latencies(*store, stop_alone, "alone"); });
    std::this_thread::sleep_for(std::chrono::seconds(5));
    stop_alone = true;
    quiet.join();

    timed_purge admin(*store);
    std::atomic<bool> stop{false};
    std::vector<double> during;
    std::thread traffic([&] { during = reserve_latencies(*store, stop, "during"); });
    const purge_result purged = purge(admin, {.batch = 1000});
    stop = true;
    traffic.join();
    // A run with nothing left to purge: what every scheduled run pays at least.
    const auto idle_start = steady::now();
    const std::size_t idle = store->purge_batch(1000, duration::zero());
    const double idle_ms = seconds_since(idle_start) * 1000;

    double working_ms = 0;
    for (double ms : admin.batch_ms) working_ms += ms;
    const double wall_s = std::chrono::duration<double>(purged.elapsed).count();
    const latency with = percentiles(during), without = percentiles(alone);
    const latency batch_ms = percentiles(admin.batch_ms);  // milliseconds, in fields named for microseconds
    const double deleted = static_cast<double>(purged.deleted);
    out.add({.group = "postgresql",
             .name = "purge " + std::to_string(purged.deleted) + " expired of " + std::to_string(rows) +
                     " rows (idem::purge, batches of 1000)",
             .subject = "reserve+complete latency during purge",
             .baseline = "the same traffic without purge",
             .result = {{1e6 / with.p50_us, with.p50_us * 1000}, {1e6 / without.p50_us, without.p50_us * 1000}},
             .unit = "ops/s (1/p50)",
             .note = fixed(deleted / wall_s) + " rows/s purged with its rests (" + fixed(wall_s, 1) + " s), " +
                     fixed(deleted / (working_ms / 1000)) + " rows/s while deleting; batch p50/p99/last " +
                     fixed(batch_ms.p50_us, 1) + "/" + fixed(batch_ms.p99_us, 1) + "/" +
                     fixed(admin.batch_ms.back(), 1) + " ms; a run with nothing to purge " + fixed(idle_ms, 1) +
                     " ms (" + std::to_string(idle) + " rows); reserve p50/p99 " + fixed(with.p50_us) + "/" +
                     fixed(with.p99_us) + " us during vs " + fixed(without.p50_us) + "/" + fixed(without.p99_us) +
                     " us without; table " + table_bytes.at(0) + " bytes, filled in " + fixed(fill_s) + " s"});
}

}  // namespace idem::bench
