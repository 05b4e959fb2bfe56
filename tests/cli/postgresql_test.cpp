// The idem command on PostgreSQL: a database of its own per test on a
// throwaway server (or IDEM_TEST_POSTGRES), named by a postgresql:// URI.
#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>

#include "cli_support.hpp"
#include "idem/postgresql_store.hpp"
#include "postgres_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test::cli;

std::string percent_encoded(std::string_view value) {
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : value) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            out += c;
        } else {
            out += '%';
            out += digits[u >> 4];
            out += digits[u & 15];
        }
    }
    return out;
}

// A libpq key=value string as the postgresql:// URI the command takes: every
// setting as a query parameter.
std::string as_uri(const std::string& conninfo, const std::string& database) {
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), nullptr);
    if (options == nullptr) throw std::runtime_error("not a libpq connection string");
    std::string query = "dbname=" + percent_encoded(database);
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val == nullptr || std::string_view(o->keyword) == "dbname") continue;
        query += "&" + std::string(o->keyword) + "=" + percent_encoded(o->val);
    }
    PQconninfoFree(options);
    return "postgresql:///?" + query;
}

// A statement without results.
void execute(const std::string& uri, const std::string& sql) {
    PGconn* conn = PQconnectdb(uri.c_str());
    const std::unique_ptr<PGconn, decltype(&PQfinish)> owner(conn, PQfinish);
    if (PQstatus(conn) != CONNECTION_OK)
        throw std::runtime_error(std::string("cannot connect: ") + PQerrorMessage(conn));
    PGresult* r = PQexec(conn, sql.c_str());
    const auto status = PQresultStatus(r);
    PQclear(r);
    if (status != PGRES_COMMAND_OK) throw std::runtime_error(sql + ": " + PQerrorMessage(conn));
}

long long count(const std::string& uri, const std::string& where = "true") {
    PGconn* conn = PQconnectdb(uri.c_str());
    const std::unique_ptr<PGconn, decltype(&PQfinish)> owner(conn, PQfinish);
    PGresult* r = PQexec(conn, ("SELECT count(*) FROM idem_records WHERE " + where).c_str());
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    const long long n = ok ? std::stoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    if (!ok) throw std::runtime_error(std::string("count: ") + PQerrorMessage(conn));
    return n;
}

// A fresh database for one test, dropped afterwards.
struct pg_database {
    std::string server = idem::test::shared_postgres();
    std::string name = "idem_cli_" + std::to_string(getpid()) + "_" + std::to_string(next());
    std::string uri;

    pg_database() {
        execute(server, "CREATE DATABASE " + name);
        uri = as_uri(server, name);
    }
    ~pg_database() {
        try {
            execute(server, "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
        } catch (...) {
            // the server goes away with the process anyway
        }
    }
    static int next() {
        static std::atomic<int> n{0};
        return ++n;
    }

    [[nodiscard]] long long rows(const std::string& where = "true") const { return count(uri, where); }
    [[nodiscard]] long long expired_rows() const { return rows("expires_at <= clock_timestamp()"); }

    // `n` completed rows named prefix-i, in namespace seed-prefix, expired `ago` (an SQL interval) ago.
    void seed_expired(const std::string& prefix, int n, const std::string& ago) const {
        execute(uri,
                "INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, "
                "completed, created_at, expires_at) "
                "SELECT substring(sha256(convert_to('" +
                    prefix + "-' || i, 'UTF8')) FROM 1 FOR 16), 'seed-" + prefix +
                    "', '\\x01', 'fp', 'x', true, clock_timestamp() - interval '" + ago +
                    "' - interval '1 hour', clock_timestamp() - interval '" + ago +
                    "' "
                    "FROM generate_series(0, " +
                    std::to_string(n - 1) + ") AS i");
    }
};

}  // namespace

