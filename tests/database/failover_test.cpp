// idem::database on a PostgreSQL primary and its streaming standby, both on
// loopback: the primary is made read-only without a restart and the standby
// promoted while clients run db.once through a multi-host URL
// (target_session_attrs=read-write), half of them reserving the key first
// through the store's own connections. A unit of work that meets the read-only
// server drops its connections and runs again on the new primary: no call
// fails, none runs twice, every key answered is on the new primary. Also: the
// URL refuses standby targets, and connections find a dead peer in seconds.
// Then the primary is killed outright under load and the standby promoted:
// with synchronous replication nothing answered is lost; with asynchronous
// replication what was lost is counted; either way no key moves money twice.
#include <doctest/doctest.h>

#include <libpq-fe.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/database.hpp"
#include "idem/outbox_relay.hpp"
#include "postgres_server.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using idem::execution_status;
using idem::test::postgres_server;

// One statement; its first value, if it returns one.
std::optional<std::string> query(const std::string& conninfo, const std::string& sql) {
    const auto rows = idem::test::sql_rows(conninfo, sql);
    if (rows.empty() || rows[0].empty()) return std::nullopt;
    return rows[0][0];
}

// The libpq setting `keyword` of the connection under a unit of work's session.
std::string setting_of(soci::session& sql, const char* keyword) {
    PGconn* conn = static_cast<soci::postgresql_session_backend*>(sql.get_backend())->conn_;
    PQconninfoOption* options = PQconninfo(conn);
    std::string value;
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o)
        if (std::string_view(o->keyword) == keyword && o->val != nullptr) value = o->val;
    PQconninfoFree(options);
    return value;
}

idem::record_key key_of(const std::string& k) {
    return {"bank.transfer", idem::scope::tenant("acme"), k};
}

void move(idem::unit_of_work& uow, long long amount) {
    uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount);
    uow.sql() << "UPDATE accounts SET balance = balance + :a WHERE id = 'bob'", soci::use(amount);
}

long long balance_on(const std::string& conninfo, const std::string& account) {
    return std::stoll(query(conninfo, "SELECT balance FROM accounts WHERE id = '" + account + "'").value());
}

}  // namespace

TEST_CASE("PostgreSQL: a URL that targets a standby is refused before anything opens") {
    postgres_server server;
    for (const char* target : {"standby", "prefer-standby", "read-only"}) {
        CAPTURE(target);
        try {
            (void)idem::database::open(server.conninfo() + " target_session_attrs=" + target);
            FAIL("a standby target was accepted");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string(e.what()).find("target_session_attrs=" + std::string(target)) != std::string::npos);
        }
    }
    for (const char* target : {"read-write", "primary", "any"})
        CHECK_NOTHROW((void)idem::database::open(server.conninfo() + " target_session_attrs=" + target));
}

TEST_CASE("PostgreSQL: connections find a dead peer in seconds unless the URL says otherwise") {
    postgres_server server;
    idem::database db = idem::database::open(server.conninfo());
    db.transact([](idem::unit_of_work& uow) {
        CHECK(setting_of(uow.sql(), "keepalives") == "1");
        CHECK(setting_of(uow.sql(), "keepalives_idle") == "5");
        CHECK(setting_of(uow.sql(), "keepalives_interval") == "2");
        CHECK(setting_of(uow.sql(), "keepalives_count") == "3");
        CHECK(setting_of(uow.sql(), "tcp_user_timeout") == "10000");
        CHECK(setting_of(uow.sql(), "connect_timeout") == "10");
    });
    idem::database own = idem::database::open(server.conninfo() + " keepalives_idle=30 tcp_user_timeout=0");
    own.transact([](idem::unit_of_work& uow) {
        CHECK(setting_of(uow.sql(), "keepalives_idle") == "30");
        CHECK(setting_of(uow.sql(), "tcp_user_timeout") == "0");
        CHECK(setting_of(uow.sql(), "keepalives_count") == "3");
    });
}

