// The PostgreSQL store in the caller's transaction, its isolation rule, its
// schema, its errors and its admin view, on a real server.
#include <doctest/doctest.h>

#include <libpq-fe.h>
#include <signal.h>
#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <span>
#include <thread>

#include "expect.hpp"
#include "far_times_scenario.hpp"
#include "idem/error.hpp"
#include "idem/executor.hpp"
#include "idem/postgresql_store.hpp"
#include "idem/transaction_runner.hpp"
#include "key_hex.hpp"
#include "migration_files.hpp"
#include "postgres_server.hpp"
#include "postgresql_bank.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::pg_bank;
using idem::reservation_status;
using idem::store_failure;
using idem::unit_of_work;
using idem::test::store_error_of;

struct fixture {
    std::string conninfo = idem::test::shared_postgres();
    idem::postgresql_store store{{.connection = conninfo}};
    soci::session session;
    std::unique_ptr<idem::transaction_runner> runner;

    fixture() {
        idem::open_postgresql_session(session, conninfo);
        bank::reset(session);
        runner = std::make_unique<idem::transaction_runner>(session);
    }

    // A second business connection, as another instance of the service has.
    struct other_connection {
        soci::session session;
        std::unique_ptr<idem::transaction_runner> runner;
        explicit other_connection(const std::string& conninfo) {
            idem::open_postgresql_session(session, conninfo);
            runner = std::make_unique<idem::transaction_runner>(session);
        }
    };

    [[nodiscard]] reservation_status detached_status(const std::string& key) {
        return bank::detached_status(store, key);
    }

    [[nodiscard]] long long records() { return bank::count(session, "SELECT count(*) FROM idem_records"); }
    [[nodiscard]] long long ledger() { return bank::count(session, "SELECT count(*) FROM ledger"); }
};

// The same connection as a postgresql:// URI.
std::string uri_of(const std::string& conninfo) {
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), nullptr);
    REQUIRE(options != nullptr);
    std::map<std::string, std::string> values;
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o)
        if (o->val != nullptr) values[o->keyword] = o->val;
    PQconninfoFree(options);
    std::string uri = "postgresql://" + values["user"];
    if (!values["password"].empty()) uri += ":" + values["password"];
    return uri + "@" + values["host"] + ":" + values["port"] + "/" + values["dbname"];
}

}  // namespace

TEST_CASE("postgresql store: REPEATABLE READ and SERIALIZABLE transactions are refused with a clear error") {
    fixture f;
    for (auto level : {idem::isolation_level::repeatable_read, idem::isolation_level::serializable}) {
        idem::transaction_runner strict(f.session, {.isolation = level});
        const auto e = store_error_of([&] {
            strict.run([&](unit_of_work& tx) {
                (void)f.store.try_reserve(tx, bank::transfer_key("t-7"), bank::fingerprint, 1min);
            });
        });
        CHECK(e.failure() == store_failure::unsupported);
        CHECK_FALSE(e.is_transient());
        CHECK(std::string(e.what()).find("READ COMMITTED") != std::string::npos);
        CHECK(std::string(e.what()).find("t-7") == std::string::npos);
        CHECK(strict.last_state() == idem::transaction_state::rolled_back);

        // complete and release refuse too, and write nothing.
        CHECK(store_error_of([&] {
                  strict.run([&](unit_of_work& tx) {
                      (void)f.store.complete(tx, bank::transfer_key("t-7"), "token", bank::fingerprint, "x", 1h);
                  });
              }).failure() == store_failure::unsupported);
        CHECK(store_error_of([&] {
                  strict.run([&](unit_of_work& tx) { (void)f.store.release(tx, bank::transfer_key("t-7"), "token"); });
              }).failure() == store_failure::unsupported);
    }
    // The level the session runs at is what counts, not what the runner was told.
    f.session << "SET default_transaction_isolation = 'serializable'";
    CHECK(store_error_of([&] { (void)bank::transfer(f.store, *f.runner, "t-7", 10); }).failure() ==
          store_failure::unsupported);
    f.session << "SET default_transaction_isolation = 'read committed'";
    CHECK(f.records() == 0);
    CHECK(bank::transfer(f.store, *f.runner, "t-7", 10) == bank::outcome::executed);
}

