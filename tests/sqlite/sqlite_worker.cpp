// A child process for the multi-process SQLite tests.
//
//   sqlite_worker transfer <db> <threads> <rounds>  race transfers at the instant "go <t>" on stdin names
//   sqlite_worker crash <db> <key>                  write a transfer, print "written", wait to be killed
//   sqlite_worker migrate <db>                      migrate at that instant; print what it applied
//   sqlite_worker exit-in-run <db> <how>            call exit() inside run(); print the runner's log events
#include <cstdlib>
#include <string>

#include "bank_worker.hpp"
#include "exit_inside_run.hpp"
#include "sqlite_bank.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;

const idem::sqlite_connection_options connection_options{30s, idem::sqlite_synchronous::normal};

idem::sqlite_store open_store(const std::string& db, bool migrate_on_open = true) {
    idem::sqlite_store_options options;
    options.path = db;
    options.connection = connection_options;
    options.migrate_on_open = migrate_on_open;
    return idem::sqlite_store(options);
}

// Every thread reserves and completes through the store's transaction calls.
int transfer(const std::string& db, int threads, int rounds) {
    idem::sqlite_store store = open_store(db);
    return idem::test::race_transfers_from_go(
        threads, rounds, [&](soci::session& session) { idem::open_sqlite_session(session, db, connection_options); },
        [&](int, idem::transaction_runner& runner, const std::string& key) {
            return bank::transfer(store, runner, key, 10);
        });
}

int crash(const std::string& db, const std::string& key) {
    idem::sqlite_store store = open_store(db);
    soci::session session;
    idem::open_sqlite_session(session, db, connection_options);
    idem::transaction_runner runner{session};
    runner.run([&](idem::unit_of_work& tx) {
        auto r = store.try_reserve(tx, bank::transfer_key(key), bank::fingerprint, 1min);
        if (r.status != idem::reservation_status::reserved) std::exit(4);
        bank::move_money(tx.sql(), key, 10);
        idem::test::wait_to_be_killed();
    });
    return 5;
}

int migrate(const std::string& db) {
    idem::sqlite_store store = open_store(db, false);
    return idem::test::migrate_from_go(store);
}

// exit() called from the work destroys a static runner with its transaction
// open. `how`: "rolls-back", or "rollback-fails" (the work commits behind the
// runner's back first, so the runner's ROLLBACK fails).
int exit_in_run(const std::string& db, const std::string& how) {
    return idem::test::exit_inside_run(
        [&](soci::session& session) {
            idem::open_sqlite_session(session, db, connection_options);
            session << "CREATE TABLE IF NOT EXISTS items (name TEXT PRIMARY KEY)";
        },
        [&](idem::unit_of_work& tx) {
            tx.sql() << "INSERT INTO items (name) VALUES ('abandoned')";
            if (how == "rollback-fails") tx.sql() << "COMMIT";
        });
}

}  // namespace

int main(int argc, char** argv) {
    using args = std::vector<std::string>;
    return idem::test::run_worker(
        "sqlite_worker", argc, argv,
        {
            {"transfer", "<db> <threads> <rounds>",
             [](const args& a) { return transfer(a[0], std::stoi(a[1]), std::stoi(a[2])); }},
            {"crash", "<db> <key>", [](const args& a) { return crash(a[0], a[1]); }},
            {"migrate", "<db>", [](const args& a) { return migrate(a[0]); }},
            {"exit-in-run", "<db> <how>", [](const args& a) { return exit_in_run(a[0], a[1]); }},
        });
}
