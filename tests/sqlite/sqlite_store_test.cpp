// The SQLite store in the caller's transaction, its schema, and bad input.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <span>

#include "far_times_scenario.hpp"
#include "idem/error.hpp"
#include "key_hex.hpp"
#include "migration_files.hpp"
#include "sqlite_bank.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;
using bank::business_failure;
using idem::reservation_status;
using idem::unit_of_work;

const idem::sqlite_connection_options fast{5s, idem::sqlite_synchronous::normal};

struct fixture {
    idem::test::temp_dir dir{"sqlite-store"};
    std::string db = (dir.path() / "app.db").string();
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    idem::sqlite_store store{{.path = db, .connection = fast, .time = clock}};
    soci::session session;
    std::unique_ptr<idem::transaction_runner> runner;

    fixture() {
        idem::open_sqlite_session(session, db, fast);
        bank::create_schema(session);
        runner = std::make_unique<idem::transaction_runner>(session);
    }

    [[nodiscard]] reservation_status detached_status(const std::string& key) {
        return bank::detached_status(store, key);
    }
};

}  // namespace

TEST_CASE("sqlite store: a record write that fails inside a savepoint keeps the business data") {
    fixture f;
    // The detached view reserves (Observe), the business commits whatever the record write does.
    auto r = f.store.try_reserve(bank::transfer_key("t-6"), bank::fingerprint, 1min);
    REQUIRE(r.status == reservation_status::reserved);
    REQUIRE(f.store.release(bank::transfer_key("t-6"), r.token));
    // This connection's record writes fail, as a lock or statement timeout would.
    f.session
        << "CREATE TEMP TRIGGER refuse_records BEFORE INSERT ON idem_records BEGIN SELECT RAISE(ABORT, 'refused'); END";

    f.runner->run([&](unit_of_work& tx) {
        bank::move_money(tx.sql(), "t-6", 10);
        try {
            tx.savepoint([&] {
                (void)f.store.complete(tx, bank::transfer_key("t-6"), r.token, bank::fingerprint, "moved 10", 24h);
            });
            FAIL("the record write succeeded");
        } catch (const idem::store_error& e) {
            CHECK(e.native_code() == "1811");  // SQLITE_CONSTRAINT_TRIGGER
        }
        CHECK(tx.state() == idem::transaction_state::active);
    });
    CHECK(f.runner->last_state() == idem::transaction_state::committed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 1);
    CHECK(bank::count(f.session, "SELECT count(*) FROM idem_records") == 0);
}

TEST_CASE("sqlite store: rows are keyed by the digest's first 16 bytes and hold no key or scope text") {
    fixture f;
    const idem::record_key key("orders", idem::scope::tenant("acme"), "order-17");
    const std::string payload("\x00\x01\xff binary", 10);
    f.runner->run([&](unit_of_work& tx) {
        auto r = f.store.try_reserve(tx, key, "fp", 1min);
        REQUIRE(f.store.complete(tx, key, r.token, "fp", payload, 24h));
    });
    std::string ns;
    long long hash_bytes = 0, state = 0;
    std::string hash_hex;
    f.session << "SELECT namespace, length(key_hash), lower(hex(key_hash)), state FROM idem_records", soci::into(ns),
        soci::into(hash_bytes), soci::into(hash_hex), soci::into(state);
    CHECK(ns == "orders");
    CHECK(hash_bytes == 16);
    CHECK(bank::count(f.session,
                      "SELECT count(*) FROM pragma_table_info('idem_records')"
                      " WHERE name IN ('scope', 'key')") == 0);
    CHECK(hash_hex == idem::test::record_id_hex(key));
    CHECK(state == 1);
    CHECK(f.store.try_reserve(key, "fp", 1min).payload == payload);
}

TEST_CASE("sqlite store: a transaction on another database file is refused") {
    fixture f;
    soci::session elsewhere;
    idem::open_sqlite_session(elsewhere, (f.dir.path() / "other.db").string(), fast);
    idem::transaction_runner runner{elsewhere};
    CHECK_THROWS_AS(runner.run([&](unit_of_work& tx) {
        (void)f.store.try_reserve(tx, bank::transfer_key("x"), bank::fingerprint, 1min);
    }),
                    std::invalid_argument);
}

