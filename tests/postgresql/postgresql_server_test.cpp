// PostgreSQL tests that stop and restart a server of their own. They cannot run
// against IDEM_TEST_POSTGRES: this binary then reports itself skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "expect.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "postgres_server.hpp"
#include "postgresql_bank.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::pg_bank;
using idem::reservation_status;
using idem::test::store_error_of;

// Reconnects a business session once the server is back.
void reconnect(soci::session& session) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        try {
            session.reconnect();
            return;
        } catch (const soci::soci_error&) {
            if (std::chrono::steady_clock::now() > deadline) throw;
            std::this_thread::sleep_for(20ms);
        }
    }
}

// Even threads reserve first (runner.run around the store's calls), odd ones
// write the record in one statement (execute_in_transaction).
std::string prefix_of(int thread) {
    return thread % 2 == 0 ? "r-" : "s-";
}

}  // namespace

TEST_CASE("a server restarted during a run: typed errors, then recovery; no crash, no duplicate") {
    idem::test::postgres_server server;
    auto store =
        std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = server.conninfo()});
    idem::executor exec{store};
    soci::session admin;
    idem::open_postgresql_session(admin, server.conninfo());
    bank::reset(admin);

    // Every connection transfers keys r-0, r-1, ... in order, each until it gets
    // an answer, so fresh keys are being executed when the server goes away.
    constexpr int threads = 4;
    std::atomic<bool> restarted{false};
    std::atomic<bool> stop{false};
    std::atomic<int> executed{0};
    std::atomic<int> lost{0};        // idem::store_error with is_connection_lost()
    std::atomic<int> business{0};    // SOCI errors of the business statements themselves
    std::atomic<int> transient{0};   // other idem::store_error with is_transient()
    std::atomic<int> unexpected{0};  // anything else
    std::vector<std::atomic<int>> done(threads);
    std::vector<std::atomic<int>> after_restart(threads);
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                soci::session session;
                idem::open_postgresql_session(session, server.conninfo());
                idem::transaction_runner runner{session};
                const auto me = static_cast<std::size_t>(t);
                // A key whose call failed is tried again, stop or not: it may or may not have committed.
                bool retry = false;
                while (!stop || retry) {
                    // Each form races its twin thread on its own keys: a one-statement run and a
                    // reservation made first on the same key wait on each other's rows, and
                    // PostgreSQL breaks that deadlock only after deadlock_timeout (docs/limits.md).
                    const std::string key = prefix_of(t) + std::to_string(done[me].load());
                    try {
                        bool ran = false;
                        if (t % 2 == 0) {
                            ran = bank::transfer(*store, runner, key, 10) == bank::outcome::executed;
                        } else {
                            auto e = idem::detail::execute_in_transaction(
                                exec, runner, bank::transfer_key(key), bank::fingerprint, {},
                                [&](idem::unit_of_work& tx) {
                                    bank::move_money(tx.sql(), key, 10);
                                    return std::string("moved 10");
                                },
                                idem::string_codec{});
                            ran = e.status() == idem::execution_status::executed;
                        }
                        if (ran) ++executed;
                        ++done[me];
                        if (restarted) ++after_restart[me];
                        retry = false;
                        continue;
                    } catch (const idem::store_error& e) {
                        // Connection lost, or another failure that says "try again" (a conflict
                        // with the twin thread whose answer the restart cut off): typed, expected.
                        (e.is_connection_lost() ? lost : e.is_transient() ? transient : unexpected)++;
                        if (!e.is_connection_lost())
                            MESSAGE(std::string(e.is_transient() ? "transient" : "unexpected")
                                    << " store error (thread " << t << "): " << std::string(e.what()) << " ["
                                    << e.native_code() << "]");
                    } catch (const soci::soci_error&) {
                        ++business;
                    } catch (const std::exception& e) {
                        ++unexpected;
                        MESSAGE("unexpected error: " << e.what());
                    }
                    retry = true;
                    reconnect(session);
                }
            });
        }
        std::this_thread::sleep_for(300ms);
        server.restart();
        restarted = true;
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        auto all_recovered = [&] {
            for (auto& n : after_restart)
                if (n < 50) return false;
            return true;
        };
        while (!all_recovered() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
        stop = true;
    }
    // Keys per form: the most any thread of that form finished.
    std::map<std::string, int> finished;
    for (int t = 0; t < threads; ++t)
        finished[prefix_of(t)] = std::max(finished[prefix_of(t)], done[static_cast<std::size_t>(t)].load());
    int keys = 0;
    for (const auto& [prefix, n] : finished) keys += n;
    MESSAGE(keys << " keys, " << executed.load() << " transfers executed; " << lost.load() << " connection-lost and "
                 << transient.load() << " other transient store errors and " << business.load()
                 << " errors of the business statements during the restart");
    CHECK(unexpected == 0);
    CHECK(lost + business + transient > 0);  // the restart did hit the run
    for (auto& n : after_restart) CHECK(n >= 50);

    // Every key moved the money exactly once, restart or not. (A commit whose
    // answer the restart swallowed counts as executed nowhere: its retry replays it.)
    reconnect(admin);
    CHECK(executed <= keys);
    CHECK(executed >= keys - lost - business - transient);
    CHECK(bank::count(admin, "SELECT count(*) FROM ledger") == keys);
    CHECK(bank::count(admin, "SELECT count(DISTINCT transfer_key) FROM ledger") == keys);
    CHECK(bank::balance(admin, "alice") == bank::opening_balance - 10 * keys);
    for (const auto& [prefix, n] : finished)
        for (int i = 0; i < n; ++i)
            CHECK(store->try_reserve(bank::transfer_key(prefix + std::to_string(i)), bank::fingerprint, 1min).status ==
                  reservation_status::completed);
}