TEST_CASE("postgresql: migrate applies the schema once, then nothing, exit 0 both times") {
    workspace w;
    pg_database db;
    auto r = w.idem({"migrate", "--db", db.uri});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out ==
          "applied 0001_create_records\napplied 0002_purge_by_insertion_order\napplied 0003_purge_by_expiry\n"
          "applied 0004_lean_records\napplied 0005_outbox\napplied 0006_steps\napplied 0007_completer\n"
          "applied 0008_outbox_claim_order\napplied 0009_operation_failures\napplied 0010_outbox_lean\napplied "
          "0011_outbox_intake\napplied 0012_tombstones\napplied 0013_scope_ids\n");
    r = w.idem({"migrate", "--db", "postgres" + db.uri.substr(10)});  // postgres:// too
    CHECK(r.exit_code == 0);
    CHECK(r.out == "nothing to apply: the schema is up to date\n");
    CHECK(db.rows() == 0);
}

TEST_CASE("postgresql: inspect in flight, completed (payload only with --payload) and expired records") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    const std::string payload("{\"receipt\":1}\0\xff", 15);
    {
        idem::postgresql_store store{{.connection = db.uri, .migrate_on_open = false}};
        const auto done = store.try_reserve(key_of("pg", 0), "fp", 1min);
        REQUIRE(store.complete(key_of("pg", 0), done.token, "fp", payload, 24h));
        REQUIRE(store.try_reserve(key_of("pg", 1), "fp", 10min).status == idem::reservation_status::reserved);
    }
    auto r = w.idem({"inspect", "--db", db.uri, "--key-hash", digest_hex(key_of("pg", 0))});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "state:          completed\n"));
    CHECK(contains(r.out, "retention left: 23h 59m\n"));
    CHECK(contains(r.out, "payload:        15 bytes\n"));
    CHECK(!contains(r.out, "receipt"));
    r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--tenant", "acme", "--key", "pg-0", "--payload"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == payload);

    r = w.idem({"inspect", "--db", db.uri, "--key-hash", digest_hex(key_of("pg", 1))});
    CHECK(contains(r.out, "state:          in flight\n"));
    CHECK(contains(r.out, "lease left:     9m "));

    execute(db.uri, "UPDATE idem_records SET expires_at = clock_timestamp() - interval '2 hours 30 seconds'");
    r = w.idem({"inspect", "--db", db.uri, "--key-hash", digest_hex(key_of("pg", 0))});
    CHECK(contains(r.out, "state:          expired (was completed)\n"));
    CHECK(contains(r.out, "expired:        2h 0m ago\n"));

    r = w.idem({"inspect", "--db", db.uri, "--key-hash", digest_hex(key_of("pg", 2))});
    CHECK(r.exit_code == 3);
}

TEST_CASE("postgresql: forget a completed, an in-flight (only with --force) and an absent record") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    {
        idem::postgresql_store store{{.connection = db.uri, .migrate_on_open = false}};
        const auto done = store.try_reserve(key_of("pg", 0), "fp", 1min);
        REQUIRE(store.complete(key_of("pg", 0), done.token, "fp", "receipt", 24h));
        REQUIRE(store.try_reserve(key_of("pg", 1), "fp", 10min).status == idem::reservation_status::reserved);
    }
    auto r = w.idem({"forget", "--db", db.uri, "--namespace", "cli", "--tenant", "acme", "--key", "pg-0"});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "deleted the record with key hash " + key_of("pg", 0).key_hash() + " (digest " +
                              digest_hex(key_of("pg", 0)) + "): namespace cli, completed, written "));
    CHECK(db.rows() == 1);

    const std::string in_flight = idem::test::record_id_hex(key_of("pg", 1));
    r = w.idem({"forget", "--db", db.uri, "--key-hash", in_flight});
    CHECK(r.exit_code == 4);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "is in flight (lease left 9m "));
    CHECK(db.rows() == 1);
    for (const auto& bad : std::vector<std::vector<std::string>>{
             {"--key-hash", in_flight.substr(1)}, {"--key-hash", in_flight, "--global"}, {"--force"}}) {
        std::vector<std::string> all{"forget", "--db", db.uri};
        all.insert(all.end(), bad.begin(), bad.end());
        CHECK(w.idem(all).exit_code == 2);
    }
    CHECK(db.rows() == 1);
    r = w.idem({"forget", "--db", db.uri, "--key-hash", digest_hex(key_of("pg", 1)), "--force"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, ": namespace cli, in flight, written "));
    CHECK(contains(r.out, "(--force)"));
    CHECK(db.rows() == 0);
    r = w.idem({"forget", "--db", db.uri, "--key-hash", digest_hex(key_of("pg", 1))});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "nothing was deleted"));
}