TEST_CASE("sqlite store: the database runs in WAL mode, the application's session too") {
    fixture f;
    std::string mode;
    f.session << "PRAGMA journal_mode", soci::into(mode);
    CHECK(mode == "wal");
    int synchronous = -1;
    f.session << "PRAGMA synchronous", soci::into(synchronous);
    CHECK(synchronous == 1);  // NORMAL
}

TEST_CASE("sqlite store: migrate applies each migration once") {
    idem::test::temp_dir dir{"sqlite-migrate"};
    const std::string db = (dir.path() / "m.db").string();
    idem::sqlite_store lazy{{.path = db, .connection = fast, .migrate_on_open = false}};
    // Without the schema, the store says so.
    try {
        (void)lazy.try_reserve(bank::transfer_key("x"), bank::fingerprint, 1min);
        FAIL("reserve worked without a schema");
    } catch (const idem::store_error& e) {
        CHECK(e.failure() == idem::store_failure::schema);
    }
    CHECK(lazy.migrate() == std::vector<std::string>{"0001_create_records", "0002_lean_records", "0003_outbox",
                                                     "0004_steps", "0005_completer", "0006_outbox_claim_order",
                                                     "0007_operation_failures", "0008_outbox_lean",
                                                     "0009_outbox_intake", "0010_tombstones", "0011_scope_ids"});
    CHECK(lazy.migrate().empty());
    idem::sqlite_store again{{.path = db, .connection = fast}};  // migrates on open: nothing to do
    CHECK(again.migrate().empty());
    CHECK(lazy.try_reserve(bank::transfer_key("x"), bank::fingerprint, 1min).status == reservation_status::reserved);

    soci::session session;
    idem::open_sqlite_session(session, db, fast);
    CHECK(bank::count(session, "SELECT count(*) FROM idem_schema_versions") == 11);
    // A schema from a newer library is not touched.
    session << "INSERT INTO idem_schema_versions (version, name) VALUES (9999, '9999_future')";
    try {
        (void)again.migrate();
        FAIL("migrated over a newer schema");
    } catch (const idem::store_error& e) {
        CHECK(e.failure() == idem::store_failure::schema);
    }
}

