// What only MariaDB has, on a throwaway server kept as it ships (latin1 with
// a case-insensitive collation, REPEATABLE READ): idem's tables and sessions
// do not depend on those defaults, keys and ordering keys compare byte for
// byte without padding, the URL form and its refusals, and the server's
// failures as typed errors.
#include <doctest/doctest.h>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <signal.h>
#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "idem/database.hpp"
#include "idem/error.hpp"
#include "idem/mariadb_store.hpp"
#include "idem/outbox_relay.hpp"
#include "idem/transaction_runner.hpp"
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
    // Units of work at that level send no SET TRANSACTION (the session is at it); one at another
    // level does, and runs at the level it asked for.
    idem::database one = idem::database::open(scratch.connection(), {.pool_size = 1});
    const auto set_statements = [&] {
        return one.read([](soci::session& sql) {
            std::string name;
            long long n = -1;
            sql << "SHOW SESSION STATUS LIKE 'Com_set_option'", soci::into(name), soci::into(n);
            return n;
        });
    };
    const long long before = set_statements();
    for (int i = 0; i < 10; ++i) one.transact([](idem::unit_of_work& uow) { uow.sql() << "SELECT 1"; });
    CHECK(set_statements() == before);
    soci::session own;
    idem::open_mariadb_session(own, scratch.connection());
    idem::transaction_runner serial(own, {.isolation = idem::isolation_level::serializable});
    for (int i = 0; i < 2; ++i) {
        std::string level;
        long long rows = 0;
        serial.run([&](idem::unit_of_work& uow) {
            uow.sql() << "SELECT COUNT(*) FROM idem_records", soci::into(rows);
            uow.sql() << "SELECT trx_isolation_level FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = "
                         "CONNECTION_ID()",
                soci::into(level);
        });
        CHECK(level == "SERIALIZABLE");
    }
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

