// Real processes on one SQLite file: racing transfers, a writer killed with
// SIGKILL before its commit, migrations started at the same moment.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <sstream>

#include "bank.hpp"
#include "child_process.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;
using idem::test::child_process;

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

std::unique_ptr<child_process> start(const std::vector<std::string>& args) {
    idem::test::spawn_options spawn;
    spawn.argv = args;
    spawn.pipe_stdin = true;
    spawn.pipe_stdout = true;
    return std::make_unique<child_process>(std::move(spawn));
}

std::vector<std::unique_ptr<child_process>> spawn(int n, const std::vector<std::string>& args) {
    std::vector<std::unique_ptr<child_process>> children;
    for (int i = 0; i < n; ++i) children.push_back(start(args));
    return children;
}

// Starts every worker at one instant a little ahead, once all have opened the database.
void go(std::vector<std::unique_ptr<child_process>>& children) {
    const auto at = std::chrono::system_clock::now() + 300ms;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
    for (auto& c : children) c->write("go " + std::to_string(ns) + "\n");
}

std::string line_of(child_process& c) {
    auto line = c.read_line(60s);
    if (!line) throw std::runtime_error("the worker ended without answering");
    return *line;
}

// The exit code, or 128 + the signal that ended it.
int exit_code(child_process& c) {
    const int status = c.reap();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("4 processes x 8 threads racing the same transfers move the money exactly once") {
    bank_file f;
    const int processes = 4;
    const int threads = 8;
    const int rounds = 100;  // transfer keys; every thread of every process tries each of them
    auto children = spawn(processes, {worker, "transfer", f.db, std::to_string(threads), std::to_string(rounds)});
    go(children);
    const auto started = std::chrono::steady_clock::now() + 300ms;

    long long executed = 0, replayed = 0, other = 0, errors = 0;
    std::string per_process;
    for (auto& c : children) {
        std::istringstream line(line_of(*c));
        long long e = -1, r = -1, o = -1, x = -1;
        line >> e >> r >> o >> x;
        executed += e;
        per_process += " " + std::to_string(e);
        replayed += r;
        other += o;
        errors += x;
        CHECK(exit_code(*c) == 0);
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    MESSAGE(processes << " processes x " << threads << " threads x " << rounds << " transfers: " << executed
                      << " executed (per process:" << per_process << "), " << replayed << " replayed in "
                      << elapsed.count() << " ms");

    CHECK(errors == 0);
    CHECK(other == 0);  // inside the transaction a duplicate waits for the commit: never in flight
    CHECK(executed == rounds);
    CHECK(executed + replayed == processes * threads * rounds);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10 * rounds);
    CHECK(bank::balance(f.session, "bob") == bank::opening_balance + 10 * rounds);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == rounds);
    CHECK(bank::count(f.session, "SELECT count(DISTINCT transfer_key) FROM ledger") == rounds);
    for (int round = 0; round < rounds; ++round) {
        auto r = f.store.try_reserve(bank::transfer_key("transfer-" + std::to_string(round)), bank::fingerprint, 1min);
        CHECK(r.status == idem::reservation_status::completed);
        CHECK(r.payload == "moved 10");
    }
}

TEST_CASE("a writer killed with SIGKILL before its commit leaves neither the business rows nor the record") {
    bank_file f;
    auto child = start({worker, "crash", f.db, "crash-1"});
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
    auto children = spawn(4, {worker, "migrate", db});
    go(children);
    int applied = 0;
    for (auto& c : children) {
        std::istringstream line(line_of(*c));
        int n = -1;
        line >> n;
        applied += n;
        if (n == 1) {
            std::string name;
            line >> name;
            CHECK(name == "0001_create_records");
        }
        CHECK(exit_code(*c) == 0);
    }
    CHECK(applied == 1);

    soci::session session;
    idem::open_sqlite_session(session, db);
    CHECK(bank::count(session, "SELECT count(*) FROM idem_schema_versions") == 1);
    CHECK(bank::count(session, "SELECT count(*) FROM sqlite_master WHERE name = 'idem_records'") == 1);
}
