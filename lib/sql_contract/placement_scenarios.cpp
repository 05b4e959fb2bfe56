// Where the executor puts the record on a SQL store: inside the business
// transaction (Enforce), before it (lease mode), or beside it (Observe).
// Written once and run against every SQL store through idem::contract::run_sql.
// The scenarios that make the database refuse a write sit in the doctest
// suite "refusals", run when the context injects failures.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <memory>
#include <stop_token>
#include <string>

#include "bank.hpp"
#include "bank_executor.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "sql_context.hpp"

namespace idem::contract {
namespace {

namespace bank = idem::test::bank;

// An executor on the context's store, telemetry recorded, and a business
// session with the bank at its opening balances and no records.
struct placement_fixture : test::bank_executor {
    sql_store_context& ctx;

    placement_fixture() : placement_fixture(current_sql()) {}

private:
    explicit placement_fixture(sql_store_context& context)
        : bank_executor(context.make_store(),
                        [&context](soci::session& s) {
                            context.connect(s);
                            bank::create_portable_schema(s);
                            context.clear_records(s);
                        }),
          ctx(context) {}
};

}  // namespace

// A profile's remembered window (profile_options::remember): a client's queue
// drained after the retention sends the transfer again; the purge has removed
// its record, the tombstone answers. Each placement: inside the transaction,
// its one-statement form, and lease mode. `f.ctx.advance` moves the store's
// clock (SQLite) or waits (PostgreSQL).
TEST_CASE(
    "sql contract: a transfer retried after its retention and the purge, inside its remembered window, is "
    "expired: no rerun, no money moved") {
    using namespace std::chrono_literals;
    placement_fixture f;
    executor_options o;
    o.profiles["payments"] = {.lease = 500ms, .retention = 1s, .remember = 6s};
    f.exec.options().replace(o);
    const execution_options pay{.profile = "payments"};
    const auto lease_mode = [&](const std::string& key, const char* fingerprint = bank::fingerprint) {
        return f.exec.execute(
            bank::transfer_key(key), fingerprint, pay,
            [&] {
                ++f.runs;
                f.runner->run([&](unit_of_work& tx) { bank::move_money(tx.sql(), key, 10); });
                return std::string("moved 10");
            },
            f.codec);
    };
    REQUIRE(f.transfer("late-1", pay).status() == execution_status::executed);
    REQUIRE(f.transfer_fast("late-2", pay).status() == execution_status::executed);
    REQUIRE(lease_mode("late-3").status() == execution_status::executed);
    REQUIRE(f.ledger() == 3);
    CHECK(f.transfer("late-1", pay).status() == execution_status::replayed);  // while the result is kept

    f.ctx.advance(1500ms);
    while (f.store->purge_expired(1000) > 0) {
    }
    for (const std::string key : {"late-1", "late-2", "late-3"}) {
        CAPTURE(key);
        CHECK(f.record(key) == reservation_status::expired);
        const auto plain = f.transfer(key, pay);
        CHECK(plain.status() == execution_status::expired);
        CHECK_FALSE(plain.has_value());
        CHECK(f.transfer_fast(key, pay).status() == execution_status::expired);
        CHECK(lease_mode(key).status() == execution_status::expired);
    }
    CHECK(f.transfer("late-1", pay, "another transfer").status() == execution_status::key_reused);
    CHECK(f.runs == 3);
    CHECK(f.ledger() == 3);  // no money moved twice
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 30);
    CHECK(f.sink->count(outcome::expired, mode::enforce) == 9);

    // After the window the key is forgotten: a request runs again.
    f.ctx.advance(6s);
    while (f.store->purge_expired(1000) > 0) {
    }
    CHECK(f.transfer("late-1", pay).status() == execution_status::executed);
    CHECK(f.ledger() == 4);
}