TEST_CASE("sqlite store: a table of the first schema, with rows in it, moves to the current layout") {
    idem::test::temp_dir dir{"sqlite-from-0001"};
    const std::string db = (dir.path() / "old.db").string();
    const auto now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const idem::record_key done("m", idem::scope::tenant("acme"), "done"), running("m", "running"), gone("m", "gone");
    {
        // What version 1 left: its schema, its version row and records in all three states.
        soci::session s;
        idem::open_sqlite_session(s, db, fast);
        idem::test::migrate_through(s, idem::test::migration_files(IDEM_SOURCE_ROOT "/migrations/sqlite"), 1);
        const auto row = [&](const idem::record_key& key, const std::string& token, const std::string& rest) {
            s << "INSERT INTO idem_records (key_hash, namespace, scope, key, fingerprint, token, state, payload,"
                 " expires_at, updated_at) VALUES (X'" +
                     idem::test::digest_hex(key) + "', 'm', '" + key.owner().text() + "', '" + key.key() +
                     "', X'6670', '" + token + "', " + rest + ")";
        };
        row(done, "tok-d", "1, X'70616964', " + std::to_string(now + 3'600'000) + ", " + std::to_string(now));
        row(running, "tok-r", "0, NULL, " + std::to_string(now + 600'000) + ", " + std::to_string(now));
        row(gone, "tok-g", "1, X'6f6c64', " + std::to_string(now - 3'600'000) + ", " + std::to_string(now - 7'200'000));
    }

    idem::sqlite_store store{{.path = db, .connection = fast}};  // migrates on open
    soci::session s;
    idem::open_sqlite_session(s, db, fast);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_schema_versions") == 11);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_tombstones") == 0);  // nothing was remembered before
    CHECK(bank::count(s, "SELECT count(*) FROM idem_records WHERE length(key_hash) = 16") == 3);
    CHECK(bank::count(
              s, "SELECT count(*) FROM idem_records WHERE key_hash = X'" + idem::test::record_id_hex(done) + "'") == 1);
    CHECK(bank::count(s, "SELECT count(*) FROM pragma_table_info('idem_records') WHERE name IN ('scope', 'key')") == 0);
    CHECK(bank::count(s, "SELECT count(*) FROM sqlite_master WHERE name = 'idem_records_expires_at'") == 1);
    CHECK(bank::count(s, "SELECT count(*) FROM sqlite_master WHERE name = 'idem_records_lean'") == 0);

    // The rows mean what they meant.
    const auto replay = store.try_reserve(done, "fp", 1min);
    CHECK(replay.status == reservation_status::completed);
    CHECK(replay.payload == "paid");
    CHECK(store.try_reserve(done, "other", 1min).status == reservation_status::fingerprint_mismatch);
    CHECK(store.try_reserve(running, "fp", 1min).status == reservation_status::in_flight);
    CHECK(store.complete(running, "tok-r", "fp", "finished", 1h));
    CHECK(store.try_reserve(running, "fp", 1min).payload == "finished");
    CHECK(store.count_expired(0s) == 1);
    CHECK(store.purge_batch(100, 0s) == 1);
    CHECK(bank::count(s, "SELECT count(*) FROM idem_records") == 2);
    CHECK(store.try_reserve(gone, "fp", 1min).status == reservation_status::reserved);
}

TEST_CASE("sqlite store: corrupted rows give corrupt_record errors that name only the key hash") {
    fixture f;
    const idem::record_key key("orders", idem::scope::tenant("acme"), "secret-order-key");
    auto plant = [&](const std::string& set) {
        f.session << "DELETE FROM idem_records";
        auto r = f.store.try_reserve(key, "fp", 1min);
        REQUIRE(r.status == reservation_status::reserved);
        f.session << "PRAGMA ignore_check_constraints = ON";
        f.session << "UPDATE idem_records SET " + set;
        f.session << "PRAGMA ignore_check_constraints = OFF";
    };
    // Each breaks one rule the schema's CHECKs keep (planted with them switched off).
    for (const std::string set : {"token = ''", "state = 7", "expires_at = 'soon'", "state = 1, payload = NULL",
                                  "fingerprint = 'fp'", "state = 1, payload = 'text, not a blob'"}) {
        CAPTURE(set);
        plant(set);
        try {
            (void)f.store.try_reserve(key, "fp", 1min);
            FAIL("a corrupted row was read");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::corrupt_record);
            const std::string message = e.what();
            CHECK(message.find(key.key_hash()) != std::string::npos);
            CHECK(message.find("secret-order-key") == std::string::npos);
            CHECK(message.find("acme") == std::string::npos);
        }
        if (set.starts_with("state") || set.starts_with("expires_at")) {  // what inspect reads too
            CHECK_THROWS_AS((void)f.store.inspect(key.digest(), true), idem::store_error);
            CHECK_THROWS_AS((void)f.store.inspect(key.digest(), false), idem::store_error);
        }
    }
    // The schema itself refuses rows idem never writes.
    f.session << "DELETE FROM idem_records";
    auto r = f.store.try_reserve(key, "fp", 1min);
    CHECK_THROWS_AS(f.session << "UPDATE idem_records SET key_hash = x'00'", soci::soci_error);
    CHECK_THROWS_AS(f.session << "UPDATE idem_records SET token = NULL", soci::soci_error);
    CHECK_THROWS_AS(f.session << "UPDATE idem_records SET state = 1", soci::soci_error);  // completed, no payload
    CHECK(f.store.complete(key, r.token, "fp", "", 1min));
}