TEST_CASE(
    "mariadb: a COMMIT without an answer is in doubt and not run again; a packet too large and a read-only "
    "server are typed") {
    idem::test::mariadb_server server;
    const std::string url = server.connection();
    idem::database db = idem::database::open(url);
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id VARCHAR(16) PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts VALUES ('alice', 100), ('bob', 0)";
    });
    soci::session admin;
    idem::open_mariadb_session(admin, url);
    const auto bob = [&] { return count(db, "SELECT balance FROM accounts WHERE id = 'bob'"); };

    SUBCASE("COMMIT in doubt") {
        // The unit of work writes, then the server holds every COMMIT (BACKUP STAGE BLOCK_COMMIT)
        // and its connection is killed while its COMMIT waits: the client never hears the outcome.
        long long victim_id = 0;
        std::promise<void> written, blocked;
        std::atomic<int> runs{0};
        auto victim = std::async(std::launch::async, [&] {
            db.transact([&](idem::unit_of_work& uow) {
                ++runs;
                uow.sql() << "SELECT CONNECTION_ID()", soci::into(victim_id);
                uow.sql() << "UPDATE accounts SET balance = balance + 9 WHERE id = 'bob'";
                written.set_value();
                blocked.get_future().wait();
            });
        });
        written.get_future().wait();
        admin << "BACKUP STAGE START";
        admin << "BACKUP STAGE BLOCK_COMMIT";
        blocked.set_value();
        int waiting = 0;
        for (int i = 0; i < 500 && waiting == 0; ++i) {
            admin << "SELECT COUNT(*) FROM information_schema.processlist WHERE id = :id AND info LIKE '%COMMIT%' "
                     "AND state LIKE '%backup%'",
                soci::use(victim_id), soci::into(waiting);
            if (waiting == 0) std::this_thread::sleep_for(10ms);
        }
        REQUIRE(waiting == 1);
        admin << "KILL CONNECTION " + std::to_string(victim_id);
        CHECK_THROWS_AS(victim.get(), idem::transaction_in_doubt);
        admin << "BACKUP STAGE END";
        CHECK(runs == 1);
        // Whether it committed is the server's to say (a killed COMMIT waiting for the
        // lock may still commit once it is free): a caller checks, never assumes.
        const long long after = bob();
        CHECK((after == 0 || after == 9));
        MESSAGE("the COMMIT in doubt " << std::string(after == 9 ? "committed" : "rolled back"));
        // The pool dropped the killed session: the next unit of work runs at once.
        db.transact([](idem::unit_of_work& uow) { uow.sql() << "UPDATE accounts SET balance = 1 WHERE id = 'bob'"; });
        CHECK(bob() == 1);
    }

    SUBCASE("a result above max_allowed_packet") {
        admin << "SET GLOBAL max_allowed_packet = 1048576";
        idem::database small = idem::database::open(url);  // sessions opened after the change
        const std::string big(2 * 1024 * 1024, 'x');
        const idem::record_key key("bank.transfer", "big");
        try {
            (void)small.once(key, "fp", [&](idem::unit_of_work& uow) {
                uow.sql() << "UPDATE accounts SET balance = balance + 5 WHERE id = 'bob'";
                return big;
            });
            FAIL("a 2 MiB result was stored under a 1 MiB max_allowed_packet");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::constraint);
            CHECK(std::string(e.what()).find("max_allowed_packet") != std::string::npos);
            CHECK_FALSE(e.is_transient());
        }
        admin << "SET GLOBAL max_allowed_packet = 16777216";
        CHECK(bob() == 0);
        CHECK_FALSE(small.admin().inspect(key.digest(), false).has_value());
    }

    SUBCASE("a read-only server") {
        admin << "SET GLOBAL read_only = 1";
        // The test's session is root's, which read_only does not stop: the store's user is too, so
        // the server refuses through a user without SUPER.
        admin << "CREATE USER IF NOT EXISTS 'clerk'@'127.0.0.1'";
        admin << "GRANT SELECT, INSERT, UPDATE, DELETE ON *.* TO 'clerk'@'127.0.0.1'";
        auto clerk_address = idem::test::mariadb_address::parse(url);
        clerk_address.user = "clerk";
        clerk_address.password.clear();
        idem::database clerk = idem::database::open(clerk_address.url(), {.attempts = 1});
        try {
            clerk.transact(
                [](idem::unit_of_work& uow) { uow.sql() << "UPDATE accounts SET balance = 3 WHERE id = 'bob'"; });
            FAIL("a read-only server took a write");
        } catch (const idem::store_error& e) {
            // A replica, or a primary being demoted: the session is dropped, the next attempt connects anew.
            CHECK(e.failure() == idem::store_failure::connection_lost);
            CHECK(e.native_code() == "1290");
        }
        admin << "SET GLOBAL read_only = 0";
        clerk.transact(
            [](idem::unit_of_work& uow) { uow.sql() << "UPDATE accounts SET balance = 3 WHERE id = 'bob'"; });
        CHECK(bob() == 3);
    }
}

