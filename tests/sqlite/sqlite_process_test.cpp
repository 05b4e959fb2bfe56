// Real processes on one SQLite file: racing transfers, a writer killed with
// SIGKILL before its commit, migrations started at the same moment.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>

#include "migration_race.hpp"
#include "sqlite_bank.hpp"
#include "temp_dir.hpp"
#include "transfer_race.hpp"
#include "worker_processes.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;
using idem::test::exit_code;
using idem::test::line_of;
using idem::test::start_worker;

const std::string worker = IDEM_SQLITE_WORKER;
const idem::sqlite_connection_options options{10s, idem::sqlite_synchronous::normal};

struct bank_file {
    idem::test::temp_dir dir{"sqlite-process"};
    std::string db = (dir.path() / "bank.db").string();
    idem::sqlite_store store{{.path = db, .connection = options}};
    soci::session session;

    bank_file() {
        idem::open_sqlite_session(session, db, options);
        bank::create_schema(session);
    }
};

}  // namespace

TEST_CASE("4 processes x 8 threads racing the same transfers move the money exactly once") {
    bank_file f;
    // 100 transfer keys; every thread of every process tries each of them.
    idem::test::race_transfers(f.session, f.store, {worker, "transfer", f.db}, 4, 8, 100);
}

TEST_CASE("a writer killed with SIGKILL before its commit leaves neither the business rows nor the record") {
    bank_file f;
    auto child = start_worker({worker, "crash", f.db, "crash-1"});
    REQUIRE(line_of(*child) == "written");  // reserved, debited, credited, ledger written: not committed
    child->signal(SIGKILL);
    CHECK(exit_code(*child) == 128 + SIGKILL);

    CHECK(bank::balance(f.session, "alice") == bank::opening_balance);
    CHECK(bank::balance(f.session, "bob") == bank::opening_balance);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 0);
    CHECK(bank::count(f.session, "SELECT count(*) FROM idem_records") == 0);

    // The key is free and the write lock was released: a retry runs, once.
    idem::transaction_runner runner{f.session};
    CHECK(bank::transfer(f.store, runner, "crash-1", 10) == bank::outcome::executed);
    CHECK(bank::transfer(f.store, runner, "crash-1", 10) == bank::outcome::replayed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 1);
}

TEST_CASE("migrations started by several processes at once are applied exactly once") {
    idem::test::temp_dir dir{"sqlite-migrate"};
    const std::string db = (dir.path() / "fresh.db").string();
    idem::test::race_migrations({worker, "migrate", db}, 4,
                                {"0001_create_records", "0002_lean_records", "0003_outbox", "0004_steps",
                                 "0005_completer", "0006_outbox_claim_order", "0007_operation_failures",
                                 "0008_outbox_lean", "0009_outbox_intake", "0010_tombstones", "0011_scope_ids"});

    soci::session session;
    idem::open_sqlite_session(session, db);
    CHECK(bank::count(session, "SELECT count(*) FROM idem_schema_versions") == 11);
    CHECK(bank::count(session, "SELECT count(*) FROM sqlite_master WHERE name = 'idem_records'") == 1);
}