TEST_CASE("postgresql store: its own connections run at READ COMMITTED whatever the database's default") {
    fixture f;
    idem::test::scratch_database strict(f.conninfo, "strict");
    f.session << "ALTER DATABASE " + strict.name() + " SET default_transaction_isolation = 'serializable'";
    {
        idem::postgresql_store store{{.connection = strict.conninfo()}};
        const idem::record_key key("strict", "k");
        auto r = store.try_reserve(key, "fp", 1min);
        REQUIRE(r.status == reservation_status::reserved);
        CHECK(store.complete(key, r.token, "fp", "done", 1h));
        CHECK(store.try_reserve(key, "fp", 1min).payload == "done");
    }
}

TEST_CASE("postgresql store: binary payloads and keys with NUL round-trip; rows keep the namespace, no key text") {
    fixture f;
    std::string payload(1 << 20, '\0');
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 % 256);
    const idem::record_key with_nul("bank.\xC3\xA9t\xC3\xA9", idem::scope::tenant("T 1"), std::string("a\0b", 3));
    const idem::record_key with_replacement("bank.\xC3\xA9t\xC3\xA9", idem::scope::tenant("T 1"),
                                            "a\xEF\xBF\xBD"
                                            "b");
    f.runner->run([&](unit_of_work& tx) {
        auto r = f.store.try_reserve(tx, with_nul, std::string("fp\0\xff", 4), 1min);
        REQUIRE(r.status == reservation_status::reserved);
        REQUIRE(f.store.complete(tx, with_nul, r.token, std::string("fp\0\xff", 4), payload, 1h));
    });
    auto replay = f.store.try_reserve(with_nul, std::string("fp\0\xff", 4), 1min);
    CHECK(replay.status == reservation_status::completed);
    CHECK(replay.payload == payload);
    // Identity is the hash: the key whose readable text looks the same is another record.
    CHECK(f.store.try_reserve(with_replacement, "fp", 1min).status == reservation_status::reserved);

    const auto state = f.store.inspect(with_nul.digest(), true);
    REQUIRE(state.has_value());
    CHECK(state->completed);
    CHECK(state->name_space == "bank.\xC3\xA9t\xC3\xA9");
    CHECK(state->payload_bytes == payload.size());
    CHECK(state->payload == payload);
    CHECK_FALSE(state->expired());
    // By the digest's first 16 bytes alone, the table's key; no other length.
    const std::span<const std::byte> whole(with_nul.digest());
    CHECK(f.store.inspect(whole.first(16), false)->payload_bytes == payload.size());
    CHECK_THROWS_AS((void)f.store.inspect(whole.first(17), false), std::invalid_argument);
    CHECK(state->expires_at - state->created_at > 59min);
    CHECK(state->expires_at - state->created_at <= 1h);
    CHECK(bank::count(f.session,
                      "SELECT count(*) FROM idem_records WHERE namespace = 'bank.\xC3\xA9t\xC3\xA9'"
                      " AND octet_length(key_hash) = 16") == 2);
    CHECK(bank::count(f.session,
                      "SELECT count(*) FROM information_schema.columns WHERE table_name = 'idem_records'"
                      " AND column_name IN ('scope', 'key')") == 0);
}

TEST_CASE("postgresql store: store_admin inspects, counts and purges expired rows only") {
    fixture f;
    const idem::record_key live("admin", "live");
    const idem::record_key done("admin", "done");
    auto l = f.store.try_reserve(live, "fp", 1h);
    auto d = f.store.try_reserve(done, "fp", 1h);
    REQUIRE(f.store.complete(done, d.token, "fp", "kept", 1h));
    std::vector<idem::record_key> expired;
    for (int i = 0; i < 7; ++i) {
        expired.emplace_back("admin", "expired-" + std::to_string(i));
        auto r = f.store.try_reserve(expired.back(), "fp", 50ms);
        if (i % 2 == 0) REQUIRE(f.store.complete(expired.back(), r.token, "fp", "x", 50ms));
    }
    std::this_thread::sleep_for(120ms);

    auto in_flight = f.store.inspect(live.digest(), true);
    REQUIRE(in_flight.has_value());
    CHECK_FALSE(in_flight->completed);
    CHECK_FALSE(in_flight->payload.has_value());
    auto without = f.store.inspect(done.digest(), false);
    REQUIRE(without.has_value());
    CHECK(without->payload_bytes == 4);
    CHECK_FALSE(without->payload.has_value());
    CHECK(f.store.inspect(idem::record_key("admin", "absent").digest(), true) == std::nullopt);
    auto gone = f.store.inspect(expired.front().digest(), false);
    REQUIRE(gone.has_value());
    CHECK(gone->expired());

    CHECK(f.store.count_expired(0s) == 7);
    CHECK(f.store.count_expired(1h) == 0);  // none expired an hour ago
    CHECK(f.store.purge_batch(5, 1h) == 0);
    CHECK(f.store.purge_batch(5, 0s) == 5);
    CHECK(f.store.purge_expired(100) == 2);
    CHECK(f.store.count_expired(0s) == 0);
    CHECK(f.records() == 2);
    CHECK(f.store.try_reserve(live, "fp", 1h).status == reservation_status::in_flight);
    CHECK(f.store.try_reserve(done, "fp", 1h).payload == "kept");
    CHECK(f.store.complete(live, l.token, "fp", "mine", 1h));

    CHECK_THROWS_AS((void)f.store.purge_batch(0, 0s), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store.purge_batch(1, -1s), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store.count_expired(-1s), std::invalid_argument);
}