TEST_CASE("sql contract: executor placement, enforce inside the transaction: the record commits with the data") {
    placement_fixture f;
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

TEST_CASE(
    "sql contract: executor placement, enforce inside the transaction: a rollback leaves no record, so a retry runs") {
    placement_fixture f;
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work& tx) {
        auto e = idem::detail::executor_access::execute_in(f.exec, tx, bank::transfer_key("e-2"), bank::fingerprint, {},
                                                           f.operation(tx, "e-2"), f.codec);
        REQUIRE(e.status() == execution_status::executed);
        throw bank::business_failure();  // the commit never happens: data and record go together
    }),
                    bank::business_failure);
    CHECK(f.ledger() == 0);
    CHECK(f.record("e-2") == reservation_status::reserved);  // free
    CHECK(f.transfer("e-2").status() == execution_status::executed);
    CHECK(f.runs == 2);
    CHECK(f.ledger() == 1);
}

TEST_CASE(
    "sql contract: executor placement, enforce inside the transaction: a failing operation rolls its reservation "
    "back") {
    placement_fixture f;
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work& tx) {
        return idem::detail::executor_access::execute_in(
            f.exec, tx, bank::transfer_key("e-3"), bank::fingerprint, {},
            [&]() -> std::string {
                bank::move_money(tx.sql(), "e-3", 10);
                throw bank::business_failure();
            },
            f.codec);
    }),
                    bank::business_failure);
    CHECK(f.ledger() == 0);
    CHECK(f.record("e-3") == reservation_status::reserved);  // not in flight: the reservation rolled back
    CHECK(f.transfer("e-3").status() == execution_status::executed);
}

TEST_CASE(
    "sql contract: executor placement, enforce inside the transaction: a result classified release frees the key") {
    placement_fixture f;
    auto declined = idem::make_codec<std::string>([](const std::string& s) { return s; },
                                                  [](std::string_view p) { return std::string(p); },
                                                  [](const std::string&) { return idem::classification::release; });
    f.runner->run([&](unit_of_work& tx) {
        (void)idem::detail::executor_access::execute_in(
            f.exec, tx, bank::transfer_key("e-4"), bank::fingerprint, {}, [] { return std::string("no"); }, declined);
    });
    CHECK(f.record("e-4") == reservation_status::reserved);
}

TEST_CASE("sql contract: executor placement, lease mode: the reservation commits before the business transaction") {
    placement_fixture f;
    auto e = f.exec.execute(
        bank::transfer_key("l-1"), bank::fingerprint, {},
        [&] {
            // Another connection already sees the key in flight.
            CHECK(f.record("l-1") == reservation_status::in_flight);
            return f.runner->run([&](unit_of_work& tx) {
                bank::move_money(tx.sql(), "l-1", 10);
                return std::string("moved 10");
            });
        },
        f.codec);
    CHECK(e.status() == execution_status::executed);
    CHECK(f.record("l-1") == reservation_status::completed);

    // An operation that throws in lease mode keeps the key in flight until its lease ends.
    CHECK_THROWS_AS(f.transfer_failing_in_lease_mode("l-2"), bank::business_failure);
    CHECK(f.record("l-2") == reservation_status::in_flight);
    CHECK(f.ledger() == 1);
}

TEST_CASE("sql contract: executor placement, observe inside the transaction: the record commits with the data") {
    placement_fixture f;
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
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work& tx) {
        (void)idem::detail::executor_access::execute_in(f.exec, tx, bank::transfer_key("o-3"), bank::fingerprint,
                                                        {.mode = idem::mode::observe}, f.operation(tx, "o-3"), f.codec);
        throw bank::business_failure();
    }),
                    bank::business_failure);
    CHECK(f.record("o-3") == reservation_status::reserved);
}