TEST_CASE("sqlite store: rows past 2262 and at the ends of int64 are read, inspected and purged without overflow") {
    fixture f;
    const std::map<std::string, std::string> millis = {{"future", "11000000000000"},  // 2318
                                                       {"infinity", "9223372036854775807"},
                                                       {"-infinity", "(-9223372036854775807 - 1)"}};
    idem::test::times_beyond_time_point_are_clamped(
        f.store, f.session, f.store, [&](const std::string& key, const std::string& which) {
            f.session << "UPDATE idem_records SET expires_at = " + millis.at(which) +
                             ", updated_at = " + millis.at(which) + " WHERE key_hash = X'" +
                             idem::test::record_id_hex(idem::record_key("far", key)) + "'";
        });
}

TEST_CASE("sqlite store: bad paths and options give typed errors, not crashes") {
    idem::test::temp_dir dir{"sqlite-bad"};
    auto open = [&](const std::string& path) { idem::sqlite_store s{{.path = path, .connection = fast}}; };
    try {
        open((dir.path() / "missing-directory/app.db").string());
        FAIL("opened a path in a missing directory");
    } catch (const idem::store_error& e) {
        CHECK(!e.is_transient());  // a wrong path: retrying cannot help
        CHECK(e.failure() == idem::store_failure::other);
        CHECK(e.native_code() == "14");  // SQLITE_CANTOPEN
    }
    CHECK_THROWS_AS(open(dir.path().string()), idem::store_error);  // a directory
    { std::ofstream((dir.path() / "garbage.db").string()) << std::string(4096, 'x'); }
    CHECK_THROWS_AS(open((dir.path() / "garbage.db").string()), idem::store_error);  // not a database
    CHECK_THROWS_AS(open(""), idem::options_error);
    CHECK_THROWS_AS(open(":memory:"), idem::options_error);
    CHECK_THROWS_AS(open((dir.path() / "quote\".db").string()), idem::options_error);
    CHECK_THROWS_AS((idem::sqlite_store{{.path = (dir.path() / "a.db").string(), .pool_size = 0}}),
                    idem::options_error);
    CHECK_THROWS_AS((idem::sqlite_store{{.path = (dir.path() / "a.db").string(), .time = nullptr}}),
                    idem::options_error);
    CHECK_THROWS_AS((idem::sqlite_store{{.path = (dir.path() / "a.db").string(),
                                         .connection = {.busy_timeout = std::chrono::milliseconds::max()}}}),
                    idem::options_error);
    // Every problem is named at once.
    try {
        idem::sqlite_store store{{.path = "", .pool_size = 0, .time = nullptr}};
        FAIL("accepted");
    } catch (const idem::options_error& e) {
        CHECK(e.problems().size() == 3);
    }
    // A path with spaces is fine.
    idem::sqlite_store spaced{{.path = (dir.path() / "with some spaces.db").string(), .connection = fast}};
    CHECK(spaced.try_reserve(bank::transfer_key("x"), bank::fingerprint, 1min).status == reservation_status::reserved);
}

TEST_CASE("sqlite store: expiry follows the injected clock, and purge spares live rows") {
    fixture f;
    auto r = f.store.try_reserve(bank::transfer_key("lease"), bank::fingerprint, 30s);
    REQUIRE(r.status == reservation_status::reserved);
    f.runner->run([&](unit_of_work& tx) {
        CHECK(f.store.try_reserve(tx, bank::transfer_key("lease"), bank::fingerprint, 30s).status ==
              reservation_status::in_flight);
    });
    f.clock->advance(31s);
    CHECK(f.store.purge_expired() == 1);
    CHECK(f.store.purge_expired() == 0);
    // Expired and purged: complete still succeeds, the key being absent.
    f.runner->run([&](unit_of_work& tx) {
        CHECK(f.store.complete(tx, bank::transfer_key("lease"), r.token, bank::fingerprint, "late", 1h));
    });
    CHECK(f.store.try_reserve(bank::transfer_key("lease"), bank::fingerprint, 1min).payload == "late");
}