TEST_CASE("postgresql store: forget waits for a transaction taking an expired record over, then keeps it") {
    fixture f;
    const idem::record_key k("forget", "held");
    REQUIRE(f.store.try_reserve(k, "fp", 50ms).status == reservation_status::reserved);
    std::this_thread::sleep_for(100ms);  // expired: forget would delete it without --force
    std::promise<void> taken, go_on;
    std::future<void> business = std::async(std::launch::async, [&] {
        f.runner->run([&](unit_of_work& tx) {
            const auto r = f.store.try_reserve(tx, k, "fp", 1h);  // takes it over; the row stays locked
            taken.set_value();
            go_on.get_future().wait();
            if (r.status != reservation_status::reserved) throw std::runtime_error("not taken over");
        });
    });
    taken.get_future().wait();
    std::future<idem::forget_result> forgetting =
        std::async(std::launch::async, [&] { return f.store.forget(k.digest(), false); });
    CHECK(forgetting.wait_for(300ms) == std::future_status::timeout);  // waiting for that lock
    go_on.set_value();
    business.get();
    const idem::forget_result result = forgetting.get();
    CHECK(result.outcome == idem::forget_outcome::refused_in_flight);  // live again by then: kept
    CHECK_FALSE(result.record.expired());
    CHECK(f.records() == 1);
    CHECK(f.store.forget(k.digest(), true).outcome == idem::forget_outcome::deleted);

    // A reservation an open transaction has not committed is no record yet, to anyone else.
    std::promise<void> reserved, finish;
    business = std::async(std::launch::async, [&] {
        f.runner->run([&](unit_of_work& tx) {
            const auto r = f.store.try_reserve(tx, k, "fp", 1h);
            reserved.set_value();
            finish.get_future().wait();
            if (r.status != reservation_status::reserved) throw std::runtime_error("not reserved");
        });
    });
    reserved.get_future().wait();
    CHECK(f.store.forget(k.digest(), false).outcome == idem::forget_outcome::not_found);
    finish.set_value();
    business.get();
    CHECK(f.store.forget(k.digest(), false).outcome == idem::forget_outcome::refused_in_flight);
    CHECK(f.records() == 1);
}

TEST_CASE("postgresql store: rows past 2262, 'infinity' and '-infinity' are read, inspected and purged") {
    fixture f;
    const std::map<std::string, std::string> times = {
        {"future", "'2300-01-01 00:00:00+00'"}, {"infinity", "'infinity'"}, {"-infinity", "'-infinity'"}};
    idem::test::times_beyond_time_point_are_clamped(
        f.store, f.session, f.store, [&](const std::string& key, const std::string& which) {
            f.session << "UPDATE idem_records SET expires_at = " + times.at(which) +
                             ", created_at = " + times.at(which) + " WHERE key_hash = '\\x" +
                             idem::test::record_id_hex(idem::record_key("far", key)) + "'";
        });
}

