// The executor on SQLite: what only SQLite has to prove, on a database file of
// each scenario's own. The placement scenarios every SQL store shares run in
// the SQL-store contract suite (tests/contract/sqlite_sql_context.cpp).
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>

#include "executor_fixture.hpp"
#include "sqlite_bank.hpp"
#include "temp_dir.hpp"

namespace idem::test {

using namespace std::chrono_literals;

namespace {

// A busy timeout long enough that a wait for it shows (see the observe case below).
const sqlite_connection_options connection_options{2s, sqlite_synchronous::normal};

struct sqlite_bank_database final : bank_database {
    temp_dir dir{"sqlite-executor"};
    std::string path = (dir.path() / "bank.db").string();

    [[nodiscard]] std::shared_ptr<transactional_record_store> make_store() override {
        return std::make_shared<sqlite_store>(sqlite_store_options{.path = path, .connection = connection_options});
    }
    void connect(soci::session& session) override { open_sqlite_session(session, path, connection_options); }
    void reset_bank(soci::session& session) override { bank::create_schema(session); }
};

}  // namespace

std::unique_ptr<bank_database> fresh_bank_database() {
    return std::make_unique<sqlite_bank_database>();
}

TEST_CASE("executor on sqlite, observe inside the transaction: the record commits without a busy-timeout wait") {
    executor_fixture f;
    const auto started = std::chrono::steady_clock::now();
    auto e = f.transfer("o-1", {.mode = idem::mode::observe});
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(e.status() == execution_status::executed);
    CHECK(took < 1s);  // well under the busy timeout: nothing waited for the open transaction
    CHECK_FALSE(f.sink->logged("idem.observe.reserve_failed"));
    CHECK(f.record("o-1") == reservation_status::completed);
    CHECK(f.ledger() == 1);
}

}  // namespace idem::test