TEST_CASE("while the server is down every call is a connection_lost store_error; afterwards the store recovers") {
    idem::test::postgres_server server;
    auto store = std::make_shared<idem::postgresql_store>(
        idem::postgresql_store_options{.connection = server.conninfo(), .pool_size = 2});
    idem::executor exec{store};
    soci::session session;
    idem::open_postgresql_session(session, server.conninfo());
    idem::transaction_runner runner{session};
    const idem::record_key key("outage", "k");
    auto before = store->try_reserve(idem::record_key("outage", "before"), "fp", 1h);
    REQUIRE(before.status == reservation_status::reserved);

    server.stop();
    CHECK(store_error_of([&] { (void)store->try_reserve(key, "fp", 1min); }).is_connection_lost());
    CHECK(store_error_of([&] { (void)store->count_expired(0s); }).is_connection_lost());
    CHECK(store_error_of([&] {
              runner.run([&](idem::unit_of_work& tx) { (void)store->try_reserve(tx, key, "fp", 1min); });
          }).is_connection_lost());
    CHECK(runner.last_state() != idem::transaction_state::committed);
    CHECK(store_error_of([&] {
              (void)idem::detail::execute_in_transaction(
                  exec, runner, key, "fp", {}, [](idem::unit_of_work&) { return std::string("ran"); },
                  idem::string_codec{});
          }).is_connection_lost());
    CHECK(store_error_of([&] {
              soci::session s;
              idem::open_postgresql_session(s, server.conninfo());
          }).is_connection_lost());
    CHECK(store_error_of([&] {
              idem::postgresql_store another({.connection = server.conninfo()});
          }).is_connection_lost());

    server.start();
    // The pool noticed its connections closed while idle: the first call already succeeds.
    CHECK(store->try_reserve(key, "fp", 1min).status == reservation_status::reserved);
    CHECK(store->try_reserve(idem::record_key("outage", "before"), "fp", 1h).status == reservation_status::in_flight);
    CHECK(store->complete(idem::record_key("outage", "before"), before.token, "fp", "done", 1h));
    reconnect(session);
    auto e = idem::detail::execute_in_transaction(
        exec, runner, idem::record_key("outage", "after"), "fp", {},
        [](idem::unit_of_work&) { return std::string("ran"); }, idem::string_codec{});
    CHECK(e.status() == idem::execution_status::executed);
}

TEST_CASE("a test process killed with SIGKILL leaves no server and no folder behind") {
    // This binary, run as "hold-server", starts a server and waits to be killed.
    idem::test::spawn_options spawn;
    spawn.argv = {"/proc/self/exe", "hold-server"};
    spawn.pipe_stdout = true;
    idem::test::child_process holder(std::move(spawn));
    const auto line = holder.read_line(60s);
    REQUIRE(line.has_value());
    std::istringstream fields(*line);
    pid_t pid = 0;
    std::string dir;
    fields >> pid >> dir;
    REQUIRE(pid > 0);
    REQUIRE(std::filesystem::exists(std::filesystem::path(dir) / "data" / "postmaster.pid"));

    holder.signal(SIGKILL);
    holder.reap();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while ((!idem::test::process_gone(pid) || std::filesystem::exists(dir)) &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    CHECK(idem::test::process_gone(pid));
    CHECK_FALSE(std::filesystem::exists(dir));
}

int main(int argc, char** argv) {
    if (argc == 2 && std::string_view(argv[1]) == "hold-server") {
        idem::test::postgres_server server;
        std::printf("%d %s\n", static_cast<int>(server.process().pid()), server.process().dir().c_str());
        std::fflush(stdout);
        for (;;) pause();
    }
    if (idem::test::external_postgres()) {
        std::puts(
            "skipped: these tests stop and restart a PostgreSQL server of their own, which they cannot do to "
            "the server IDEM_TEST_POSTGRES names");
        return 77;  // meson's "skipped"
    }
    doctest::Context context(argc, argv);
    return context.run();
}