TEST_CASE(
    "mariadb: db.once sends its lookup right behind START TRANSACTION and its record with COMMIT in one compound "
    "statement; a lost race and a failed COMMIT end as they did a statement a round trip") {
    const idem::test::mariadb_scratch_database scratch(idem::test::shared_mariadb(), "fast_path");
    const std::string url = scratch.connection();
    idem::database db = idem::database::open(url, {.pool_size = 1, .attempts = 1});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id VARCHAR(16) PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts VALUES ('alice', 100), ('bob', 0)";
    });
    // The bare transfer: three statements, three round trips.
    const auto transfer = [](idem::unit_of_work& uow) {
        uow.sql() << "UPDATE accounts SET balance = balance - 1 WHERE id = 'alice'";
        uow.sql() << "UPDATE accounts SET balance = balance + 1 WHERE id = 'bob'";
        uow.sql() << "INSERT INTO ledger (amount) VALUES (1)";
        return std::string("moved 1");
    };
    const auto bob = [&] { return count(db, "SELECT balance FROM accounts WHERE id = 'bob'"); };
    const auto key = [](const char* k) { return idem::record_key("bank.transfer", k); };

    SUBCASE("six requests in five round trips, not seven") {
        // The requests the session's connection sent: TCP segments with data (each
        // is far below the MSS, and the client sends with TCP_NODELAY), as the
        // server's counters (Questions, Com_*) count statements; and the statements
        // the server ran. START TRANSACTION and the lookup are two requests sent
        // before either answer is read: one wait.
        const auto status = [&] {
            return db.read([](soci::session& sql) {
                tcp_info info{};
                socklen_t size = sizeof info;
                const int socket = static_cast<int>(
                    mysql_get_socket(static_cast<soci::mysql_session_backend*>(sql.get_backend())->conn_));
                REQUIRE(getsockopt(socket, IPPROTO_TCP, TCP_INFO, &info, &size) == 0);
                long long begins = 0, commits = 0, inserts = 0;
                sql << "SELECT SUM(IF(variable_name = 'COM_BEGIN', variable_value, 0)), "
                       "SUM(IF(variable_name = 'COM_COMMIT', variable_value, 0)), "
                       "SUM(IF(variable_name = 'COM_INSERT', variable_value, 0)) "
                       "FROM information_schema.session_status",
                    soci::into(begins), soci::into(commits), soci::into(inserts);
                return std::array<long long, 4>{info.tcpi_data_segs_out, begins, commits, inserts};
            });
        };
        CHECK(db.once(key("warm"), "fp", transfer).value() == "moved 1");  // the connection's first: one each
        const auto a = status(), b = status();
        CHECK(db.once(key("fresh"), "fp", transfer).value() == "moved 1");
        const auto c = status();
        std::array<long long, 4> once{};
        for (std::size_t i = 0; i < once.size(); ++i) once[i] = (c[i] - b[i]) - (b[i] - a[i]);
        MESSAGE("db.once: " << once[0] << " requests, " << once[1] << " START TRANSACTION, " << once[2] << " COMMIT, "
                            << once[3] << " INSERT");
        CHECK(once[0] == 6);
        CHECK(once[1] == 1);
        CHECK(once[2] == 1);
        CHECK(once[3] == 2);  // the ledger's and the record's
        CHECK(bob() == 2);
        // Replayed: START TRANSACTION and the lookup, then the COMMIT of nothing.
        CHECK(db.once(key("fresh"), "fp", transfer).status() == idem::execution_status::replayed);
        CHECK(bob() == 2);
        // No request carries two statements: the session never took the server's
        // multi-statement option, so an application's statement on it cannot
        // smuggle a second one.
        db.read([](soci::session& sql) {
            MYSQL* conn = static_cast<soci::mysql_session_backend*>(sql.get_backend())->conn_;
            const std::string two = "DO 1; DO 2";
            CHECK(mysql_real_query(conn, two.data(), two.size()) != 0);
            CHECK(mysql_errno(conn) == 1064);
        });
    }

    SUBCASE("a lost race: the duplicate's INSERT ends the compound statement before COMMIT, and the winner answers") {
        idem::database other = idem::database::open(url);
        int runs = 0;
        const auto e = db.once(key("race"), "fp", [&](idem::unit_of_work& uow) {
            if (runs++ == 0)  // the same key committed first by another connection, after this lookup
                CHECK(other.once(key("race"), "fp", [&](idem::unit_of_work& u) { return transfer(u) + "!"; }).value() ==
                      "moved 1!");
            return transfer(uow);
        });
        CHECK(e.status() == idem::execution_status::replayed);
        CHECK(e.value() == "moved 1!");
        CHECK(runs == 1);
        CHECK(bob() == 1);  // the loser's transfer rolled back
        // The connection took its next statements as it should.
        CHECK(db.once(key("after"), "fp", transfer).value() == "moved 1");
        CHECK(bob() == 2);
    }

    SUBCASE("a COMMIT refused: nothing committed, the connection still good") {
        // The server holds every COMMIT (BACKUP STAGE BLOCK_COMMIT) and this session
        // waits 1 s for it: COMMIT answers 1205, after the record's INSERT ran.
        db.read([](soci::session& sql) { sql << "SET SESSION lock_wait_timeout = 1"; });
        soci::session admin;
        idem::open_mariadb_session(admin, url);
        admin << "BACKUP STAGE START";
        admin << "BACKUP STAGE BLOCK_COMMIT";
        try {
            (void)db.once(key("refused"), "fp", transfer);
            FAIL("committed while every COMMIT was held");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::timeout);
            CHECK(e.native_code() == "1205");
            CHECK(e.rolled_back());
        }
        admin << "BACKUP STAGE END";
        CHECK(bob() == 0);
        CHECK_FALSE(db.admin().inspect(key("refused").digest(), false).has_value());
        CHECK(db.once(key("refused"), "fp", transfer).value() == "moved 1");
        CHECK(bob() == 1);
    }

    SUBCASE("a COMMIT without an answer: in doubt, not run again") {
        // The compound statement's COMMIT waits (BACKUP STAGE BLOCK_COMMIT) and its connection is killed.
        const long long victim = db.read([](soci::session& sql) {
            long long id = 0;
            sql << "SELECT CONNECTION_ID()", soci::into(id);
            return id;
        });
        soci::session admin;
        idem::open_mariadb_session(admin, url);
        admin << "BACKUP STAGE START";
        admin << "BACKUP STAGE BLOCK_COMMIT";
        int runs = 0;
        auto once = std::async(std::launch::async, [&] {
            return db.once(key("doubt"), "fp", [&](idem::unit_of_work& uow) {
                ++runs;
                return transfer(uow);
            });
        });
        int waiting = 0;
        for (int i = 0; i < 500 && waiting == 0; ++i) {
            admin << "SELECT COUNT(*) FROM information_schema.processlist WHERE id = :id AND info LIKE '%COMMIT%' "
                     "AND state LIKE '%backup%'",
                soci::use(victim), soci::into(waiting);
            if (waiting == 0) std::this_thread::sleep_for(10ms);
        }
        REQUIRE(waiting == 1);
        admin << "KILL CONNECTION " + std::to_string(victim);
        CHECK_THROWS_AS(once.get(), idem::transaction_in_doubt);
        admin << "BACKUP STAGE END";
        CHECK(runs == 1);
        const long long after = bob();
        CHECK((after == 0 || after == 1));
        MESSAGE("the COMMIT in doubt " << std::string(after == 1 ? "committed" : "rolled back"));
    }
}