TEST_CASE("PostgreSQL: a server silent past answer_timeout (stopped by SIGSTOP) ends the unit of work's connection") {
    // A stopped server's kernel still acknowledges TCP and answers keepalive
    // probes: without the watch a unit of work would wait on it for good.
    postgres_server server;
    constexpr auto bound = 2s;
    idem::database db =
        idem::database::open(server.conninfo(), {.pool_size = 1, .attempts = 1, .answer_timeout = bound});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "CREATE TABLE moves (id BIGINT PRIMARY KEY)"; });
    const auto moves = [&] {
        return db.transact([](idem::unit_of_work& uow) {
            long long n = 0;
            uow.sql() << "SELECT COUNT(*) FROM moves", soci::into(n);
            return n;
        });
    };
    // Runs `call` with the server stopped (before it starts when `stop_first`;
    // else the call stops it); returns how long it took, after it threw what
    // `check` accepts. The server runs again afterwards, whatever happened.
    const auto stopped = [&](bool stop_first, auto call, auto check) {
        if (stop_first) server.signal_all(SIGSTOP);
        const auto start = clock_type::now();
        auto pending = std::async(std::launch::async, call);
        const bool ended = pending.wait_for(bound + 10s) == std::future_status::ready;
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start);
        server.signal_all(SIGCONT);
        REQUIRE_MESSAGE(ended, "the call still waited on the stopped server " << (bound + 10s).count() << " s later");
        try {
            pending.get();
            FAIL("the call succeeded against a stopped server");
        } catch (const std::exception& e) {
            check(e);
        }
        return took;
    };

    SUBCASE("a statement sent: a lost connection, nothing written, the next unit of work on a fresh one") {
        const auto took = stopped(
            true, [&] { db.transact([](idem::unit_of_work& uow) { uow.sql() << "INSERT INTO moves VALUES (1)"; }); },
            [](const std::exception& e) {
                const auto* lost = dynamic_cast<const idem::error*>(&e);
                REQUIRE_MESSAGE(lost != nullptr, std::string(e.what()));
                CHECK(lost->is_connection_lost());
                CHECK(lost->rolled_back());
            });
        MESSAGE("a unit of work on a stopped server ended after " << took.count() << " ms (answer_timeout 2000 ms)");
        CHECK(took >= bound - 100ms);
        CHECK(took < bound + 3s);
        CHECK(moves() == 0);
    }

    SUBCASE("a COMMIT sent: in doubt, and the retry with the same key runs it at most once") {
        const auto key = idem::record_key("bank.move", "m-1");
        int runs = 0;
        const auto move = [&](idem::unit_of_work& uow, bool stop_before_commit) {
            ++runs;
            uow.sql() << "INSERT INTO moves VALUES (1)";
            // Stopped between the work and the COMMIT that carries the record.
            if (stop_before_commit) server.signal_all(SIGSTOP);
            return std::string("moved");
        };
        const auto took = stopped(
            false, [&] { (void)db.once(key, "fp", [&](idem::unit_of_work& uow) { return move(uow, true); }); },
            [](const std::exception& e) {
                CHECK_MESSAGE(dynamic_cast<const idem::transaction_in_doubt*>(&e) != nullptr, std::string(e.what()));
            });
        MESSAGE("a COMMIT on a stopped server ended in doubt after " << took.count() << " ms");
        CHECK(took < bound + 3s);
        // The server, running again, may still take the COMMIT it had received:
        // the retry replays it then, or runs the work once more.
        const auto again = db.once(key, "fp", [&](idem::unit_of_work& uow) { return move(uow, false); });
        CHECK(again.value() == "moved");
        MESSAGE("after the stop the retry was "
                << std::string(again.status() == execution_status::replayed ? "replayed" : "executed"));
        CHECK(runs == (again.status() == execution_status::replayed ? 1 : 2));
        CHECK(moves() == 1);
    }

    SUBCASE("the record store's own connection (a reservation outside any unit of work): the same bound") {
        const auto took = stopped(
            true, [&] { (void)db.store().try_reserve(idem::record_key("bank.move", "m-2"), "fp", 10s); },
            [](const std::exception& e) {
                const auto* lost = dynamic_cast<const idem::error*>(&e);
                REQUIRE_MESSAGE(lost != nullptr, std::string(e.what()));
                CHECK(lost->is_connection_lost());
            });
        MESSAGE("a reservation on a stopped server ended after " << took.count() << " ms (answer_timeout 2000 ms)");
        CHECK(took < bound + 3s);
    }

    SUBCASE("a transaction that keeps talking to its server is left alone; one left idle past the bound is ended") {
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "INSERT INTO moves VALUES (2)";
            for (int i = 0; i < 4; ++i) {  // 3 s in all, never 2 s without an answer
                std::this_thread::sleep_for(750ms);
                uow.sql() << "SELECT 1";
            }
        });
        CHECK(moves() == 1);
        try {
            db.transact([&](idem::unit_of_work& uow) {
                uow.sql() << "INSERT INTO moves VALUES (3)";
                std::this_thread::sleep_for(bound + 1s);  // idle in the transaction, the server silent
                uow.sql() << "INSERT INTO moves VALUES (4)";
            });
            FAIL("a transaction idle past answer_timeout went on");
        } catch (const idem::error& e) {
            CHECK(e.is_connection_lost());
            CHECK(e.rolled_back());
        }
        CHECK(moves() == 1);
    }
}