TEST_CASE("postgresql: inspect --recent lists a namespace newest first, expired records too") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    {
        idem::postgresql_store store{{.connection = db.uri, .migrate_on_open = false}};
        for (int n = 0; n < 4; ++n) {
            const auto r = store.try_reserve(key_of("pg", n), "fp", 10min);
            REQUIRE(r.status == idem::reservation_status::reserved);
            if (n % 2 == 0) REQUIRE(store.complete(key_of("pg", n), r.token, "fp", "receipt", 24h));
            std::this_thread::sleep_for(5ms);
        }
        REQUIRE(store.try_reserve(idem::record_key("elsewhere", "x"), "fp", 1min).status ==
                idem::reservation_status::reserved);
    }
    execute(db.uri, "UPDATE idem_records SET expires_at = clock_timestamp() - interval '1 hour' WHERE key_hash = '\\x" +
                        idem::test::record_id_hex(key_of("pg", 0)) + "'");
    auto r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--recent", "3"});
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 4);  // a header and three records
    const auto at = [&](int n) { return r.out.find(idem::test::record_id_hex(key_of("pg", n))); };
    CHECK(at(3) < at(2));
    CHECK(at(2) < at(1));
    CHECK(at(0) == std::string::npos);  // the oldest is past the limit
    CHECK(contains(r.out, "in flight"));
    CHECK(contains(r.out, "7 bytes"));
    r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--recent", "10"});
    CHECK(contains(r.out, idem::test::record_id_hex(key_of("pg", 0)) + "  expired (was completed)"));
    CHECK(!contains(r.out, "acme"));
    CHECK(w.idem({"inspect", "--db", db.uri, "--namespace", "none", "--recent", "10"}).exit_code == 3);
    CHECK(w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--recent", "1001"}).exit_code == 2);
}

TEST_CASE("postgresql: inspect --since lists what a namespace completed since a time, newest first") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    {
        idem::postgresql_store store{{.connection = db.uri, .migrate_on_open = false}};
        for (int n = 0; n < 5; ++n) {
            const auto r = store.try_reserve(key_of("pg", n), "fp", 10min);
            REQUIRE(r.status == idem::reservation_status::reserved);
            if (n != 3) REQUIRE(store.complete(key_of("pg", n), r.token, "fp", std::string(n, 'p'), 24h));
            std::this_thread::sleep_for(5ms);
        }
        const idem::record_key elsewhere("elsewhere", "x");
        const auto r = store.try_reserve(elsewhere, "fp", 1min);
        REQUIRE(store.complete(elsewhere, r.token, "fp", "p", 1h));
    }
    // pg-0 completed two hours ago and expired one hour ago; pg-1 completed two hours ago, still kept.
    const auto hex = [](int n) { return idem::test::record_id_hex(key_of("pg", n)); };
    execute(db.uri,
            "UPDATE idem_records SET created_at = clock_timestamp() - interval '2 hours', expires_at = "
            "clock_timestamp() - interval '1 hour' WHERE key_hash = '\\x" +
                hex(0) + "'");
    execute(db.uri,
            "UPDATE idem_records SET created_at = clock_timestamp() - interval '2 hours' WHERE key_hash = '\\x" +
                hex(1) + "'");
    const long long rows = db.rows();

    auto r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--since", "1h"});
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 3);  // a header, pg-4 and pg-2
    const auto at = [&](int n) { return r.out.find(hex(n)); };
    REQUIRE(at(4) != std::string::npos);
    REQUIRE(at(2) != std::string::npos);
    CHECK(at(4) < at(2));
    CHECK(at(3) == std::string::npos);  // in flight
    CHECK(at(1) == std::string::npos);  // completed before
    CHECK(contains(r.out, hex(4) + "  completed"));
    CHECK(contains(r.out, "4 bytes"));
    CHECK(!contains(r.out, "acme"));

    r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--since", "3h", "--limit", "3"});
    CHECK(r.exit_code == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 4);
    CHECK(at(1) != std::string::npos);  // set two hours back after pg-0, so a little newer
    CHECK(at(0) == std::string::npos);  // past the limit
    r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--since", "3h"});
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 5);
    CHECK(contains(r.out, hex(0) + "  expired (was completed)"));
    CHECK(contains(r.out, hex(1) + "  completed"));

    r = w.idem({"inspect", "--db", db.uri, "--namespace", "none", "--since", "7d"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "no record of namespace none completed since"));
    // One scope's: every cli record is tenant acme's.
    r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--since", "3h", "--tenant", "acme"});
    CHECK(r.exit_code == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 5);
    r = w.idem({"inspect", "--db", db.uri, "--namespace", "cli", "--since", "3h", "--client", "shop"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "no record of namespace cli and scope client:shop completed since"));
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--namespace", "cli", "--since", "2024-13-01T00:00:00Z"},
             {"--namespace", "cli", "--since", "1h", "--client", "shop", "--tenant", "acme"},
             {"--namespace", "cli", "--since", "1h", "--limit", "1001"},
         }) {
        std::vector<std::string> all{"inspect", "--db", db.uri};
        all.insert(all.end(), args.begin(), args.end());
        r = w.idem(all);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
    }
    CHECK(db.rows() == rows);
}

