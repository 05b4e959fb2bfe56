// Real processes on one PostgreSQL database: racing transfers, a client killed
// with SIGKILL before its commit, migrations and purges started at the same moment.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <future>
#include <memory>

#include "migration_race.hpp"
#include "postgres_server.hpp"
#include "postgresql_bank.hpp"
#include "tcp_proxy.hpp"
#include "transfer_race.hpp"
#include "worker_processes.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::pg_bank;
using idem::test::exit_code;
using idem::test::line_of;
using idem::test::release_together;
using idem::test::start_worker;
using idem::test::start_workers;

const std::string worker = IDEM_POSTGRESQL_WORKER;

struct bank_database {
    std::string conninfo = idem::test::shared_postgres();
    idem::postgresql_store store{{.connection = conninfo}};
    soci::session session;

    bank_database() {
        idem::open_postgresql_session(session, conninfo);
        bank::reset(session);
    }
};

}  // namespace

TEST_CASE("4 processes x 16 connections racing the same transfers move the money exactly once") {
    bank_database f;
    // 100 transfer keys; every connection of every process tries each of them.
    idem::test::race_transfers(f.session, f.store, {worker, "transfer", f.conninfo}, 4, 16, 100);
}

TEST_CASE("4 processes x 16 connections racing the same transfers in the one-statement form move the money once") {
    bank_database f;
    // Duplicates run the work; every one but the first to commit rolls back and replays.
    idem::test::race_transfers(f.session, f.store, {worker, "transfer-one-statement", f.conninfo}, 4, 16, 100);
}

TEST_CASE("a client killed with SIGKILL before its commit leaves nothing; the duplicate it blocked runs, once") {
    bank_database f;
    auto child = start_worker({worker, "crash", f.conninfo, "crash-1"});
    REQUIRE(line_of(*child) == "written");  // reserved, debited, credited, ledger written: not committed

    // A duplicate arrives and waits on the uncommitted reservation.
    auto duplicate = std::async(std::launch::async, [&] {
        soci::session session;
        idem::open_postgresql_session(session, f.conninfo);
        idem::transaction_runner runner{session};
        return bank::transfer(f.store, runner, "crash-1", 10);
    });
    CHECK(duplicate.wait_for(300ms) == std::future_status::timeout);

    child->signal(SIGKILL);
    CHECK(exit_code(*child) == 128 + SIGKILL);
    // The server sees the connection close, rolls the client's transaction back and lets the duplicate through.
    REQUIRE(duplicate.wait_for(10s) == std::future_status::ready);
    CHECK(duplicate.get() == bank::outcome::executed);

    idem::transaction_runner runner{f.session};
    CHECK(bank::transfer(f.store, runner, "crash-1", 10) == bank::outcome::replayed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(bank::balance(f.session, "bob") == bank::opening_balance + 10);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 1);
    CHECK(bank::count(f.session, "SELECT count(*) FROM idem_records") == 1);

    // Killed with nobody waiting: nothing remains, and a retry runs once.
    auto second = start_worker({worker, "crash", f.conninfo, "crash-2"});
    REQUIRE(line_of(*second) == "written");
    second->signal(SIGKILL);
    CHECK(exit_code(*second) == 128 + SIGKILL);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (bank::count(f.session, "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'") >
               0 &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 1);
    CHECK(bank::count(f.session, "SELECT count(*) FROM idem_records") == 1);
    CHECK(bank::transfer(f.store, runner, "crash-2", 10) == bank::outcome::executed);
    CHECK(bank::transfer(f.store, runner, "crash-2", 10) == bank::outcome::replayed);
    CHECK(bank::count(f.session, "SELECT count(*) FROM ledger") == 2);
}

TEST_CASE("a runner destroyed inside run() on a connection that is gone tells its sink the server ends it") {
    const std::string conninfo = idem::test::shared_postgres();
    idem::test::tcp_proxy proxy(idem::test::port_of(conninfo));
    auto child = start_worker({worker, "exit-in-run", idem::test::with_port(conninfo, proxy.port())});
    REQUIRE(line_of(*child) == "in run");
    proxy.sever();  // the connection breaks with the transaction open
    child->write("exit\n");
    const std::string line = line_of(*child);
    CHECK(line.find("level=warning event=idem.transaction.abandoned") != std::string::npos);
    CHECK(line.find("a connection that is gone") != std::string::npos);
    CHECK(exit_code(*child) == 0);
}

TEST_CASE("migrations started by several processes at once are applied exactly once") {
    bank_database f;
    idem::test::scratch_database scratch(f.conninfo, "migrate_race");
    const std::string& fresh = scratch.conninfo();
    idem::test::race_migrations(
        {worker, "migrate", fresh}, 4,
        {"0001_create_records", "0002_purge_by_insertion_order", "0003_purge_by_expiry", "0004_lean_records",
         "0005_outbox", "0006_steps", "0007_completer", "0008_outbox_claim_order", "0009_operation_failures",
         "0010_outbox_lean", "0011_outbox_intake", "0012_tombstones", "0013_scope_ids"});
    {
        soci::session session;
        idem::open_postgresql_session(session, fresh);
        CHECK(bank::count(session, "SELECT count(*) FROM idem_schema_versions") == 13);  // every migration, once
        CHECK(bank::count(session, "SELECT count(*) FROM pg_tables WHERE tablename = 'idem_records'") == 1);
    }
}

TEST_CASE("two processes purging at once delete each expired row exactly once, and never a live one") {
    bank_database f;
    constexpr long long expired = 20000;
    f.session << "INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, completed,"
                 " created_at, expires_at)"
                 " SELECT substring(sha256(('expired-' || i)::bytea) FROM 1 FOR 16), 'purge', '\\x01', '\\x01',"
                 " CASE WHEN i % 2 = 0 THEN '\\x02'::bytea END, i % 2 = 0, now() - interval '1 hour',"
                 " now() - interval '1 second' * i FROM generate_series(1, :n) AS i",
        soci::use(expired);
    std::vector<idem::record_key> live;
    for (int i = 0; i < 10; ++i) {
        live.emplace_back("purge", "live-" + std::to_string(i));
        auto r = f.store.try_reserve(live.back(), "fp", 1h);
        if (i % 2 == 0) REQUIRE(f.store.complete(live.back(), r.token, "fp", "kept", 1h));
    }
    REQUIRE(f.store.count_expired(0s) == static_cast<std::size_t>(expired));

    auto children = start_workers(2, {worker, "purge", f.conninfo, "500"});
    release_together(children);
    long long purged = 0;
    std::string each;
    for (auto& c : children) {
        const std::string line = line_of(*c);
        purged += std::stoll(line);
        each += " " + line;
        CHECK(exit_code(*c) == 0);
    }
    MESSAGE("purged " << purged << " rows (per process:" << each << ")");
    CHECK(purged == expired);
    CHECK(f.store.count_expired(0s) == 0);
    CHECK(bank::count(f.session, "SELECT count(*) FROM idem_records") == 10);
    for (std::size_t i = 0; i < live.size(); ++i)
        CHECK(f.store.try_reserve(live[i], "fp", 1h).status ==
              (i % 2 == 0 ? idem::reservation_status::completed : idem::reservation_status::in_flight));
}