TEST_CASE("PostgreSQL: the primary made read-only and its standby promoted under load: no call fails or runs twice") {
    postgres_server primary;
    postgres_server standby{postgres_server::standby_of{primary}};
    const std::string url = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary.port()) + "," +
                            std::to_string(standby.port()) +
                            " user=idem dbname=postgres target_session_attrs=read-write";
    // Reruns that outlast the switch: 20 ms doubling, about 5 s in all.
    idem::database db = idem::database::open(url, {.pool_size = 4, .attempts = 9, .backoff = 20ms});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts VALUES ('alice', 1000000), ('bob', 0)";
    });

    // The relay runs through the switch as well; a claim it could not settle on the
    // old primary is due again on the new one after its lease.
    std::mutex delivered_mutex;
    std::vector<idem::outbox_delivery> delivered;
    auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
        const std::lock_guard lock(delivered_mutex);
        delivered.push_back(m);
        return idem::delivery_result::delivered();
    });
    idem::outbox_relay relay(db, sink, {.batch = 20, .lease = 2000ms, .idle_wait = 5ms});
    relay.start();

    constexpr int clients = 4;
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0}, not_executed{0};
    std::mutex mutex;
    std::vector<std::string> answered;  // keys whose call returned executed
    std::vector<std::pair<clock_type::time_point, clock_type::time_point>> successes;  // (started, answered)
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
        threads.emplace_back([&, c] {
            for (int i = 0; !stop; ++i) {
                const std::string key = "c" + std::to_string(c) + "-" + std::to_string(i);
                const auto started = clock_type::now();
                try {
                    // Half the clients reserve the key first, through the store's own connections.
                    auto e = db.once(key_of(key), "fp",
                                     [&](idem::unit_of_work& uow) {
                                         move(uow, 1);
                                         // One event per transfer, in order per client.
                                         (void)uow.publish({.topic = "moved",
                                                            .payload = std::to_string(i),
                                                            .ordering_key = "c" + std::to_string(c)});
                                         return std::string("moved 1");
                                     },
                                     {.reserve_first = c % 2 == 1});
                    if (e.status() != execution_status::executed) {
                        ++not_executed;
                        continue;
                    }
                    const std::lock_guard lock(mutex);
                    answered.push_back(key);
                    successes.emplace_back(started, clock_type::now());
                } catch (const idem::error& e) {
                    MESSAGE("a call failed: " << std::string(e.what()));
                    ++failures;
                }
                std::this_thread::sleep_for(2ms);
            }
        });

    std::this_thread::sleep_for(1s);
    // The switch, as an operator plans it: the primary takes no more writes, the
    // standby replays all it wrote, then is promoted; the old primary stays up,
    // read-only. A reload reaches each connection at its next statement, which then
    // fails with 25006; a transaction begun before it could still commit, so after
    // a moment the connections left are ended, and only then is the primary's last
    // position read for the standby to reach.
    const auto fault = clock_type::now();
    (void)query(primary.conninfo(), "ALTER SYSTEM SET default_transaction_read_only = on");
    (void)query(primary.conninfo(), "SELECT pg_reload_conf()");
    std::this_thread::sleep_for(300ms);
    (void)query(primary.conninfo(),
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid()");
    const std::string last_lsn = query(primary.conninfo(), "SELECT pg_current_wal_lsn()::text").value();
    bool caught_up = false;
    for (int i = 0; i < 1000 && !caught_up; ++i) {
        caught_up = query(standby.conninfo(), "SELECT pg_last_wal_replay_lsn() >= '" + last_lsn + "'::pg_lsn") == "t";
        if (!caught_up) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(caught_up);
    CHECK(query(standby.conninfo(), "SELECT pg_promote()") == "t");
    const auto promoted = clock_type::now();
    std::this_thread::sleep_for(2s);
    stop = true;
    for (auto& t : threads) t.join();

    // Every event of an answered call arrives, in order per client; a redelivery
    // carries the same id.
    std::map<std::string, std::vector<long>> firsts;  // per ordering key, payloads in first-delivery order
    std::size_t redelivered = 0;
    for (int wait = 0; wait < 1000; ++wait) {
        std::set<std::string> ids;
        firsts.clear();
        redelivered = 0;
        {
            const std::lock_guard lock(delivered_mutex);
            for (const auto& m : delivered) {
                if (!ids.insert(m.id).second) {
                    ++redelivered;
                    continue;
                }
                firsts[m.ordering_key.value_or("")].push_back(std::stol(m.payload));
            }
        }
        if (ids.size() >= answered.size()) break;
        std::this_thread::sleep_for(10ms);
    }
    relay.stop();
    std::size_t events = 0;
    for (const auto& [client, payloads] : firsts) {
        CAPTURE(client);
        CHECK(std::is_sorted(payloads.begin(), payloads.end()));
        events += payloads.size();
    }
    CHECK(events == answered.size());
    MESSAGE(events << " events delivered in order per client, " << redelivered << " delivered again");

    // The longest time without an answer around the switch.
    std::vector<clock_type::time_point> answers;
    for (const auto& s : successes) answers.push_back(s.second);
    std::sort(answers.begin(), answers.end());
    clock_type::duration longest_gap{};
    for (std::size_t i = 1; i < answers.size(); ++i)
        if (answers[i] > fault - 1s) longest_gap = std::max(longest_gap, answers[i] - answers[i - 1]);
    using ms = std::chrono::milliseconds;
    MESSAGE("from the primary made read-only to the standby promoted "
            << std::chrono::duration_cast<ms>(promoted - fault).count() << " ms; the longest time without an answer "
            << std::chrono::duration_cast<ms>(longest_gap).count() << " ms; " << answered.size() << " calls executed, "
            << failures.load() << " failed");
    CHECK(failures == 0);
    CHECK(not_executed == 0);
    // Every answered call is on the new primary, once: the money moved once a call,
    // and each key replays there.
    const std::string now_primary = standby.conninfo();
    CHECK(balance_on(now_primary, "bob") == static_cast<long long>(answered.size()));
    CHECK(balance_on(now_primary, "alice") == 1000000 - static_cast<long long>(answered.size()));
    for (const std::string& key : answered) {
        auto e = db.once(key_of(key), "fp", [](idem::unit_of_work&) -> std::string {
            FAIL("an answered key ran again");
            return {};
        });
        CHECK(e.status() == execution_status::replayed);
    }
    // Nothing was written on the old primary after it turned read-only.
    CHECK(balance_on(primary.conninfo(), "bob") <= balance_on(now_primary, "bob"));
}

namespace {

// The primary's whole process group killed at once (postmaster and backends, as
// when its host dies), the standby promoted a moment later, while four clients
// retry each key until it is answered, as a client does after a 503 or a lost
// answer. Returns the answered keys that were not on the new primary (each runs
// again when it is checked, so the books stay exact).
int kill_primary_under_load(bool synchronous) {
    postgres_server primary;
    postgres_server standby{postgres_server::standby_of{primary}};
    if (synchronous) {
        (void)query(primary.conninfo(), "ALTER SYSTEM SET synchronous_standby_names = '*'");
        (void)query(primary.conninfo(), "SELECT pg_reload_conf()");
        bool sync = false;
        for (int i = 0; i < 500 && !sync; ++i) {
            sync =
                query(primary.conninfo(), "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == "1";
            if (!sync) std::this_thread::sleep_for(10ms);
        }
        REQUIRE(sync);
    }
    // The test servers run with synchronous_commit off; idem's sessions ask for it on.
    const std::string url =
        "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary.port()) + "," + std::to_string(standby.port()) +
        " user=idem dbname=postgres target_session_attrs=read-write options=-csynchronous_commit=on";
    idem::database db = idem::database::open(url, {.pool_size = 4, .attempts = 9, .backoff = 20ms});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        std::string commit_mode;
        uow.sql() << "SHOW synchronous_commit", soci::into(commit_mode);
        REQUIRE(commit_mode == "on");
        uow.sql() << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts VALUES ('alice', 1000000), ('bob', 0)";
    });

    std::atomic<bool> stop{false};
    std::atomic<int> in_doubt{0}, unavailable{0}, gave_up{0};
    std::mutex mutex;
    std::vector<std::string> answered;
    std::vector<std::thread> threads;
    for (int c = 0; c < 4; ++c)
        threads.emplace_back([&, c] {
            for (int i = 0; !stop; ++i) {
                const std::string key = "c" + std::to_string(c) + "-" + std::to_string(i);
                bool done = false;
                for (int attempt = 0; attempt < 100 && !done; ++attempt) {
                    try {
                        auto e = db.once(key_of(key), "fp", [](idem::unit_of_work& uow) {
                            move(uow, 1);
                            return std::string("moved 1");
                        });
                        done = e.status() == execution_status::executed || e.status() == execution_status::replayed;
                    } catch (const idem::transaction_in_doubt&) {
                        ++in_doubt;  // the retry with the same key replays what committed, or runs once
                    } catch (const idem::error&) {
                        ++unavailable;
                    }
                    if (!done) std::this_thread::sleep_for(50ms);
                }
                if (!done) {
                    ++gave_up;
                    continue;
                }
                const std::lock_guard lock(mutex);
                answered.push_back(key);
            }
        });
    std::this_thread::sleep_for(1s);
    primary.process().stop(SIGKILL, 0ms);
    std::this_thread::sleep_for(500ms);  // the time a failover manager takes to decide, shortened
    CHECK(query(standby.conninfo(), "SELECT pg_promote()") == "t");
    std::this_thread::sleep_for(2s);
    stop = true;
    for (auto& t : threads) t.join();

    std::atomic<int> lost{0};
    for (const std::string& key : answered) {
        auto e = db.once(key_of(key), "fp", [&](idem::unit_of_work& uow) {
            ++lost;  // answered, yet the new primary has no record of it
            move(uow, 1);
            return std::string("moved 1");
        });
        CHECK(e.status() != execution_status::in_flight);
    }
    MESSAGE(std::string(synchronous ? "synchronous" : "asynchronous")
            << " replication, primary killed: " << answered.size() << " keys answered, " << in_doubt.load()
            << " answers in doubt, " << unavailable.load() << " failed attempts retried, " << lost.load()
            << " answered keys missing on the new primary");
    CHECK(gave_up == 0);
    // Each answered key moved the money once in the history that survived.
    CHECK(balance_on(standby.conninfo(), "bob") == static_cast<long long>(answered.size()));
    return lost.load();
}

}  // namespace

TEST_CASE(
    "PostgreSQL: the primary killed under load, replication synchronous: nothing answered is lost or runs twice") {
    CHECK(kill_primary_under_load(true) == 0);
}

TEST_CASE(
    "PostgreSQL: the primary killed under load, replication asynchronous: what it lost is counted, never doubled") {
    (void)kill_primary_under_load(false);
}