TEST_CASE("postgresql: purge --dry-run, --older-than, --batch and --max-rows; live rows stay") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    db.seed_expired("old", 300, "3 hours");
    db.seed_expired("recent", 200, "10 minutes");
    {
        idem::postgresql_store store{{.connection = db.uri, .migrate_on_open = false}};
        for (int i = 0; i < 20; ++i)
            REQUIRE(store.try_reserve(key_of("live", i), "fp", 10min).status == idem::reservation_status::reserved);
    }
    REQUIRE(db.expired_rows() == 500);

    CHECK(w.idem({"purge", "--db", db.uri, "--dry-run"}).out == "would purge 500 rows expired\n");
    CHECK(w.idem({"purge", "--db", db.uri, "--dry-run", "--older-than", "1h"}).out ==
          "would purge 300 rows expired for over 1h\n");
    CHECK(w.idem({"purge", "--db", db.uri, "--older-than", "bad"}).exit_code == 2);
    CHECK(db.rows() == 520);

    auto r = w.idem({"purge", "--db", db.uri, "--older-than", "1h", "--batch", "100", "--max-rows", "250"});
    CHECK(purged(r) == 250);
    CHECK(contains(r.out, " in 3 batches, "));
    CHECK(purged(w.idem({"purge", "--db", db.uri, "--older-than", "1h"})) == 50);
    CHECK(db.rows("namespace = 'seed-recent'") == 200);
    CHECK(purged(w.idem({"purge", "--db", db.uri})) == 200);
    CHECK(db.rows() == 20);
    CHECK(db.rows("namespace = 'cli' AND NOT completed") == 20);
}

TEST_CASE("postgresql: two purges at once delete each expired row exactly once") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    const int expired = 20000;
    db.seed_expired("old", expired, "2 hours");
    purge_twice_at_once(w, db.uri, expired);
    CHECK(db.rows() == 0);
}

TEST_CASE("postgresql: purge never touches live rows while another process keeps reserving") {
    workspace w;
    pg_database db;
    w.migrate(db.uri);
    const int expired = 20000;
    db.seed_expired("old", expired, "2 hours");

    traffic live(db.uri, "live");
    const int before = live.written();
    const auto r = w.idem({"purge", "--db", db.uri, "--batch", "200"});
    const int after = live.written();
    const auto [written, errors] = live.stop();

    MESSAGE("the worker wrote " << after - before << " records during the purge (" << written << " in all)");
    CHECK(purged(r) == expired);
    CHECK(after > before);
    CHECK(errors == 0);
    CHECK(db.rows("namespace = 'cli'") == written);
    CHECK(db.rows("namespace = 'cli' AND NOT completed") == written / 2);
    CHECK(db.rows() == written);
}

TEST_CASE("postgresql: a server that cannot be reached is a database error (exit 1), never echoing the password") {
    workspace w;
    for (const char* command : {"migrate", "purge"}) {
        const auto r = w.idem({command, "--db", "postgresql://idem:secret@127.0.0.1:1/idem?connect_timeout=5"});
        CAPTURE(r.err);
        CHECK(r.exit_code == 1);
        CHECK(!contains(r.err, "secret"));
    }
}
