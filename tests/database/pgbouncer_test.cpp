// idem::database behind PgBouncer 1.18 in transaction pooling, where each
// transaction may run on another server connection: with transaction_pooler
// every key runs once and the balances are exact; without it, the statements
// a client prepared on one server connection are missing on the next.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "idem/database.hpp"
#include "idem/error.hpp"
#include "pgbouncer.hpp"
#include "postgres_server.hpp"

namespace {

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