TEST_CASE("mariadb: a server that stops answering (SIGSTOP) ends the waiting unit of work after answer_timeout") {
    // mariadbd is one process: stopping it stops every connection's thread,
    // while its kernel still acknowledges TCP.
    idem::test::mariadb_server server;
    constexpr auto bound = 2s;
    idem::database db =
        idem::database::open(server.connection(), {.pool_size = 1, .attempts = 1, .answer_timeout = bound});
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "CREATE TABLE moves (id BIGINT PRIMARY KEY)"; });
    server.process().signal(SIGSTOP);
    const auto start = std::chrono::steady_clock::now();
    auto pending = std::async(std::launch::async, [&] {
        db.transact([](idem::unit_of_work& uow) { uow.sql() << "INSERT INTO moves VALUES (1)"; });
    });
    const bool ended = pending.wait_for(bound + 10s) == std::future_status::ready;
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    server.process().signal(SIGCONT);
    REQUIRE_MESSAGE(ended, "the unit of work still waited on the stopped server 12 s later");
    try {
        pending.get();
        FAIL("the unit of work succeeded against a stopped server");
    } catch (const idem::error& e) {
        CHECK(e.is_connection_lost());
        CHECK(e.rolled_back());
    }
    MESSAGE("a unit of work on a stopped server ended after " << took.count() << " ms (answer_timeout 2000 ms)");
    CHECK(took >= bound - 100ms);
    CHECK(took < bound + 3s);
    CHECK(count(db, "SELECT COUNT(*) FROM moves") == 0);
}
