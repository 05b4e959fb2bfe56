// idem::database behind PgBouncer 1.18 in transaction pooling, where each
// transaction may run on another server connection: with transaction_pooler
// every key runs once and the balances are exact; without it, the statements
// a client prepared on one server connection are missing on the next. The
// completer's passes behind the pooler too, beside other clients' work, and
// every statement of idem's own where a dead client left named statements on
// the server connections.
#include <doctest/doctest.h>

#include <libpq-fe.h>
#include <soci/soci.h>

#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "idem/error.hpp"
#include "idem/outbox_relay.hpp"
#include "pgbouncer.hpp"
#include "postgres_server.hpp"
#include "recording_sink.hpp"
#include "steps_bank.hpp"

namespace {

using namespace std::chrono_literals;
using idem::execution_status;

constexpr int threads = 8, rounds = 40;
constexpr long long opening = 1'000'000;

void create_bank(const std::string& direct) {
    idem::database db = idem::database::open(direct);
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('alice', " + std::to_string(opening) + "), ('bob', 0)";
    });
}

long long balance(idem::database& db, const std::string& id) {
    return db.read([&](soci::session& sql) {
        long long b = -1;
        sql << "SELECT balance FROM accounts WHERE id = :id", soci::use(id), soci::into(b);
        return b;
    });
}

struct tally {
    std::atomic<int> executed{0}, replayed{0}, failed{0};
    std::string first_failure;
    std::atomic_flag noted = ATOMIC_FLAG_INIT;
};

// `threads` threads call once() on the same key each round, moving 10 from alice to bob.
void race(idem::database& db, const std::string& prefix, tally& t) {
    std::barrier start(threads);
    std::vector<std::thread> pool;
    for (int n = 0; n < threads; ++n)
        pool.emplace_back([&] {
            for (int round = 0; round < rounds; ++round) {
                start.arrive_and_wait();
                try {
                    const idem::record_key key{"bank.transfer", idem::scope::tenant("acme"),
                                               prefix + std::to_string(round)};
                    auto e = db.once(key, "fp", [](idem::unit_of_work& uow) {
                        uow.sql() << "UPDATE accounts SET balance = balance - 10 WHERE id = 'alice'";
                        uow.sql() << "UPDATE accounts SET balance = balance + 10 WHERE id = 'bob'";
                        return std::string("moved 10");
                    });
                    if (e.status() == execution_status::executed)
                        ++t.executed;
                    else if (e.status() == execution_status::replayed && e.value() == "moved 10")
                        ++t.replayed;
                    else
                        ++t.failed;
                } catch (const std::exception& e) {
                    ++t.failed;
                    if (!t.noted.test_and_set()) t.first_failure = e.what();
                }
            }
        });
    for (auto& th : pool) th.join();
}

// Runs `text` on each of `clients` libpq connections through the pooler, all
// inside a transaction at once, so that each runs on a server connection of its
// own; returns what each first row's first column says ("" for no row).
std::vector<std::string> on_every_server(const std::string& conninfo, int clients,
                                         const std::vector<std::string>& statements) {
    std::vector<PGconn*> conns;
    auto exec = [](PGconn* c, const std::string& text) {
        PGresult* r = PQexec(c, text.c_str());
        const ExecStatusType status = PQresultStatus(r);
        std::string first = status == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
        PQclear(r);
        REQUIRE_MESSAGE((status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK), text, ": ", PQerrorMessage(c));
        return first;
    };
    for (int i = 0; i < clients; ++i) {
        conns.push_back(PQconnectdb(conninfo.c_str()));
        REQUIRE(PQstatus(conns.back()) == CONNECTION_OK);
        exec(conns.back(), "BEGIN");
    }
    std::vector<std::string> answers;
    for (PGconn* c : conns) {
        for (const std::string& text : statements) answers.push_back(exec(c, text));
        exec(c, "COMMIT");
    }
    // Closed without DEALLOCATE: in transaction mode the pooler resets nothing,
    // and what the clients prepared stays on the server connections.
    for (PGconn* c : conns) PQfinish(c);
    return answers;
}