TEST_CASE("postgresql store: migrate is versioned and idempotent; a missing schema is a schema error") {
    fixture f;
    CHECK(f.store.migrate().empty());
    CHECK(f.store.migrate().empty());
    CHECK(bank::count(f.session, "SELECT count(*) FROM idem_schema_versions") == 13);

    {
        idem::test::scratch_database scratch(f.conninfo, "fresh");
        const std::string& fresh = scratch.conninfo();
        idem::postgresql_store store{{.connection = fresh, .migrate_on_open = false}};
        const auto e = store_error_of([&] { (void)store.try_reserve(idem::record_key("m", "k"), "fp", 1min); });
        CHECK(e.failure() == store_failure::schema);
        CHECK(e.native_code() == "42P01");
        CHECK(std::string(e.what()).find("migrate") != std::string::npos);
        CHECK(store.migrate() == std::vector<std::string>{"0001_create_records", "0002_purge_by_insertion_order",
                                                          "0003_purge_by_expiry", "0004_lean_records", "0005_outbox",
                                                          "0006_steps", "0007_completer", "0008_outbox_claim_order",
                                                          "0009_operation_failures", "0010_outbox_lean",
                                                          "0011_outbox_intake", "0012_tombstones", "0013_scope_ids"});
        CHECK(store.migrate().empty());
        CHECK(store.try_reserve(idem::record_key("m", "k"), "fp", 1min).status == reservation_status::reserved);

        // A schema newer than this library is refused, not used.
        soci::session s;
        idem::open_postgresql_session(s, fresh);
        s << "INSERT INTO idem_schema_versions (version, name) VALUES (99, '0099_future')";
        CHECK(store_error_of([&] { (void)store.migrate(); }).failure() == store_failure::schema);
    }
}

namespace {

// The whole digest: the first schema's primary key.
std::string bytea_of(const idem::record_key& key) {
    return "'\\x" + idem::test::digest_hex(key) + "'::bytea";
}

}  // namespace

TEST_CASE("postgresql store: a table of the first schema, with rows in it, moves to the current layout") {
    fixture f;
    idem::test::scratch_database scratch(f.conninfo, "from_0001");
    soci::session s;
    idem::open_postgresql_session(s, scratch.conninfo());
    // What version 1 left: its schema, its version row and records in all three states.
    idem::test::migrate_through(s, idem::test::migration_files(IDEM_SOURCE_ROOT "/migrations/postgresql"), 1);
    const idem::record_key done("m", "done"), running("m", "running"), gone("m", "gone");
    const std::string columns =
        "INSERT INTO idem_records (key_hash, namespace, scope, key, token, fingerprint, "
        "payload, completed, created_at, expires_at) VALUES (";
    s << columns + bytea_of(done) +
             ", 'm', 'global', 'done', 'tok-d', 'fp', 'paid', true, now(), now() + interval '1 hour')";
    s << columns + bytea_of(running) +
             ", 'm', 'global', 'running', 'tok-r', 'fp', NULL, false, now(), now() + interval '10 minutes')";
    s << columns + bytea_of(gone) +
             ", 'm', 'global', 'gone', 'tok-g', 'fp', 'old', true, now() - interval '2 hours', now() - interval '1 "
             "hour')";

    idem::postgresql_store store{{.connection = scratch.conninfo()}};  // migrates on open
    CHECK(bank::count(s, "SELECT count(*) FROM idem_schema_versions") == 13);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_tombstones") == 0);  // nothing was remembered before
    // Keyed by the digest's first 16 bytes, without the key and scope text.
    CHECK(bank::count(s, "SELECT count(*) FROM idem_records WHERE key_hash = '\\x" + idem::test::record_id_hex(done) +
                             "'") == 1);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_records WHERE octet_length(key_hash) <> 16") == 0);
    CHECK(bank::count(s,
                      "SELECT count(*) FROM information_schema.columns WHERE table_name = 'idem_records'"
                      " AND column_name IN ('scope', 'key')") == 0);
    CHECK(bank::count(s, "SELECT count(*) FROM pg_indexes WHERE indexname = 'idem_records_inserted_at'") == 0);
    CHECK(bank::count(s, "SELECT count(*) FROM pg_indexes WHERE indexname = 'idem_records_expires_at'") == 1);
    CHECK(bank::count(s,
                      "SELECT count(*) FROM pg_class WHERE relname = 'idem_records'"
                      " AND 'fillfactor=90' = ANY (reloptions)") == 1);

    // The rows mean what they meant.
    const auto replay = store.try_reserve(done, "fp", 1min);
    CHECK(replay.status == reservation_status::completed);
    CHECK(replay.payload == "paid");
    CHECK(store.try_reserve(running, "fp", 1min).status == reservation_status::in_flight);
    CHECK(store.complete(running, "tok-r", "fp", "finished", 1h));
    CHECK(store.count_expired(0s) == 1);
    CHECK(store.purge_batch(100, 0s) == 1);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_records") == 2);
    CHECK(store.try_reserve(gone, "fp", 1min).status == reservation_status::reserved);

    // Purging walks the expires_at index and stops at the first live row: with
    // ten thousand live rows and none expired, the purge's scan (its statement's
    // shape) reads no row, and the purge deletes none.
    s << "INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, completed,"
         " created_at, expires_at) SELECT substring(sha256(i::text::bytea) FROM 1 FOR 16), 'm', 'tok', 'fp', 'p', true,"
         " now(), now() + interval '1 day' + i * interval '1 second' FROM generate_series(1, 10000) AS i";
    s << "ANALYZE idem_records";
    std::string plan;
    soci::rowset<std::string> lines = (s.prepare << "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)"
                                                    " SELECT key_hash FROM idem_records"
                                                    " WHERE expires_at <= (SELECT clock_timestamp() - interval '0')"
                                                    " ORDER BY expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED");
    for (const std::string& l : lines) plan += l + "\n";
    CAPTURE(plan);
    CHECK(plan.find("Index Scan using idem_records_expires_at") != std::string::npos);
    CHECK(plan.find("Index Cond: (expires_at <= $0)") != std::string::npos);
    CHECK(plan.find("Rows Removed by Filter") == std::string::npos);
    CHECK(store.purge_batch(1000, 0s) == 0);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_records") == 10003);
}

