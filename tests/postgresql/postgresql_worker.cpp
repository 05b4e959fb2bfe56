// A child process for the multi-process PostgreSQL tests.
//
//   postgresql_worker transfer <conninfo> <threads> <rounds>  race transfers at the instant "go <t>" on stdin names
//   postgresql_worker crash <conninfo> <key>                  write a transfer, print "written", wait to be killed
//   postgresql_worker migrate <conninfo>                      migrate at that instant; print what it applied
//   postgresql_worker purge <conninfo> <batch>                purge in batches from that instant; print the total
//   postgresql_worker exit-in-run <conninfo>                  print "in run" inside run(), exit() at a line on stdin
#include <iostream>
#include <string>

#include "bank_worker.hpp"
#include "exit_inside_run.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "postgresql_bank.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::pg_bank;

// An execution's status in the words of a transfer made through the store's calls.
bank::outcome outcome_of(idem::execution_status status) {
    switch (status) {
        case idem::execution_status::executed: return bank::outcome::executed;
        case idem::execution_status::replayed: return bank::outcome::replayed;
        case idem::execution_status::in_flight: return bank::outcome::in_flight;
        case idem::execution_status::expired: return bank::outcome::expired;
        case idem::execution_status::key_reused: break;
    }
    return bank::outcome::mismatch;
}

// Every thread on a business connection of its own; half of them go through
// execute_in_transaction, half through the store's transaction calls. Both
// reserve first: a transaction that reserved a key and waits for a row lock held
// by a one-statement duplicate, which waits for that key, is a deadlock
// PostgreSQL ends by failing one of them (the one-statement form races itself in
// tests/database and tests/postgresql/execute_in_transaction_test.cpp).
// `one_statement`: every thread through execute_in_transaction's default form instead.
int transfer(const std::string& conninfo, int threads, int rounds, bool one_statement) {
    auto store = std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = conninfo});
    idem::executor exec{store};
    return idem::test::race_transfers_from_go(
        threads, rounds, [&](soci::session& session) { idem::open_postgresql_session(session, conninfo); },
        [&](int thread, idem::transaction_runner& runner, const std::string& key) {
            if (thread % 2 == 0 && !one_statement) return bank::transfer(*store, runner, key, 10);
            auto e = idem::detail::execute_in_transaction(
                exec, runner, bank::transfer_key(key), bank::fingerprint, {.reserve_first = !one_statement},
                [&](idem::unit_of_work& tx) {
                    bank::move_money(tx.sql(), key, 10);
                    return std::string("moved 10");
                },
                idem::string_codec{});
            return outcome_of(e.status());
        });
}

int crash(const std::string& conninfo, const std::string& key) {
    auto store = std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = conninfo});
    idem::executor exec{store};
    soci::session session;
    idem::open_postgresql_session(session, conninfo);
    idem::transaction_runner runner{session};
    (void)idem::detail::execute_in_transaction(
        exec, runner, bank::transfer_key(key), bank::fingerprint, {},
        [&](idem::unit_of_work& tx) -> std::string {
            bank::move_money(tx.sql(), key, 10);
            idem::test::wait_to_be_killed();
        },
        idem::string_codec{});
    return 5;
}

int migrate(const std::string& conninfo) {
    idem::postgresql_store store({.connection = conninfo, .migrate_on_open = false});
    return idem::test::migrate_from_go(store);
}

int purge(const std::string& conninfo, std::size_t batch) {
    idem::postgresql_store store({.connection = conninfo});
    idem::test::await_go();
    std::size_t total = 0;
    while (std::size_t n = store.purge_batch(batch, 0s)) total += n;
    std::cout << total << std::endl;
    return 0;
}

// exit() called from the work destroys a static runner with its transaction
// open. The test cuts the connection before it sends the line that makes this exit.
int exit_in_run(const std::string& conninfo) {
    return idem::test::exit_inside_run(
        [&](soci::session& session) { idem::open_postgresql_session(session, conninfo); },
        [](idem::unit_of_work& tx) {
            tx.sql() << "CREATE TEMPORARY TABLE abandoned (id INTEGER)";
            std::cout << "in run" << std::endl;
            std::string line;
            std::getline(std::cin, line);
        });
}

}  // namespace

int main(int argc, char** argv) {
    using args = std::vector<std::string>;
    return idem::test::run_worker(
        "postgresql_worker", argc, argv,
        {
            {"transfer", "<conninfo> <threads> <rounds>",
             [](const args& a) { return transfer(a[0], std::stoi(a[1]), std::stoi(a[2]), false); }},
            {"transfer-one-statement", "<conninfo> <threads> <rounds>",
             [](const args& a) { return transfer(a[0], std::stoi(a[1]), std::stoi(a[2]), true); }},
            {"crash", "<conninfo> <key>", [](const args& a) { return crash(a[0], a[1]); }},
            {"migrate", "<conninfo>", [](const args& a) { return migrate(a[0]); }},
            {"purge", "<conninfo> <batch>", [](const args& a) { return purge(a[0], std::stoul(a[1])); }},
            {"exit-in-run", "<conninfo>", [](const args& a) { return exit_in_run(a[0]); }},
        });
}
