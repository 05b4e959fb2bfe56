// The executor on PostgreSQL, on the shared server: what only PostgreSQL has to
// prove: the database's clock, its isolation levels, many connections on one
// key. The placement scenarios every SQL store shares run in the SQL-store
// contract suite (tests/contract/postgresql_sql_context.cpp).
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "executor_fixture.hpp"
#include "postgres_server.hpp"
#include "postgresql_bank.hpp"

namespace idem::test {

using namespace std::chrono_literals;

namespace {

// One database for the whole binary, its bank reset for every scenario.
struct postgresql_bank_database final : bank_database {
    std::string conninfo = shared_postgres();

    [[nodiscard]] std::shared_ptr<transactional_record_store> make_store() override {
        return std::make_shared<postgresql_store>(postgresql_store_options{.connection = conninfo});
    }
    void connect(soci::session& session) override { open_postgresql_session(session, conninfo); }
    void reset_bank(soci::session& session) override { pg_bank::reset(session); }
};

}  // namespace

std::unique_ptr<bank_database> fresh_bank_database() {
    return std::make_unique<postgresql_bank_database>();
}

TEST_CASE("executor on postgresql, lease mode: the database's clock ends the lease a failed operation left") {
    executor_fixture f;
    CHECK_THROWS_AS(f.transfer_failing_in_lease_mode("l-2", {.lease = 300ms}), bank::business_failure);
    CHECK(f.record("l-2") == reservation_status::in_flight);
    std::this_thread::sleep_for(400ms);  // the database's clock ends the lease
    CHECK(f.record("l-2") == reservation_status::reserved);
    CHECK(f.ledger() == 0);
}

TEST_CASE("executor on postgresql, observe in a REPEATABLE READ transaction: no record, the business data kept") {
    executor_fixture f;
    idem::transaction_runner strict(f.session, {.isolation = idem::isolation_level::repeatable_read});
    auto e = strict.run([&](unit_of_work& tx) {
        return idem::detail::executor_access::execute_in(f.exec, tx, bank::transfer_key("o-4"), bank::fingerprint,
                                                         {.mode = idem::mode::observe}, f.operation(tx, "o-4"),
                                                         f.codec);
    });
    CHECK(e.status() == execution_status::executed);
    CHECK(f.sink->logged("idem.observe.record_failed"));  // the store refused to write at this level
    CHECK(strict.last_state() == idem::transaction_state::committed);
    CHECK(f.ledger() == 1);
    CHECK(f.record("o-4") == reservation_status::reserved);
}

TEST_CASE("executor on postgresql: 32 threads on their own connections run one key exactly once") {
    executor_fixture f;
    constexpr int threads = 32;
    std::atomic<int> executed{0};
    std::atomic<int> replayed{0};
    std::atomic<int> failed{0};
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&] {
                executor_fixture::connection c(*f.database);
                try {
                    auto e = c.runner->run([&](unit_of_work& tx) {
                        return idem::detail::executor_access::execute_in(f.exec, tx, bank::transfer_key("race"),
                                                                         bank::fingerprint, {}, f.operation(tx, "race"),
                                                                         f.codec);
                    });
                    (e.status() == execution_status::executed ? executed : replayed)++;
                } catch (const std::exception&) {
                    ++failed;
                }
            });
        }
    }
    CHECK(failed == 0);
    CHECK(executed == 1);
    CHECK(replayed == threads - 1);
    CHECK(f.runs == 1);
    CHECK(f.ledger() == 1);
}

// Observe inside a transaction reserves on the store's own connection. Request B
// holds a row lock in its business transaction while its detached reservation
// waits for the uncommitted record of request A, and A waits for B's row: a
// cycle across B's two connections that PostgreSQL cannot see. The store's
// default lock_timeout ends it; B then runs without idempotency and commits.
TEST_CASE("executor on postgresql, observe inside a transaction: the default lock wait ends a cycle; both commit") {
    executor_fixture f;
    const auto bound = idem::postgresql_store_options{}.lock_timeout;
    REQUIRE(bound > 0ms);
    std::promise<void> a_reserved, b_locked;
    std::jthread request_a([&] {
        executor_fixture::connection a(*f.database);
        auto e = a.runner->run([&](unit_of_work& tx) {
            return idem::detail::executor_access::execute_in(
                f.exec, tx, bank::transfer_key("cycle"), bank::fingerprint, {},
                [&] {
                    a_reserved.set_value();
                    b_locked.get_future().wait();
                    bank::move_money(tx.sql(), "cycle-a", 10);  // waits for B's row
                    return std::string("a moved 10");
                },
                f.codec);
        });
        CHECK(e.status() == execution_status::executed);
        CHECK(a.runner->last_state() == idem::transaction_state::committed);
    });
    a_reserved.get_future().wait();

    const auto started = std::chrono::steady_clock::now();
    auto b = f.runner->run([&](unit_of_work& tx) {
        tx.sql() << "UPDATE accounts SET balance = balance WHERE id = 'alice'";  // B's row lock
        b_locked.set_value();
        return idem::detail::executor_access::execute_in(f.exec, tx, bank::transfer_key("cycle"), bank::fingerprint,
                                                         {.mode = idem::mode::observe}, f.operation(tx, "cycle-b"),
                                                         f.codec);
    });
    const auto waited = std::chrono::steady_clock::now() - started;
    request_a.join();

    MESSAGE("observe's reservation gave up after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms (lock_timeout "
            << bound.count() << " ms)");
    CHECK(waited >= bound - 100ms);  // it really waited on A's record
    CHECK(waited < bound + 3s);
    CHECK(b.status() == execution_status::executed);
    CHECK(f.sink->logged("idem.observe.reserve_failed"));
    CHECK(f.sink->count(idem::outcome::reserve_failed, idem::mode::observe) == 1);
    CHECK(f.runner->last_state() == idem::transaction_state::committed);
    CHECK(f.ledger() == 2);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 20);
    CHECK(f.record("cycle") == reservation_status::completed);  // A's record
}

}  // namespace idem::test