TEST_CASE("sqlite store: the detached view joins this thread's open transaction on the same file") {
    fixture f;
    // SQLite's one write lock is held by the open transaction: a connection of
    // the store's own would wait for it until the busy timeout.
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work&) {
        auto r = f.store.try_reserve(bank::transfer_key("j-1"), bank::fingerprint, 1min);
        CHECK(r.status == reservation_status::reserved);
        throw business_failure();
    }),
                    business_failure);
    CHECK(std::chrono::steady_clock::now() - started < 1s);
    CHECK(f.detached_status("j-1") == reservation_status::reserved);  // it rolled back with the transaction

    // Behind a savepoint: a failing detached call does not fail the transaction.
    f.session
        << "CREATE TEMP TRIGGER refuse_records BEFORE INSERT ON idem_records BEGIN SELECT RAISE(ABORT, 'refused'); END";
    f.runner->run([&](unit_of_work& tx) {
        bank::move_money(tx.sql(), "j-2", 10);
        CHECK_THROWS_AS((void)f.store.try_reserve(bank::transfer_key("j-2"), bank::fingerprint, 1min),
                        idem::store_error);
        CHECK(tx.state() == idem::transaction_state::active);
    });
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 1);
}

TEST_CASE("sqlite store: a transaction on another file does not capture the detached view") {
    fixture f;
    soci::session elsewhere;
    idem::open_sqlite_session(elsewhere, (f.dir.path() / "other.db").string(), fast);
    idem::transaction_runner runner{elsewhere};
    CHECK_THROWS_AS(runner.run([&](unit_of_work&) {
        auto r = f.store.try_reserve(bank::transfer_key("j-3"), bank::fingerprint, 1min);
        CHECK(r.status == reservation_status::reserved);
        throw business_failure();
    }),
                    business_failure);
    CHECK(f.detached_status("j-3") == reservation_status::in_flight);  // committed on the store's own connection
}

TEST_CASE("sqlite store: a retry of finished or running work is answered without waiting for the write lock") {
    fixture f;
    REQUIRE(bank::transfer(f.store, *f.runner, "done", 5) == bank::outcome::executed);
    auto running = f.store.try_reserve(bank::transfer_key("running"), bank::fingerprint, 1min);
    REQUIRE(running.status == reservation_status::reserved);

    // Another process holds the file's only write lock for a while.
    soci::session writer;
    idem::open_sqlite_session(writer, f.db, fast);
    writer << "BEGIN IMMEDIATE";
    const auto start = std::chrono::steady_clock::now();
    std::future<std::pair<reservation_status, reservation_status>> answers = std::async(std::launch::async, [&] {
        return std::pair{f.store.try_reserve(bank::transfer_key("done"), bank::fingerprint, 1min).status,
                         f.store.try_reserve(bank::transfer_key("running"), bank::fingerprint, 1min).status};
    });
    REQUIRE(answers.wait_for(2s) == std::future_status::ready);
    const auto [done, in_flight] = answers.get();
    CHECK(done == reservation_status::completed);
    CHECK(in_flight == reservation_status::in_flight);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK(f.store.try_reserve(bank::transfer_key("done"), "other", 1min).status ==
          reservation_status::fingerprint_mismatch);

    // A fresh key needs the lock: it waits for the writer, then reserves.
    auto fresh = std::async(std::launch::async, [&] {
        return f.store.try_reserve(bank::transfer_key("fresh"), bank::fingerprint, 1min).status;
    });
    CHECK(fresh.wait_for(200ms) == std::future_status::timeout);
    writer << "COMMIT";
    CHECK(fresh.get() == reservation_status::reserved);
}

TEST_CASE("sqlite store: an expired entry is not answered by the read; the reservation takes it over") {
    fixture f;
    auto first = f.store.try_reserve(bank::transfer_key("k"), bank::fingerprint, 1min);
    REQUIRE(first.status == reservation_status::reserved);
    f.clock->advance(2min);
    auto again = f.store.try_reserve(bank::transfer_key("k"), bank::fingerprint, 1min);
    CHECK(again.status == reservation_status::reserved);
    CHECK(again.token != first.token);
}