TEST_CASE("postgresql store: bad settings and unreachable servers are typed errors") {
    CHECK_THROWS_AS(idem::postgresql_store({.connection = ""}), idem::options_error);
    CHECK_THROWS_AS(idem::postgresql_store({.connection = "this is not a conninfo"}), std::invalid_argument);
    CHECK_THROWS_AS(idem::postgresql_store({.connection = "postgresql://host:notaport/db"}), std::invalid_argument);
    CHECK_THROWS_AS(idem::postgresql_store({.connection = "postgresql://host/db?no_such_option=1"}),
                    std::invalid_argument);
    CHECK_THROWS_AS(idem::postgresql_store({.connection = "host=127.0.0.1 sslmode=sometimes"}), std::invalid_argument);
    const std::string conninfo = idem::test::shared_postgres();
    CHECK_THROWS_AS(idem::postgresql_store({.connection = conninfo, .pool_size = 0}), idem::options_error);
    CHECK_THROWS_AS(idem::postgresql_store({.connection = conninfo, .lock_timeout = -1ms}), idem::options_error);

    // Nothing listens there: connection_lost (transient).
    const auto down = store_error_of(
        [] { idem::postgresql_store store({.connection = "host=127.0.0.1 port=1 connect_timeout=2 dbname=x"}); });
    CHECK(down.is_connection_lost());
    CHECK(down.is_transient());
    // The server answers but refuses the database: not transient.
    const auto refused =
        store_error_of([&] { idem::postgresql_store store({.connection = conninfo + " dbname=no_such_database"}); });
    CHECK(refused.failure() == store_failure::other);
    CHECK_FALSE(refused.is_transient());
    CHECK(std::string(refused.what()).find("no_such_database") != std::string::npos);

    // A postgresql:// URI works as well as key=value pairs.
    idem::postgresql_store by_uri({.connection = uri_of(conninfo)});
    CHECK(by_uri.try_reserve(idem::record_key("uri", "k"), "fp", 1min).status == reservation_status::reserved);
}

TEST_CASE("postgresql store: connection strings reach libpq intact: URIs, quoted values with spaces and quotes") {
    const std::string conninfo = idem::test::shared_postgres();
    auto application_name = [](const std::string& connection) {
        soci::session s;
        idem::open_postgresql_session(s, connection);
        std::string name;
        s << "SELECT current_setting('application_name')", soci::into(name);
        return name;
    };
    CHECK(application_name(conninfo + R"( application_name='teller \'7\' of bank')") == "teller '7' of bank");
    CHECK(application_name(uri_of(conninfo) + "?application_name=a%20b%26c") == "a b&c");
    CHECK(application_name(conninfo) == "idem");  // the fallback name, when the caller gives none
}

TEST_CASE("postgresql store: a transaction on another database is refused before anything is written") {
    fixture f;
    idem::test::scratch_database other(f.conninfo, "other");
    {
        soci::session elsewhere;
        idem::open_postgresql_session(elsewhere, other.conninfo());
        idem::transaction_runner runner{elsewhere};
        CHECK_THROWS_AS(runner.run([&](unit_of_work& tx) {
            (void)f.store.try_reserve(tx, bank::transfer_key("x"), bank::fingerprint, 1min);
        }),
                        std::invalid_argument);
    }
}

