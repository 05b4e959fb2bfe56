// The one-statement form (idem/detail/run_owned.hpp, behind db.once) on SQLite: no round trips to save, the same
// results.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "idem/detail/run_owned.hpp"
#include "idem/sqlite_store.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using idem::execution_status;
using idem::unit_of_work;

struct declined : std::runtime_error {
    declined() : std::runtime_error("declined") {}
};

}  // namespace

TEST_CASE("execute_in_transaction on sqlite: executed, replayed, rolled back, like the plain form") {
    idem::test::temp_dir dir{"sqlite-fast-path"};
    const std::string db = (dir.path() / "bank.db").string();
    auto store = std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = db});
    idem::executor exec{store};
    soci::session session;
    idem::open_sqlite_session(session, db);
    session << "CREATE TABLE ledger (k TEXT NOT NULL)";
    idem::transaction_runner runner{session};
    std::atomic<int> runs{0};
    auto write = [&](const std::string& k) {
        return [&, k](unit_of_work& tx) {
            ++runs;
            tx.sql() << "INSERT INTO ledger (k) VALUES (:k)", soci::use(k);
            return std::string("written " + k);
        };
    };
    auto count = [&] {
        long long n = 0;
        session << "SELECT count(*) FROM ledger", soci::into(n);
        return n;
    };
    const idem::record_key key("ledger", "s-1");

    auto first = idem::detail::execute_in_transaction(exec, runner, key, "fp", {}, write("s-1"), idem::string_codec{});
    CHECK(first.status() == execution_status::executed);
    auto again = idem::detail::execute_in_transaction(exec, runner, key, "fp", {}, write("s-1"), idem::string_codec{});
    CHECK(again.status() == execution_status::replayed);
    CHECK(again.value() == "written s-1");
    CHECK(idem::detail::execute_in_transaction(exec, runner, key, "other", {}, write("s-1"), idem::string_codec{})
              .status() == execution_status::key_reused);

    const idem::record_key other("ledger", "s-2");
    CHECK_THROWS_AS(idem::detail::execute_in_transaction(
                        exec, runner, other, "fp", {},
                        [&](unit_of_work& tx) -> std::string {
                            (void)write("s-2")(tx);
                            throw declined();
                        },
                        idem::string_codec{}),
                    declined);
    CHECK(runner.last_state() == idem::transaction_state::rolled_back);
    CHECK(idem::detail::execute_in_transaction(exec, runner, other, "fp", {}, write("s-2"), idem::string_codec{},
                                               [](const auto&) { return false; })
              .status() == execution_status::executed);
    CHECK(runner.last_state() == idem::transaction_state::rolled_back);
    CHECK(count() == 1);
    CHECK(idem::detail::execute_in_transaction(exec, runner, other, "fp", {}, write("s-2"), idem::string_codec{})
              .status() == execution_status::executed);
    CHECK(count() == 2);
    CHECK(runs == 4);
}

TEST_CASE("execute_in_transaction on sqlite: threads racing on each key, one executed per key, the rest replayed") {
    idem::test::temp_dir dir{"sqlite-race"};
    const std::string db = (dir.path() / "bank.db").string();
    auto store = std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = db});
    idem::executor exec{store};
    {
        soci::session setup;
        idem::open_sqlite_session(setup, db);
        setup << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)";
        setup << "INSERT INTO accounts (id, balance) VALUES ('alice', 1000), ('bob', 0)";
    }
    constexpr int threads = 4, rounds = 10;
    std::atomic<int> runs{0}, executed{0}, replayed{0}, other{0};
    std::barrier start(threads);
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            soci::session session;
            idem::open_sqlite_session(session, db);
            idem::transaction_runner runner{session};
            for (int round = 0; round < rounds; ++round) {
                start.arrive_and_wait();
                const idem::record_key key("bank.transfer", "race-" + std::to_string(round));
                auto e = idem::detail::execute_in_transaction(
                    exec, runner, key, "fp", {},
                    [&](unit_of_work& tx) {
                        ++runs;
                        tx.sql() << "UPDATE accounts SET balance = balance - 1 "
                                    "WHERE id = 'alice'";
                        tx.sql() << "UPDATE accounts SET balance = balance + 1 "
                                    "WHERE id = 'bob'";
                        return std::string("moved 1");
                    },
                    idem::string_codec{});
                if (e.status() == execution_status::executed)
                    ++executed;
                else if (e.status() == execution_status::replayed && e.value() == "moved 1")
                    ++replayed;
                else
                    ++other;
            }
        });
    pool.clear();
    // BEGIN IMMEDIATE holds the only write lock from the lookup to the record: no duplicate runs.
    CHECK(runs == rounds);
    CHECK(executed == rounds);
    CHECK(replayed == (threads - 1) * rounds);
    CHECK(other == 0);
    soci::session check;
    idem::open_sqlite_session(check, db);
    long long bob = -1;
    check << "SELECT balance FROM accounts WHERE id = 'bob'", soci::into(bob);
    CHECK(bob == rounds);
}

TEST_CASE("execute_in_transaction on sqlite: reserve_first, a lease-mode key in flight, an expired one taken over") {
    idem::test::temp_dir dir{"sqlite-forms"};
    const std::string db = (dir.path() / "bank.db").string();
    auto store = std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = db});
    idem::executor exec{store};
    soci::session session;
    idem::open_sqlite_session(session, db);
    idem::transaction_runner runner{session};
    int runs = 0;
    auto work = [&](unit_of_work&) { return std::to_string(++runs); };
    auto call = [&](const char* k, idem::execution_options o = {}) {
        return idem::detail::execute_in_transaction(exec, runner, idem::record_key("ledger", k), "fp", o, work,
                                                    idem::string_codec{});
    };
    CHECK(call("r-1", {.reserve_first = true}).status() == execution_status::executed);
    CHECK(call("r-1", {.reserve_first = true}).value() == "1");
    CHECK(call("r-1").value() == "1");

    auto held = store->try_reserve(idem::record_key("ledger", "held"), "fp", 1min);
    REQUIRE(held.status == idem::reservation_status::reserved);
    CHECK(call("held").status() == execution_status::in_flight);

    auto lapsed = store->try_reserve(idem::record_key("ledger", "lapsed"), "fp", 1ms);
    REQUIRE(lapsed.status == idem::reservation_status::reserved);
    std::this_thread::sleep_for(20ms);
    CHECK(call("lapsed").status() == execution_status::executed);
    CHECK(call("lapsed").value() == "2");
    CHECK(runs == 2);
}
