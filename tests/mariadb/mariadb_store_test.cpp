// What only MariaDB has, on a throwaway server kept as it ships (latin1 with
// a case-insensitive collation, REPEATABLE READ): idem's tables and sessions
// do not depend on those defaults, keys and ordering keys compare byte for
// byte without padding, the URL form and its refusals, and the server's
// failures as typed errors.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "idem/database.hpp"
#include "idem/error.hpp"
#include "idem/mariadb_store.hpp"
#include "idem/outbox_relay.hpp"
#include "mariadb_server.hpp"

namespace {

using namespace std::chrono_literals;

long long count(idem::database& db, const std::string& text) {
    return db.read([&](soci::session& sql) {
        long long n = -1;
        sql << text, soci::into(n);
        return n;
    });
}

}  // namespace

TEST_CASE("mariadb: idem's tables and sessions do not take the server's latin1 and REPEATABLE READ defaults") {
    const idem::test::mariadb_scratch_database scratch(idem::test::shared_mariadb(), "defaults");
    idem::database db = idem::database::open(scratch.connection());
    db.migrate();
    CHECK(count(db,
                "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = DATABASE() AND "
                "default_character_set_name = 'latin1'") == 1);  // the trap is there
    // Every text column of idem's tables compares byte for byte, without padding.
    CHECK(count(db,
                "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND "
                "table_name LIKE 'idem\\_%' AND collation_name IS NOT NULL") > 0);
    CHECK(count(db,
                "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND "
                "table_name LIKE 'idem\\_%' AND collation_name <> 'utf8mb4_nopad_bin'") == 0);
    db.read([](soci::session& sql) {
        std::string isolation, collation;
        sql << "SELECT @@tx_isolation, @@collation_connection", soci::into(isolation), soci::into(collation);
        CHECK(isolation == "READ-COMMITTED");
        CHECK(collation == "utf8mb4_nopad_bin");
    });
}

TEST_CASE("mariadb: tenants abc, ABC and 'abc ' are three records; ordering keys a and 'a ' two queues") {
    const idem::test::mariadb_scratch_database scratch(idem::test::shared_mariadb(), "collation");
    idem::database db = idem::database::open(scratch.connection());
    db.migrate();
    int ran = 0;
    for (const char* tenant : {"abc", "ABC", "abc "}) {
        const idem::record_key key("bank.transfer", idem::scope::tenant(tenant), "k1");
        auto e = db.once(key, "fp", [&](idem::unit_of_work&) { return ++ran; });
        CHECK(e.status() == idem::execution_status::executed);
    }
    CHECK(ran == 3);
    CHECK(count(db, "SELECT COUNT(*) FROM idem_records") == 3);
    CHECK(count(db, "SELECT COUNT(DISTINCT scope_id) FROM idem_records") == 3);

    // One message of each key: two queues, so one claim of two takes both.
    for (const char* key : {"a", "a "})
        db.transact(
            [&](idem::unit_of_work& uow) { (void)uow.publish({.topic = "t", .payload = key, .ordering_key = key}); });
    int delivered = 0;
    auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery&) {
        ++delivered;
        return idem::delivery_result::delivered();
    });
    idem::outbox_relay relay(db, sink, {.batch = 2});
    CHECK(relay.run_once() == 2);
    CHECK(delivered == 2);
}

TEST_CASE("mariadb: a malformed URL is std::invalid_argument that never repeats the password") {
    for (const char* url : {"mariadb://app:s3cret@db/", "mariadb://app:s3cret@db:99999/bank",
                            "mysql://app:s3cret@db/bank?colour=blue", "mariadb://app:s3cret@db/bank%zz"}) {
        CAPTURE(url);
        try {
            (void)idem::database::open(url);
            FAIL("opened");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
        }
    }
}

TEST_CASE("mariadb: a row held past the lock wait is a transient timeout; a stopped server is connection_lost") {
    idem::test::mariadb_server server;
    const std::string url = server.connection();
    idem::database db = idem::database::open(url, {.attempts = 1});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id VARCHAR(16) PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts VALUES ('alice', 100)";
    });
    {
        // Another session holds alice's row: the store's sessions wait 5 s (lock_wait_timeout), then 1205.
        soci::session holder;
        idem::open_mariadb_session(holder, url);
        holder << "START TRANSACTION";
        holder << "UPDATE accounts SET balance = 0 WHERE id = 'alice'";
        try {
            db.transact(
                [](idem::unit_of_work& uow) { uow.sql() << "UPDATE accounts SET balance = 1 WHERE id = 'alice'"; });
            FAIL("the row was not held");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::timeout);
            CHECK(e.native_code() == "1205");
            CHECK(e.is_transient());
        }
        holder << "ROLLBACK";
    }
    server.stop();
    try {
        (void)db.once(idem::record_key("bank.transfer", "down"), "fp", [](idem::unit_of_work&) { return 1; });
        FAIL("ran on a stopped server");
    } catch (const idem::store_error& e) {
        CHECK(e.failure() == idem::store_failure::connection_lost);
    }
}