// The names SOCI gives the first statements a session prepares (st_1, st_2,
// ...), left prepared on every server connection of the pool, as a client
// killed with statements prepared (or whose DEALLOCATE failed in an aborted
// transaction) leaves them.
void leave_statement_names(const std::string& conninfo, int pool_size) {
    std::vector<std::string> prepares;
    for (int n = 1; n <= 50; ++n)
        prepares.push_back("PREPARE st_" + std::to_string(n) + " AS SELECT " + std::to_string(n));
    (void)on_every_server(conninfo, pool_size, prepares);
}

// How many of those names each server connection holds.
std::vector<std::string> names_left(const std::string& conninfo, int pool_size) {
    return on_every_server(conninfo, pool_size,
                           {"SELECT COUNT(*) FROM pg_prepared_statements WHERE name ~ '^st_[0-9]+$'"});
}

}  // namespace

TEST_CASE("PgBouncer transaction pooling: unnamed statements run each key once; named ones break") {
    idem::test::postgres_server server;
    idem::test::scratch_database bank(server.conninfo(), "pgbouncer");
    create_bank(bank.conninfo());
    // Two server connections for 8 threads x (4 business + 4 store) client connections.
    idem::test::pgbouncer pooler(server.port(), {.pool_mode = "transaction", .pool_size = 2});
    const std::string through_pooler = pooler.conninfo(bank.name());

    SUBCASE("transaction_pooler: every key once, balances exact") {
        idem::database db = idem::database::open(through_pooler, {.pool_size = 4, .transaction_pooler = true});
        tally t;
        race(db, "pooled-", t);
        CAPTURE(t.first_failure);
        CHECK(t.failed == 0);
        CHECK(t.executed == rounds);
        CHECK(t.replayed == (threads - 1) * rounds);
        CHECK(balance(db, "alice") == opening - 10 * rounds);
        CHECK(balance(db, "bob") == 10 * rounds);
    }
    SUBCASE("named statements (the default) fail behind the pooler, and nothing runs twice") {
        idem::database db = idem::database::open(through_pooler, {.pool_size = 4});
        tally t;
        race(db, "named-", t);
        MESSAGE("named statements through PgBouncer: ", t.failed.load(), " of ", threads * rounds,
                " calls failed, first: ", t.first_failure);
        CHECK(t.failed > 0);
        CHECK(t.executed <= rounds);
        // Whatever failed, the money moved once per executed key.
        CHECK(balance(db, "alice") + balance(db, "bob") == opening);
        CHECK(balance(db, "bob") == 10 * t.executed);
    }
}

