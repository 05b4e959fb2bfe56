// Where the executor puts the record on PostgreSQL: inside the business
// transaction (Enforce), before it (lease mode), or beside it (Observe).
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "executor_fixture.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::pg_bank;
using idem::execution_status;
using idem::reservation_status;
using idem::test::business_failure;
using idem::test::executor_fixture;
using idem::transaction;

}  // namespace

TEST_CASE("executor on postgresql, enforce inside the transaction: the record commits with the data") {
    executor_fixture f;
    auto first = f.transfer("e-1");
    CHECK(first.status() == execution_status::executed);
    CHECK(first.value() == "moved 10");
    CHECK(f.record("e-1") == reservation_status::completed);
    auto again = f.transfer("e-1");
    CHECK(again.status() == execution_status::replayed);
    CHECK(again.value() == "moved 10");
    CHECK(f.runs == 1);
    CHECK(f.ledger() == 1);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
}

TEST_CASE("executor on postgresql, enforce inside the transaction: a rollback leaves no record, so a retry runs") {
    executor_fixture f;
    CHECK_THROWS_AS(f.runner->run([&](transaction& tx) {
        auto e = f.exec.execute(tx, bank::transfer_key("e-2"), bank::fingerprint, {}, f.operation(tx, "e-2"), f.codec);
        REQUIRE(e.status() == execution_status::executed);
        throw business_failure();  // the commit never happens: data and record go together
    }),
                    business_failure);
    CHECK(f.ledger() == 0);
    CHECK(f.record("e-2") == reservation_status::reserved);  // free
    CHECK(f.transfer("e-2").status() == execution_status::executed);
    CHECK(f.runs == 2);
    CHECK(f.ledger() == 1);

    // An operation that throws rolls its reservation back with everything else.
    CHECK_THROWS_AS(f.runner->run([&](transaction& tx) {
        return f.exec.execute(tx, bank::transfer_key("e-3"), bank::fingerprint, {},
                              [&]() -> std::string {
                                  bank::move_money(tx.session(), "e-3", 10);
                                  throw business_failure();
                              },
                              f.codec);
    }),
                    business_failure);
    CHECK(f.record("e-3") == reservation_status::reserved);

    // A result the codec classifies `release` frees the key inside the transaction.
    auto declined = idem::make_codec<std::string>([](const std::string& s) { return s; },
                                                  [](std::string_view p) { return std::string(p); },
                                                  [](const std::string&) { return idem::classification::release; });
    f.runner->run([&](transaction& tx) {
        (void)f.exec.execute(tx, bank::transfer_key("e-4"), bank::fingerprint, {}, [] { return std::string("no"); },
                             declined);
    });
    CHECK(f.record("e-4") == reservation_status::reserved);
}

TEST_CASE("executor on postgresql, lease mode: the reservation commits before the business transaction") {
    executor_fixture f;
    auto e = f.exec.execute(bank::transfer_key("l-1"), bank::fingerprint, {},
                            [&] {
                                // Another connection already sees the key in flight.
                                CHECK(f.record("l-1") == reservation_status::in_flight);
                                return f.runner->run([&](transaction& tx) {
                                    bank::move_money(tx.session(), "l-1", 10);
                                    return std::string("moved 10");
                                });
                            },
                            f.codec);
    CHECK(e.status() == execution_status::executed);
    CHECK(f.record("l-1") == reservation_status::completed);

    // An operation that throws in lease mode keeps the key in flight until its lease ends.
    CHECK_THROWS_AS(f.exec.execute(bank::transfer_key("l-2"), bank::fingerprint, {.lease = 300ms},
                                   [&]() -> std::string {
                                       f.runner->run([&](transaction& tx) {
                                           bank::move_money(tx.session(), "l-2", 10);
                                           throw business_failure();
                                       });
                                       return "unreachable";
                                   },
                                   f.codec),
                    business_failure);
    CHECK(f.record("l-2") == reservation_status::in_flight);
    std::this_thread::sleep_for(400ms);  // the database's clock ends the lease
    CHECK(f.record("l-2") == reservation_status::reserved);
    CHECK(f.ledger() == 1);
}

TEST_CASE("executor on postgresql, observe inside the transaction: the record commits with the data") {
    executor_fixture f;
    auto e = f.transfer("o-1", {.mode = idem::mode::observe});
    CHECK(e.status() == execution_status::executed);
    CHECK_FALSE(f.sink->logged("idem.observe.reserve_failed"));
    CHECK_FALSE(f.sink->logged("idem.observe.record_failed"));
    CHECK(f.record("o-1") == reservation_status::completed);
    CHECK(f.ledger() == 1);

    // Observe runs the operation again on a duplicate, and counts what Enforce would have done.
    auto again = f.transfer("o-1", {.mode = idem::mode::observe});
    CHECK(again.status() == execution_status::executed);
    CHECK(again.enforce_decision() == execution_status::replayed);
    CHECK(f.ledger() == 2);

    // A rollback of the business takes the observed record with it.
    CHECK_THROWS_AS(f.runner->run([&](transaction& tx) {
        (void)f.exec.execute(tx, bank::transfer_key("o-3"), bank::fingerprint, {.mode = idem::mode::observe},
                             f.operation(tx, "o-3"), f.codec);
        throw business_failure();
    }),
                    business_failure);
    CHECK(f.record("o-3") == reservation_status::reserved);
}

TEST_CASE("executor on postgresql, observe: a record write that fails keeps the business data") {
    executor_fixture f;
    // On the business connection every completed record write fails, as a lock
    // or statement timeout would; the store's own connections are unaffected.
    f.session << R"(CREATE OR REPLACE FUNCTION refuse_results() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.completed AND current_setting('test.refuse_results', true) = 'on' THEN
                RAISE EXCEPTION 'refused';
            END IF;
            RETURN NEW;
        END $$)";
    f.session << "CREATE TRIGGER refuse_results BEFORE INSERT OR UPDATE ON idem_records"
                 " FOR EACH ROW EXECUTE FUNCTION refuse_results()";
    f.session << "SET test.refuse_results = 'on'";

    auto e = f.transfer("o-2", {.mode = idem::mode::observe});
    f.session << "SET test.refuse_results = 'off'";
    f.session << "DROP TRIGGER refuse_results ON idem_records";
    CHECK(e.status() == execution_status::executed);
    CHECK(f.sink->logged("idem.observe.record_failed"));
    CHECK(f.runner->last_state() == idem::transaction_state::committed);
    CHECK(f.ledger() == 1);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(f.record("o-2") == reservation_status::reserved);  // no record: a retry under enforce runs again
}

TEST_CASE("executor on postgresql, observe in a REPEATABLE READ transaction: no record, the business data kept") {
    executor_fixture f;
    idem::transaction_runner strict(f.session, {.isolation = idem::isolation_level::repeatable_read});
    auto e = strict.run([&](transaction& tx) {
        return f.exec.execute(tx, bank::transfer_key("o-4"), bank::fingerprint, {.mode = idem::mode::observe},
                              f.operation(tx, "o-4"), f.codec);
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
                executor_fixture::connection c(f.conninfo);
                try {
                    auto e = c.runner->run([&](transaction& tx) {
                        return f.exec.execute(tx, bank::transfer_key("race"), bank::fingerprint, {},
                                              f.operation(tx, "race"), f.codec);
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