TEST_CASE("postgresql store: lock and statement timeouts, deadlocks: typed, transient, without the key") {
    fixture f;
    idem::postgresql_store impatient{{.connection = f.conninfo, .lock_timeout = 100ms}};
    std::promise<void> holding;
    std::promise<void> done;
    std::jthread holder([&] {
        f.runner->run([&](unit_of_work& tx) {
            auto r = f.store.try_reserve(tx, bank::transfer_key("secret-key"), bank::fingerprint, 1min);
            REQUIRE(r.status == reservation_status::reserved);
            holding.set_value();
            done.get_future().wait();
        });
    });
    holding.get_future().wait();

    const auto locked =
        store_error_of([&] { (void)impatient.try_reserve(bank::transfer_key("secret-key"), bank::fingerprint, 1min); });
    CHECK(locked.failure() == store_failure::timeout);
    CHECK(locked.native_code() == "55P03");
    CHECK(locked.is_transient());
    CHECK(std::string(locked.what()).find("secret-key") == std::string::npos);

    fixture::other_connection other(f.conninfo);
    other.session << "SET statement_timeout = 100";
    const auto cancelled = store_error_of([&] { (void)bank::transfer(f.store, *other.runner, "secret-key", 1); });
    CHECK(cancelled.failure() == store_failure::timeout);
    CHECK(cancelled.native_code() == "57014");
    CHECK(other.runner->last_state() == idem::transaction_state::rolled_back);
    done.set_value();
    holder.join();

    // Two transactions reserving two keys in opposite orders: PostgreSQL breaks the cycle.
    other.session << "SET statement_timeout = 0";
    std::atomic<int> conflicts{0};
    std::atomic<int> committed{0};
    auto cross = [&](idem::transaction_runner& runner, const std::string& a, const std::string& b,
                     std::promise<void>& mine, std::shared_future<void> theirs) {
        try {
            runner.run([&](unit_of_work& tx) {
                REQUIRE(f.store.try_reserve(tx, bank::transfer_key(a), bank::fingerprint, 1min).status ==
                        reservation_status::reserved);
                mine.set_value();
                theirs.wait();
                (void)f.store.try_reserve(tx, bank::transfer_key(b), bank::fingerprint, 1min);
            });
            ++committed;
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == store_failure::conflict);
            CHECK(e.native_code() == "40P01");
            ++conflicts;
        }
    };
    std::promise<void> first_holds, second_holds;
    std::shared_future<void> first_ready = first_holds.get_future().share();
    std::shared_future<void> second_ready = second_holds.get_future().share();
    std::jthread one([&] { cross(*f.runner, "d-1", "d-2", first_holds, second_ready); });
    std::jthread two([&] { cross(*other.runner, "d-2", "d-1", second_holds, first_ready); });
    one.join();
    two.join();
    CHECK(conflicts == 1);
    CHECK(committed == 1);
}

TEST_CASE("postgresql store: its own connection to a server that stops answering (SIGSTOP) ends after answer_timeout") {
    // A stopped server's kernel acknowledges TCP and keepalive probes: only the watch ends the wait.
    idem::test::postgres_server server;
    idem::postgresql_store store{{.connection = server.conninfo(), .answer_timeout = 1s}};
    REQUIRE(store.try_reserve(bank::transfer_key("warm"), bank::fingerprint, 1min).status ==
            reservation_status::reserved);
    server.signal_all(SIGSTOP);
    const auto start = std::chrono::steady_clock::now();
    auto pending = std::async(std::launch::async, [&] {
        return store_error_of([&] { (void)store.try_reserve(bank::transfer_key("stopped"), bank::fingerprint, 1min); });
    });
    const bool ended = pending.wait_for(11s) == std::future_status::ready;
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    server.signal_all(SIGCONT);
    REQUIRE_MESSAGE(ended, "the reservation still waited on the stopped server 11 s later");
    const auto lost = pending.get();
    CHECK(lost.failure() == store_failure::connection_lost);
    MESSAGE("the store's own connection to a stopped server ended after " << took.count()
                                                                          << " ms (answer_timeout 1000 ms)");
    CHECK(took >= 900ms);
    CHECK(took < 4s);
    // Running again: the next call opens a fresh connection.
    CHECK(store.try_reserve(bank::transfer_key("after"), bank::fingerprint, 1min).status ==
          reservation_status::reserved);
}