TEST_CASE("PgBouncer transaction pooling: the completer finishes abandoned operations beside other clients") {
    namespace steps_bank = idem::test::steps_bank;
    idem::test::postgres_server server;
    idem::test::scratch_database bank(server.conninfo(), "completer");
    create_bank(bank.conninfo());
    idem::test::pgbouncer pooler(server.port(), {.pool_mode = "transaction", .pool_size = 2});
    idem::database db =
        idem::database::open(pooler.conninfo(bank.name()), {.pool_size = 4, .transaction_pooler = true});
    steps_bank::create_tables(db);

    std::atomic<bool> provider_down{true};
    const auto payment = steps_bank::payment(db, [&](const std::string& point) {
        if (point == "charging" && provider_down) throw std::runtime_error("the provider did not answer");
    });
    constexpr int operations = 30;
    for (int i = 0; i < operations; ++i)
        CHECK_THROWS_AS((void)steps_bank::pay_with(payment, db, "op" + std::to_string(i), 1), std::runtime_error);
    provider_down = false;

    auto sink = std::make_shared<idem::test::recording_sink>();
    idem::completer completer(
        db, {payment},
        {.batch = 4, .threads = 2, .idle_wait = 5ms, .first_backoff = 0ms, .max_backoff = 0ms, .telemetry = sink});
    completer.start();
    tally t;  // other clients' transfers on the same two server connections meanwhile
    race(db, "beside-", t);
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (completer.metrics().completed < operations && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    completer.stop();

    CAPTURE(t.first_failure);
    CHECK(t.failed == 0);
    CHECK(completer.metrics().completed == operations);
    // Every pass's statements ran in its own transaction, on one server connection.
    CHECK_FALSE(sink->logged("idem.completer.pass_failed"));
    CHECK(balance(db, "bob") == 10 * rounds + operations);
}

TEST_CASE("PgBouncer transaction pooling: statement names a dead client left break none of idem's statements") {
    namespace steps_bank = idem::test::steps_bank;
    idem::test::postgres_server server;
    idem::test::scratch_database bank(server.conninfo(), "leftovers");
    create_bank(bank.conninfo());
    idem::test::pgbouncer pooler(server.port(), {.pool_mode = "transaction", .pool_size = 2});
    const std::string through_pooler = pooler.conninfo(bank.name());
    leave_statement_names(through_pooler, 2);
    CHECK(names_left(through_pooler, 2) == std::vector<std::string>{"50", "50"});

    idem::database db = idem::database::open(through_pooler, {.pool_size = 2, .transaction_pooler = true});
    // The migration runner reads the versions applied.
    CHECK_NOTHROW((void)db.migrate());
    // The outbox: publish in a unit of work, and a relay's claim that takes it in and delivers it.
    CHECK_NOTHROW(db.transact([](idem::unit_of_work& uow) { (void)uow.publish("leftovers.checked", "{}"); }));
    const auto rows = [&](const std::string& query) {
        return db.read([&](soci::session& sql) {
            long long n = 0;
            sql << query, soci::into(n);
            return n;
        });
    };
    CHECK(rows("SELECT COUNT(*) FROM idem_outbox_intake WHERE topic = 'leftovers.checked'") == 1);
    std::atomic<int> delivered{0};
    idem::outbox_relay relay(db, std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery&) {
                                 ++delivered;
                                 return idem::delivery_result::delivered();
                             }));
    CHECK(relay.run_once() == 1);
    CHECK(delivered == 1);
    CHECK(rows("SELECT COUNT(*) FROM idem_outbox WHERE topic = 'leftovers.checked' AND state = 1") == 1);
    steps_bank::create_tables(db);
    bool provider_down = false;
    const auto payment = steps_bank::payment(db, [&](const std::string& point) {
        if (point == "charging" && provider_down) throw std::runtime_error("the provider did not answer");
    });
    // Steps: a new operation, and its replay.
    CHECK(steps_bank::pay_with(payment, db, "paid", 3).status() == execution_status::executed);
    CHECK(steps_bank::pay_with(payment, db, "paid", 3).status() == execution_status::replayed);
    // The completer finishes one whose provider did not answer.
    provider_down = true;
    CHECK_THROWS_AS((void)steps_bank::pay_with(payment, db, "abandoned", 4), std::runtime_error);
    provider_down = false;
    CHECK(idem::unfinished_operations(db).size() == 1);
    auto sink = std::make_shared<idem::test::recording_sink>();
    idem::completer completer(db, {payment}, {.first_backoff = 0ms, .max_backoff = 0ms, .telemetry = sink});
    CHECK(completer.run_once() == 1);
    const auto done = idem::inspect_operation(db, steps_bank::key_of("abandoned"));
    REQUIRE(done.has_value());
    CHECK(done->phase == idem::operation_phase::completed);
    CHECK(done->steps.size() == 3);
    CHECK_FALSE(sink->logged("idem.completer.run_failed"));
    CHECK(balance(db, "bob") == 7);
    // The names are still there: every statement above met them.
    CHECK(names_left(through_pooler, 2) == std::vector<std::string>{"50", "50"});
}
