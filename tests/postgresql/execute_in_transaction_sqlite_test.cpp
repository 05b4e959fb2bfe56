// execute_in_transaction on SQLite: no round trips to save, the same results.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>

#include "idem/execute_in_transaction.hpp"
#include "idem/sqlite_store.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using idem::execution_status;
using idem::transaction;

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
        return [&, k](transaction& tx) {
            ++runs;
            tx.session() << "INSERT INTO ledger (k) VALUES (:k)", soci::use(k);
            return std::string("written " + k);
        };
    };
    auto count = [&] {
        long long n = 0;
        session << "SELECT count(*) FROM ledger", soci::into(n);
        return n;
    };
    const idem::record_key key("ledger", "s-1");

    auto first = idem::execute_in_transaction(exec, runner, key, "fp", {}, write("s-1"), idem::string_codec{});
    CHECK(first.status() == execution_status::executed);
    auto again = idem::execute_in_transaction(exec, runner, key, "fp", {}, write("s-1"), idem::string_codec{});
    CHECK(again.status() == execution_status::replayed);
    CHECK(again.value() == "written s-1");
    CHECK(idem::execute_in_transaction(exec, runner, key, "other", {}, write("s-1"), idem::string_codec{}).status() ==
          execution_status::key_reused);

    const idem::record_key other("ledger", "s-2");
    CHECK_THROWS_AS(idem::execute_in_transaction(exec, runner, other, "fp", {},
                                                 [&](transaction& tx) -> std::string {
                                                     (void)write("s-2")(tx);
                                                     throw declined();
                                                 },
                                                 idem::string_codec{}),
                    declined);
    CHECK(runner.last_state() == idem::transaction_state::rolled_back);
    CHECK(idem::execute_in_transaction(exec, runner, other, "fp", {}, write("s-2"), idem::string_codec{},
                                       [](const auto&) { return false; })
              .status() == execution_status::executed);
    CHECK(runner.last_state() == idem::transaction_state::rolled_back);
    CHECK(count() == 1);
    CHECK(idem::execute_in_transaction(exec, runner, other, "fp", {}, write("s-2"), idem::string_codec{}).status() ==
          execution_status::executed);
    CHECK(count() == 2);
    CHECK(runs == 4);
}
