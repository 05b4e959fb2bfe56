// Where the executor puts the record on SQLite: inside the business
// transaction (Enforce), before it (lease mode), or beside it (Observe).
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <chrono>

#include "bank.hpp"
#include "idem/executor.hpp"
#include "recording_sink.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;
using idem::execution_status;
using idem::reservation_status;
using idem::transaction;

struct business_failure : std::runtime_error {
    business_failure() : std::runtime_error("business failure") {}
};

struct fixture {
    idem::test::temp_dir dir{"sqlite-executor"};
    std::string db = (dir.path() / "bank.db").string();
    idem::sqlite_connection_options connection{2s, idem::sqlite_synchronous::normal};
    std::shared_ptr<idem::sqlite_store> store =
        std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = db, .connection = connection});
    std::shared_ptr<idem::test::recording_sink> sink = std::make_shared<idem::test::recording_sink>();
    idem::executor exec{store, {}, sink};
    idem::string_codec codec;
    soci::session session;
    std::unique_ptr<idem::transaction_runner> runner;
    std::atomic<int> runs{0};

    fixture() {
        idem::open_sqlite_session(session, db, connection);
        bank::create_schema(session);
        runner = std::make_unique<idem::transaction_runner>(session);
    }

    // The business operation: moves money through the transaction's session.
    auto operation(transaction& tx, const std::string& key) {
        return [&tx, key, this] {
            ++runs;
            bank::move_money(tx.session(), key, 10);
            return std::string("moved 10");
        };
    }

    idem::execution<std::string> transfer(const std::string& key, idem::execution_options options = {}) {
        return runner->run([&](transaction& tx) {
            return exec.execute(tx, bank::transfer_key(key), bank::fingerprint, options, operation(tx, key), codec);
        });
    }

    // What the store holds for the key, seen from its own connection.
    reservation_status record(const std::string& key) {
        auto r = store->try_reserve(bank::transfer_key(key), bank::fingerprint, 1min);
        if (r.status == reservation_status::reserved) REQUIRE(store->release(bank::transfer_key(key), r.token));
        return r.status;
    }

    long long ledger() { return bank::count(session, "SELECT count(*) FROM ledger"); }
};

}  // namespace

TEST_CASE("executor on sqlite, enforce inside the transaction: the record commits with the data") {
    fixture f;
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

TEST_CASE("executor on sqlite, enforce inside the transaction: a rollback leaves no record, so a retry runs") {
    fixture f;
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
}

TEST_CASE("executor on sqlite, enforce inside the transaction: a failing operation releases the key with the rollback") {
    fixture f;
    CHECK_THROWS_AS(f.runner->run([&](transaction& tx) {
        return f.exec.execute(tx, bank::transfer_key("e-3"), bank::fingerprint, {},
                              [&]() -> std::string {
                                  bank::move_money(tx.session(), "e-3", 10);
                                  throw business_failure();
                              },
                              f.codec);
    }),
                    business_failure);
    CHECK(f.ledger() == 0);
    CHECK(f.record("e-3") == reservation_status::reserved);  // not in flight: the reservation rolled back
    CHECK(f.transfer("e-3").status() == execution_status::executed);

    // A result the codec classifies `release` frees the key inside the transaction too.
    auto declined = idem::make_codec<std::string>([](const std::string& s) { return s; },
                                                  [](std::string_view p) { return std::string(p); },
                                                  [](const std::string&) { return idem::classification::release; });
    f.runner->run([&](transaction& tx) {
        (void)f.exec.execute(tx, bank::transfer_key("e-4"), bank::fingerprint, {}, [] { return std::string("no"); },
                             declined);
    });
    CHECK(f.record("e-4") == reservation_status::reserved);
}

TEST_CASE("executor on sqlite, lease mode: the reservation commits before the business transaction") {
    fixture f;
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
    CHECK_THROWS_AS(f.exec.execute(bank::transfer_key("l-2"), bank::fingerprint, {},
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
    CHECK(f.ledger() == 1);
}

TEST_CASE("executor on sqlite, observe inside the transaction: the record commits with the data, without waiting") {
    fixture f;
    const auto started = std::chrono::steady_clock::now();
    auto e = f.transfer("o-1", {.mode = idem::mode::observe});
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(e.status() == execution_status::executed);
    CHECK(took < 1s);  // well under the busy timeout: nothing waited for the open transaction
    CHECK_FALSE(f.sink->logged("idem.observe.reserve_failed"));
    CHECK(f.record("o-1") == reservation_status::completed);
    CHECK(f.ledger() == 1);
}

TEST_CASE("executor on sqlite, observe: a record write that fails keeps the business data") {
    fixture f;
    // On this connection every completed record write fails, as a lock or statement timeout would.
    f.session << "CREATE TEMP TRIGGER refuse_results BEFORE INSERT ON idem_records WHEN NEW.state = 1"
                 " BEGIN SELECT RAISE(ABORT, 'refused'); END";
    auto e = f.transfer("o-2", {.mode = idem::mode::observe});
    CHECK(e.status() == execution_status::executed);
    CHECK(f.sink->logged("idem.observe.record_failed"));
    CHECK(f.runner->last_state() == idem::transaction_state::committed);
    CHECK(f.ledger() == 1);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(f.record("o-2") == reservation_status::reserved);  // no record: a retry under enforce runs again
}