TEST_CASE("sql contract: executor placement, observe inside the transaction: a stop before the start frees the key") {
    placement_fixture f;
    std::stop_source stop;
    stop.request_stop();
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work& tx) {
        return idem::detail::executor_access::execute_in(f.exec, tx, bank::transfer_key("o-5"), bank::fingerprint,
                                                         {.mode = idem::mode::observe}, f.operation(tx, "o-5"), f.codec,
                                                         stop.get_token());
    }),
                    idem::operation_cancelled);
    CHECK(f.runs == 0);
    CHECK(f.ledger() == 0);
    CHECK(f.sink->count(idem::outcome::released, idem::mode::observe) == 1);
    // The reservation was made apart from the transaction, so it is released apart
    // from it too: the rollback of the business cannot undo the release.
    CHECK(f.record("o-5") == reservation_status::reserved);  // free
    CHECK(f.transfer("o-5").status() == execution_status::executed);
}

TEST_CASE(
    "sql contract: executor placement, observe inside the transaction: a failing operation frees its reservation") {
    placement_fixture f;
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work& tx) {
        return idem::detail::executor_access::execute_in(
            f.exec, tx, bank::transfer_key("o-6"), bank::fingerprint, {.mode = idem::mode::observe},
            [&]() -> std::string {
                bank::move_money(tx.sql(), "o-6", 10);
                throw bank::business_failure();
            },
            f.codec);
    }),
                    bank::business_failure);
    CHECK(f.ledger() == 0);
    CHECK(f.record("o-6") == reservation_status::reserved);  // as Enforce's rollback would leave it: free
    bool logged = false;
    for (const auto& l : f.sink->logs())
        if (l.name == "idem.operation.failed")
            logged = l.message.find("the reservation made outside it is released") != std::string::npos;
    CHECK(logged);
}

TEST_SUITE("refusals") {
    TEST_CASE("sql contract: executor placement, observe: a record write that fails keeps the business data") {
        placement_fixture f;
        f.ctx.refuse_completed_records(f.session);
        auto e = f.transfer("o-2", {.mode = idem::mode::observe});
        f.ctx.accept_completed_records(f.session);
        CHECK(e.status() == execution_status::executed);
        CHECK(f.sink->logged("idem.observe.record_failed"));
        CHECK(f.runner->last_state() == idem::transaction_state::committed);
        CHECK(f.ledger() == 1);
        CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
        CHECK(f.record("o-2") == reservation_status::reserved);  // no record: a retry under enforce runs again
    }

    TEST_CASE(
        "sql contract: executor placement, observe inside the transaction: a failed release of the detached "
        "reservation is logged; data and record commit") {
        placement_fixture f;
        // Observe reserved apart from the transaction; before it writes the result
        // inside, it frees that reservation, and here the database refuses the DELETE.
        f.ctx.refuse_deleting_records(f.session);
        auto e = f.transfer("o-6", {.mode = idem::mode::observe});
        f.ctx.accept_deleting_records(f.session);
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value() == "moved 10");
        bool logged = false;
        for (const auto& l : f.sink->logs()) {
            if (l.name != "idem.release.failed") continue;
            logged = true;
            CHECK(l.level == idem::log_level::error);
            CHECK(l.key_hash == bank::transfer_key("o-6").key_hash());
            CHECK(l.message.find("written over the reservation in the transaction") != std::string::npos);
            CHECK(l.message.find("idem: releasing a record") != std::string::npos);  // the store's error
        }
        CHECK(logged);
        CHECK_FALSE(f.sink->logged("idem.observe.record_failed"));
        CHECK(f.runner->last_state() == idem::transaction_state::committed);
        CHECK(f.ledger() == 1);
        CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
        // The reservation still carried this call's token, so the result written in
        // the transaction completed it: a duplicate is answered from it.
        CHECK(f.record("o-6") == reservation_status::completed);
        auto again = f.transfer("o-6", {.mode = idem::mode::observe});
        CHECK(again.enforce_decision() == execution_status::replayed);
    }

}  // TEST_SUITE("refusals")

}  // namespace idem::contract
