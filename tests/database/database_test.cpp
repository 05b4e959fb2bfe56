// idem::database on real SQLite files and a throwaway PostgreSQL: the same
// scenarios on both, through the one URL each is opened with.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "idem/database.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/store_registry.hpp"
#include "mapped_bank.hpp"
#include "recording_sink.hpp"
#include "temp_dir.hpp"
#ifdef IDEM_TEST_POSTGRESQL
#include "idem/postgresql_store.hpp"
#include "postgres_server.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using idem::execution_status;
using namespace idem::test;

}  // namespace

TEST_CASE("16 threads x 50 rounds of once on one key per round: one executed per round, balances exact") {
    on_every_bank({.pool_size = 8}, [&](idem::database& db) {
        constexpr int threads = 16, rounds = 50;
        std::atomic<int> executed{0}, replayed{0}, other{0};
        std::barrier start(threads);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&] {
                for (int round = 0; round < rounds; ++round) {
                    start.arrive_and_wait();
                    auto e = db.once(key_of("round-" + std::to_string(round)), "fp", [&](idem::unit_of_work& uow) {
                        move(uow, 10);
                        return std::string("moved 10");
                    });
                    if (e.status() == execution_status::executed)
                        ++executed;
                    else if (e.status() == execution_status::replayed && e.value() == "moved 10")
                        ++replayed;
                    else
                        ++other;
                }
            });
        for (auto& t : pool) t.join();
        CHECK(executed == rounds);
        CHECK(replayed == (threads - 1) * rounds);
        CHECK(other == 0);
        CHECK(balance(db, "alice") == 1000000 - 10 * rounds);
        CHECK(balance(db, "bob") == 10 * rounds);
    });
}

TEST_CASE("once: a key in flight elsewhere answers in_flight; an expired one is taken over") {
    on_every_bank([&](idem::database& db) {
        int runs = 0;
        auto work = [&](idem::unit_of_work& uow) {
            ++runs;
            move(uow, 3);
            return std::string("moved 3");
        };
        // Lease mode holds the key through the store's own connection.
        auto held = db.store().try_reserve(key_of("held"), "fp", 1min);
        REQUIRE(held.status == idem::reservation_status::reserved);
        CHECK(db.once(key_of("held"), "fp", work).status() == execution_status::in_flight);
        CHECK(db.once(key_of("held"), "other fp", work).status() == execution_status::key_reused);
        CHECK(runs == 0);

        auto lapsed = db.store().try_reserve(key_of("lapsed"), "fp", 1ms);
        REQUIRE(lapsed.status == idem::reservation_status::reserved);
        std::this_thread::sleep_for(50ms);
        CHECK(db.once(key_of("lapsed"), "fp", work).status() == execution_status::executed);
        CHECK(runs == 1);
        const auto record = db.admin().inspect(key_of("lapsed").digest(), false);
        REQUIRE(record.has_value());
        CHECK(record->completed);
        CHECK_FALSE(db.store().complete(key_of("lapsed"), lapsed.token, "fp", "late", 1min));  // taken over
        CHECK(db.once(key_of("lapsed"), "fp", work).value() == "moved 3");
        CHECK(runs == 1);
        CHECK(balance(db, "bob") == 3);
    });
}

// The record a transaction writes whole (the lookup, the work, then the record
// with COMMIT) has no holder: its token is one byte, which no call may name.
TEST_CASE("once: the record written with the work has no holder's token: one byte, which no call may name") {
    on_every_bank([&](idem::database& db) {
        auto work = [&](idem::unit_of_work& uow) {
            move(uow, 1);
            return std::string("moved 1");
        };
        CHECK(db.once(key_of("whole"), "fp", work).status() == execution_status::executed);
        long long widest = 0;
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "SELECT MAX(length(token)) FROM idem_records", soci::into(widest);
        });
        CHECK(widest == 1);
        CHECK_THROWS_AS((void)db.store().release(key_of("whole"), idem::detail::unheld_token), std::invalid_argument);
        CHECK_THROWS_AS((void)db.store().complete(key_of("whole"), idem::detail::unheld_token, "fp", "forged", 1min),
                        std::invalid_argument);
        CHECK(db.once(key_of("whole"), "fp", work).value() == "moved 1");
        CHECK(balance(db, "bob") == 1);
    });
}

TEST_CASE("once: a business constraint violation is its own typed error, rolled back, not a lost race") {
    on_every_bank([&](idem::database& db) {
        int runs = 0;
        try {
            (void)db.once(key_of("dup-account"), "fp", [&](idem::unit_of_work& uow) {
                ++runs;
                move(uow, 1);
                uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('alice', 1)";
                return std::string("unreachable");
            });
            FAIL("the duplicate account was accepted");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::constraint);
            CHECK(e.rolled_back());
        }
        CHECK(runs == 1);
        CHECK(balance(db, "bob") == 0);
        CHECK_FALSE(db.admin().inspect(key_of("dup-account").digest(), false).has_value());
    });
}

#ifdef IDEM_TEST_POSTGRESQL
TEST_CASE("PostgreSQL: a business constraint checked at COMMIT, beside the record, is not a lost race") {
    postgresql_place where;
    idem::database db = open_bank(where);
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE receipts (id text, CONSTRAINT receipts_once UNIQUE (id) DEFERRABLE INITIALLY "
                     "DEFERRED)";
        uow.sql() << "INSERT INTO receipts (id) VALUES ('r-1')";
    });
    int runs = 0;
    try {
        (void)db.once(key_of("deferred"), "fp", [&](idem::unit_of_work& uow) {
            ++runs;
            move(uow, 1);
            uow.sql() << "INSERT INTO receipts (id) VALUES ('r-1')";  // checked by the COMMIT after the record
            return std::string("moved 1");
        });
        FAIL("the duplicate receipt was committed");
    } catch (const idem::store_error& e) {
        CHECK(e.failure() == idem::store_failure::constraint);
        CHECK(e.native_code() == "23505");
        CHECK(e.rolled_back());
    }
    CHECK(runs == 1);
    CHECK(balance(db, "bob") == 0);
    CHECK_FALSE(db.admin().inspect(key_of("deferred").digest(), false).has_value());
}

TEST_CASE("PostgreSQL: duplicates that all ran the work: one commits, the others roll back and replay") {
    postgresql_place where;
    auto sink = std::make_shared<idem::test::recording_sink>();
    idem::database_options options;
    options.pool_size = 8;
    options.telemetry = sink;
    idem::database db = open_bank(where, options);
    constexpr int threads = 6;
    std::barrier all_inside(threads);  // nobody commits before every duplicate has looked the key up
    std::atomic<int> runs{0}, executed{0}, replayed{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            auto e = db.once(key_of("race"), "fp", [&](idem::unit_of_work& uow) {
                ++runs;
                all_inside.arrive_and_wait();
                move(uow, 10);
                return std::string("moved 10");
            });
            if (e.status() == execution_status::executed) ++executed;
            if (e.status() == execution_status::replayed && e.value() == "moved 10") ++replayed;
        });
    for (auto& t : pool) t.join();
    CHECK(runs == threads);  // nothing was reserved: every duplicate ran, and all but one rolled back
    CHECK(executed == 1);
    CHECK(replayed == threads - 1);
    CHECK(balance(db, "alice") == 1000000 - 10);
    CHECK(balance(db, "bob") == 10);
    CHECK(sink->count(idem::outcome::executed, idem::mode::enforce) == 1);
    CHECK(sink->count(idem::outcome::replay, idem::mode::enforce) == threads - 1);
}

TEST_CASE("PostgreSQL: a duplicate whose work fails on the first one's writes replays it") {
    postgresql_place where;
    idem::database_options options;
    options.pool_size = 4;
    idem::database db = open_bank(where, options);
    std::barrier both_inside(2);
    std::atomic<int> executed{0}, replayed{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 2; ++t)
        pool.emplace_back([&] {
            const bank::transfer row{"t-race", "alice", "bob", 20};
            auto e = db.once(key_of("t-race"), "fp", [&](idem::unit_of_work& uow) {
                both_inside.arrive_and_wait();
                // The second waits for the first's row, then fails on transfers' primary key.
                uow.sql() << "INSERT INTO transfers (id, from_account, to_account, amount) "
                             "VALUES (:id, :from_account, :to_account, :amount)",
                    soci::use(row);
                move(uow, row.amount);
                return row;
            });
            if (e.status() == execution_status::executed) ++executed;
            if (e.status() == execution_status::replayed && e.value().amount == 20) ++replayed;
        });
    for (auto& t : pool) t.join();
    CHECK(executed == 1);
    CHECK(replayed == 1);
    CHECK(balance(db, "bob") == 20);
}

TEST_CASE("PostgreSQL: a duplicate whose work throws its own exception once the first committed gets the replay") {
    postgresql_place where;
    idem::database_options options;
    options.pool_size = 4;
    idem::database db = open_bank(where, options);
    struct insufficient_funds : std::runtime_error {
        insufficient_funds() : std::runtime_error("insufficient funds") {}
    };
    std::barrier both_inside(2);
    std::atomic<int> entered{0};
    std::promise<void> first_committed;
    std::shared_future<void> committed = first_committed.get_future().share();
    auto pay = [&] {
        auto e = db.once(key_of("t-funds"), "fp", [&](idem::unit_of_work& uow) {
            const bool first = entered++ == 0;
            both_inside.arrive_and_wait();
            if (!first) {
                // The second finds the money gone once the first committed, and says so by throwing.
                if (committed.wait_for(60s) != std::future_status::ready) throw std::logic_error("no commit");
                throw insufficient_funds();
            }
            move(uow, 999999);
            return std::string("paid");
        });
        if (e.status() == execution_status::executed) first_committed.set_value();
        return e;
    };
    auto a = std::async(std::launch::async, pay), b = std::async(std::launch::async, pay);
    const auto one = a.get(), other = b.get();
    // One executed; the other's exception gave way to the first's replay.
    CHECK((one.status() == execution_status::executed) != (other.status() == execution_status::executed));
    CHECK((one.status() == execution_status::replayed) != (other.status() == execution_status::replayed));
    for (const auto* e : {&one, &other}) {
        REQUIRE(e->has_value());
        CHECK(e->value() == "paid");
    }
    CHECK(balance(db, "bob") == 999999);
}

TEST_CASE("PostgreSQL: reserve_first makes a duplicate wait instead of running the work") {
    postgresql_place where;
    idem::database db = open_bank(where);
    for (const bool reserve_first : {true, false}) {
        CAPTURE(reserve_first);
        const std::string key = reserve_first ? "reserved" : "optimistic";
        std::atomic<int> runs{0};
        std::promise<void> started;
        auto work = [&](idem::unit_of_work& uow) {
            if (++runs == 1) {
                move(uow, 1);
                started.set_value();
                std::this_thread::sleep_for(300ms);
            } else {
                move(uow, 1);
            }
            return std::string("moved 1");
        };
        std::thread first([&] {
            CHECK(db.once(key_of(key), "fp", work, {.reserve_first = reserve_first}).status() ==
                  execution_status::executed);
        });
        started.get_future().wait();
        auto second = db.once(key_of(key), "fp", work, {.reserve_first = reserve_first});
        first.join();
        CHECK(second.status() == execution_status::replayed);
        CHECK(runs == (reserve_first ? 1 : 2));
    }
    CHECK(balance(db, "bob") == 2);
}
#endif

TEST_CASE("once: key reused, a throw leaves nothing and the retry executes, void and integer results") {
    on_every_bank([&](idem::database& db) {
        CHECK_THROWS_AS(db.once(key_of("k1"), "fp-a",
                                [&](idem::unit_of_work& uow) -> std::string {
                                    move(uow, 5);
                                    throw std::runtime_error("fraud check failed");
                                }),
                        std::runtime_error);
        CHECK(balance(db, "bob") == 0);
        CHECK_FALSE(db.admin().inspect(key_of("k1").digest(), false).has_value());

        auto first = db.once(key_of("k1"), "fp-a", [&](idem::unit_of_work& uow) {
            move(uow, 5);
            return std::string("moved 5");
        });
        CHECK(first.status() == execution_status::executed);
        auto reused = db.once(key_of("k1"), "fp-b", [&](idem::unit_of_work& uow) {
            move(uow, 7);
            return std::string("moved 7");
        });
        CHECK(reused.status() == execution_status::key_reused);
        CHECK_FALSE(reused.has_value());
        CHECK(balance(db, "bob") == 5);

        int ran = 0;
        auto unit = [&](idem::unit_of_work& uow) {
            ++ran;
            move(uow, 1);
        };
        idem::execution<void> v1 = db.once(key_of("void"), "fp", unit);
        idem::execution<void> v2 = db.once(key_of("void"), "fp", unit);
        CHECK(v1.status() == execution_status::executed);
        CHECK(v2.status() == execution_status::replayed);
        CHECK(v2.has_value());
        CHECK(ran == 1);

        auto count = [&](idem::unit_of_work& uow) {
            long long n = 0;
            uow.sql() << "SELECT COUNT(*) FROM accounts", soci::into(n);
            return n + 40;
        };
        CHECK(db.once(key_of("int"), "fp", count).value() == 42);
        auto again = db.once(key_of("int"), "fp", [](idem::unit_of_work&) { return 0LL; });
        CHECK(again.status() == execution_status::replayed);
        CHECK(again.value() == 42);
        CHECK(balance(db, "bob") == 6);
    });
}

TEST_CASE("transact: commits, rolls back on a throw, and a nested call joins behind a savepoint") {
    on_every_bank([&](idem::database& db) {
        CHECK_THROWS_AS(db.transact([](idem::unit_of_work& uow) {
            move(uow, 100);
            throw std::runtime_error("no");
        }),
                        std::runtime_error);
        CHECK(balance(db, "bob") == 0);

        const long long seen = db.transact([&](idem::unit_of_work& uow) {
            move(uow, 100);
            CHECK_THROWS(db.transact([](idem::unit_of_work& inner) {
                move(inner, 1);
                throw std::runtime_error("inner fails alone");
            }));
            uow.savepoint([&] { move(uow, 3); });
            // A read inside the unit of work sees its own writes: it joined the transaction.
            return balance(db, "bob");
        });
        CHECK(seen == 103);
        CHECK(balance(db, "bob") == 103);
    });
}

TEST_CASE("a constraint violation is a typed store_error, known rolled back, and not run again") {
    on_every_bank([&](idem::database& db) {
        int runs = 0;
        try {
            db.transact([&](idem::unit_of_work& uow) {
                ++runs;
                move(uow, 1);
                uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('alice', 1)";
            });
            FAIL("the duplicate account was accepted");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::constraint);
            CHECK(e.rolled_back());
            CHECK_FALSE(e.is_transient());
            // SOCI's text quotes the statement and its values: it never reaches what().
            CHECK(std::string(e.what()).find("INSERT") == std::string::npos);
        }
        CHECK(runs == 1);
        CHECK(balance(db, "bob") == 0);
    });
}

TEST_CASE("pool exhaustion waits, then gives a typed timeout") {
    on_every_bank({.pool_size = 1, .acquire_timeout = 200ms}, [&](idem::database& db) {
        std::promise<void> holding, release;
        auto holder = std::async(std::launch::async, [&] {
            db.read([&](soci::session&) {
                holding.set_value();
                release.get_future().wait();
            });
        });
        holding.get_future().wait();
        const auto started = std::chrono::steady_clock::now();
        try {
            (void)balance(db, "alice");
            FAIL("a session was lent twice");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::timeout);
        }
        CHECK(std::chrono::steady_clock::now() - started >= 200ms);
        release.set_value();
        holder.get();
        CHECK(balance(db, "alice") == 1000000);  // a freed session is lent again
    });
}

TEST_CASE("SQLite: a unit of work that finds the database locked is run again and succeeds") {
    sqlite_place where;
    idem::database db = open_bank(where, {.attempts = 1, .backoff = 100ms, .sqlite = {.busy_timeout = 50ms}});
    soci::session locker;
    idem::open_sqlite_session(locker, where.url().substr(7));
    auto hold_lock = [&](std::chrono::milliseconds for_how_long) {
        locker << "BEGIN IMMEDIATE";
        return std::async(std::launch::async, [&, for_how_long] {
            std::this_thread::sleep_for(for_how_long);
            locker << "COMMIT";
        });
    };
    {
        auto held = hold_lock(300ms);
        try {
            db.transact([](idem::unit_of_work& uow) { move(uow, 1); });
            FAIL("the locked database was written");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::timeout);  // SQLITE_BUSY, one attempt only
            CHECK(e.rolled_back());
        }
        held.get();
    }
    idem::database patient =
        idem::database::open(where.url(), {.attempts = 8, .backoff = 40ms, .sqlite = {.busy_timeout = 50ms}});
    auto held = hold_lock(300ms);
    auto e = patient.once(key_of("busy"), "fp", [](idem::unit_of_work& uow) {
        move(uow, 2);
        return std::string("moved 2");
    });
    held.get();
    CHECK(e.status() == execution_status::executed);
    CHECK(balance(patient, "bob") == 2);
}

TEST_CASE(
    "SQLite: a process's writers wait for the file in line, waiters served in arrival order, within the busy timeout") {
    sqlite_place where;
    idem::database db = open_bank(where, {.pool_size = 8, .attempts = 1});
    idem::database impatient = idem::database::open(where.url(), {.attempts = 1, .sqlite = {.busy_timeout = 100ms}});
    std::promise<void> holding, release;
    auto holder = std::async(std::launch::async, [&] {
        db.transact([&](idem::unit_of_work& uow) {
            move(uow, 1);
            holding.set_value();
            release.get_future().wait();
        });
    });
    holding.get_future().wait();
    // Six writers arrive one after another while the lock is held; each is in
    // line before the next starts. Polling the lock would let them in in any order.
    std::mutex order_mutex;
    std::vector<int> order;
    std::vector<std::future<void>> writers;
    for (int i = 0; i < 6; ++i) {
        writers.push_back(std::async(std::launch::async, [&, i] {
            db.transact([&](idem::unit_of_work& uow) {
                move(uow, 1);
                const std::lock_guard lock(order_mutex);
                order.push_back(i);
            });
        }));
        std::this_thread::sleep_for(150ms);
    }
    // A writer with a short busy timeout gives up in line while the lock is still held.
    std::atomic<bool> released{false};
    try {
        impatient.transact([](idem::unit_of_work& uow) { move(uow, 1000); });
        FAIL("a writer passed the one holding the lock");
    } catch (const idem::store_error& e) {
        CHECK(e.failure() == idem::store_failure::timeout);
        CHECK(e.is_transient());
        CHECK(e.rolled_back());
        CHECK_FALSE(released.load());
    }
    // On the holder's own thread a second connection to the file cannot wait for
    // itself: it waits out its busy timeout for SQLite's lock and fails, as before.
    std::promise<void> nested_done;
    auto nested = std::async(std::launch::async, [&] {
        db.transact([&](idem::unit_of_work& uow) {
            move(uow, 1);
            CHECK_THROWS_AS(impatient.transact([](idem::unit_of_work& inner) { move(inner, 1000); }),
                            idem::store_error);
        });
    });
    released = true;
    release.set_value();
    holder.get();
    for (auto& w : writers) w.get();
    nested.get();
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});
    CHECK(balance(db, "bob") == 8);
}

TEST_CASE("options and URLs are checked before anything opens") {
    sqlite_place where;
    CHECK_THROWS_AS(idem::database::open(where.url(), {.pool_size = 0}), idem::options_error);
    CHECK_THROWS_AS(idem::database::open(where.url(), {.attempts = 0}), idem::options_error);
    CHECK_THROWS_AS(idem::database::open(where.url(), {.acquire_timeout = 0ms}), idem::options_error);
    CHECK_THROWS_AS(idem::database::open("xyz://db/bank"), std::invalid_argument);
    CHECK_THROWS_AS(idem::database::open("bank.txt"), std::invalid_argument);
}

TEST_CASE("the store registry opens what a URL names, as each store library registered it") {
    idem::test::temp_dir dir("registry");
    const std::string path = (dir.path() / "ledger.db").string();
    const auto url = idem::database_url::parse("sqlite:" + path);
    // An operator's look at a file that is not there creates nothing.
    for (const auto access : {idem::store_access::existing, idem::store_access::read_only}) {
        try {
            (void)idem::open_store(url, {.access = access});
            FAIL("opened a database that does not exist");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::schema);
        }
        CHECK_FALSE(std::filesystem::exists(path));
    }
    idem::opened_store created = idem::open_store(url, {.pool_size = 1});
    REQUIRE(created.store);
    REQUIRE(created.admin == dynamic_cast<idem::store_admin*>(created.store.get()));
    CHECK_FALSE(created.admin->migrate().empty());
    soci::session business;
    created.open_session(business);  // configured as the store wants: WAL, busy timeout
    std::string journal;
    business << "PRAGMA journal_mode", soci::into(journal);
    CHECK(journal == "wal");
    // Read-only: it reads, and refuses to write.
    idem::opened_store look = idem::open_store(url, {.access = idem::store_access::read_only});
    CHECK(look.admin->count_expired(std::chrono::hours(0)) == 0);
    CHECK_THROWS_AS((void)look.store->try_reserve(key_of("read-only"), "fp", std::chrono::minutes(1)),
                    idem::store_error);
}

namespace {

bool contains(std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
}

// The message database_url::parse refuses `text` with.
std::string refusal(std::string_view text) {
    try {
        (void)idem::database_url::parse(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    FAIL("accepted a name it should refuse");
    return {};
}

}  // namespace

TEST_CASE("database_url::parse reads the forms the linked stores registered") {
    const auto sqlite = [](std::string_view text) {
        const auto url = idem::database_url::parse(text);
        CHECK(url.scheme == "sqlite");
        return url.location;
    };
    CHECK(sqlite("sqlite:bank.db") == "bank.db");
    CHECK(sqlite("sqlite:relative/file") == "relative/file");
    CHECK(sqlite("sqlite:///var/lib/app.db") == "/var/lib/app.db");
    CHECK(sqlite("/var/lib/ledger.db") == "/var/lib/ledger.db");
    CHECK(sqlite("ledger.sqlite") == "ledger.sqlite");
    CHECK(sqlite("ledger.sqlite3") == "ledger.sqlite3");
    CHECK(contains(refusal("sqlite:"), "URL sqlite: needs a path"));
    CHECK(contains(refusal("sqlite://relative.db"), "needs an absolute path (sqlite:///PATH)"));
    CHECK(contains(refusal("sqlite::memory:"), "cannot be :memory:"));
    CHECK(contains(refusal("records.txt"), "none of the accepted forms"));
    const std::string unknown = refusal("xyz://root:secret@db/app");
    CHECK(contains(unknown, "unknown scheme (xyz)"));
    CHECK_FALSE(contains(unknown, "secret"));
    // Every refusal names the forms of the stores linked.
    CHECK(contains(unknown, "; use "));
    CHECK(contains(unknown, idem::database_url_forms()));
    CHECK(contains(idem::database_url_forms(), "sqlite:PATH (or sqlite:///ABSOLUTE/PATH)"));
    CHECK(idem::registered_store("sqlite")->display_name == "SQLite");
    CHECK(idem::registered_store("sqlite")->location_is_path);

    if (!idem::registered_store("postgresql")) return;  // a build without the PostgreSQL store
    const auto postgresql = [](std::string_view text) {
        const auto url = idem::database_url::parse(text);
        CHECK(url.scheme == "postgresql");
        return url.location;
    };
    // The location is what libpq takes: the text whole.
    CHECK(postgresql("postgresql://app@db/bank") == "postgresql://app@db/bank");
    CHECK(postgresql("postgres://app@db/bank.db") == "postgres://app@db/bank.db");
    CHECK(postgresql("host=db dbname=bank user=app") == "host=db dbname=bank user=app");
    CHECK(postgresql("  dbname = bank") == "  dbname = bank");
    CHECK(contains(refusal("hostel=db"), "none of the accepted forms"));
    // A name both stores could answer is refused rather than guessed.
    const std::string both = refusal("dbname=secret.db");
    CHECK(contains(both, "a name of two stores"));
    CHECK_FALSE(contains(both, "secret"));
    CHECK(contains(idem::database_url_forms(), "postgresql://... or postgres://..."));
    CHECK(idem::registered_store("postgresql")->display_name == "PostgreSQL");
    CHECK_FALSE(idem::registered_store("postgresql")->location_is_path);
}

TEST_CASE("a store registered at run time opens through idem::database::open, with no line of the core") {
    // demo://NAME: a SQLite file NAME.db in a directory of the test's, as a store library would register it.
    idem::test::temp_dir dir("demo-store");
    const std::string root = dir.path().string();
    idem::register_store({.scheme = "demo",
                          .display_name = "Demo",
                          .prefixes = {"demo://"},
                          .location = [](std::string_view text) { return std::string(text.substr(7)); },
                          .description = "demo://NAME"},
                         [root](const idem::database_url& url, const idem::store_request& request) {
                             return idem::open_store(
                                 {.scheme = "sqlite", .location = root + "/" + url.location + ".db"}, request);
                         });
    CHECK(contains(idem::database_url_forms(), "demo://NAME"));
    idem::database db = idem::database::open("demo://books", {.pool_size = 2});
    CHECK(db.engine() == "demo");
    CHECK(idem::registered_store(db.engine())->display_name == "Demo");
    CHECK_FALSE(db.migrate().empty());
    const auto work = [](idem::unit_of_work&) { return std::string("done"); };
    CHECK(db.once(key_of("demo"), "fp", work).status() == execution_status::executed);
    CHECK(db.once(key_of("demo"), "fp", work).status() == execution_status::replayed);
    CHECK(std::filesystem::exists(dir.path() / "books.db"));
}

#ifdef IDEM_TEST_POSTGRESQL

TEST_CASE("PostgreSQL: a deadlock between two units of work is run again, and both commit") {
    postgresql_place where;
    idem::database db = open_bank(where, {.pool_size = 4, .attempts = 3});
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('carol', 0)"; });
    std::atomic<int> runs{0};
    std::barrier both_locked(2);
    auto cross = [&](std::string first, std::string second) {
        return std::async(std::launch::async, [&, first, second] {
            db.transact([&](idem::unit_of_work& uow) {
                const bool first_run = runs.fetch_add(1) < 2;
                uow.sql() << "UPDATE accounts SET balance = balance + 1 WHERE id = :id", soci::use(first);
                if (first_run) both_locked.arrive_and_wait();  // each holds one row the other wants
                uow.sql() << "UPDATE accounts SET balance = balance + 1 WHERE id = :id", soci::use(second);
            });
        });
    };
    auto a = cross("bob", "carol");
    auto b = cross("carol", "bob");
    a.get();
    b.get();
    CHECK(runs.load() == 3);  // the deadlock victim ran again
    CHECK(balance(db, "bob") == 2);
    CHECK(balance(db, "carol") == 2);
}

TEST_CASE("PostgreSQL: a unit of work waiting for a row lock gives up after the store's lock_timeout") {
    postgresql_place where;
    idem::database db = open_bank(where, {.attempts = 1});
    soci::session holder;
    idem::open_postgresql_session(holder, where.url());
    holder << "BEGIN";
    holder << "UPDATE accounts SET balance = balance WHERE id = 'alice'";  // holds alice's row
    const auto began = std::chrono::steady_clock::now();
    auto waiting = std::async(std::launch::async, [&] { db.transact([](idem::unit_of_work& uow) { move(uow, 1); }); });
    const bool ended = waiting.wait_for(15s) == std::future_status::ready;  // without a lock_timeout: never
    const auto waited = std::chrono::steady_clock::now() - began;
    holder << "ROLLBACK";
    REQUIRE(ended);
    const auto bound = idem::postgresql_store_options{}.lock_timeout;
    CHECK(waited >= bound);
    CHECK(waited < bound + 5s);
    try {
        waiting.get();
        FAIL("the unit of work committed while the row was locked");
    } catch (const idem::store_error& e) {
        CHECK(e.failure() == idem::store_failure::timeout);
        CHECK(e.rolled_back());
    }
    CHECK(balance(db, "bob") == 0);
}

TEST_CASE("PostgreSQL: a COMMIT whose answer is lost is reported in doubt, never run again") {
    postgresql_place where;
    idem::database db = open_bank(where);
    // COMMIT runs this deferred trigger: it tells its backend's pid, then waits, so another
    // session can end that backend while the client waits for COMMIT's answer.
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE commit_gate (pid INT)";
        uow.sql() << "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "PERFORM pg_sleep(30); RETURN NULL; END $$";
        uow.sql() << "CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON accounts DEFERRABLE INITIALLY DEFERRED "
                     "FOR EACH ROW EXECUTE FUNCTION slow_commit()";
    });
    int pid = 0;
    std::atomic<int> runs{0};
    auto victim = std::async(std::launch::async, [&] {
        return db.once(key_of("doubt"), "fp", [&](idem::unit_of_work& uow) {
            ++runs;
            uow.sql() << "SELECT pg_backend_pid()", soci::into(pid);
            move(uow, 9);
            return std::string("moved 9");
        });
    });
    soci::session admin;
    idem::open_postgresql_session(admin, where.url());
    // Wait until the victim's backend is inside the COMMIT's trigger, then end it.
    for (int i = 0; i < 500; ++i) {
        int sleeping = 0;
        admin << "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()",
            soci::into(sleeping);
        if (sleeping == 1) break;
        std::this_thread::sleep_for(20ms);
    }
    admin << "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
             "AND datname = current_database()";
    CHECK_THROWS_AS(victim.get(), idem::transaction_in_doubt);
    CHECK(runs == 1);
    CHECK(pid != 0);
    // The database is usable again at once: the pool opened a new session.
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "DROP TRIGGER slow_commit ON accounts"; });
    CHECK(balance(db, "bob") == 0);  // here the server rolled it back; a caller checks, never assumes
}

TEST_CASE("PostgreSQL: the pool reconnects after a server restart") {
    idem::test::postgres_server server;
    const std::string url = server.conninfo();
    idem::database db = idem::database::open(url, {.pool_size = 4, .attempts = 3});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('alice', 100), ('bob', 0)";
    });
    // Every pooled session is open before the restart.
    std::vector<std::future<void>> busy;
    std::barrier all_in(4);
    for (int i = 0; i < 4; ++i)
        busy.push_back(
            std::async(std::launch::async, [&] { db.read([&](soci::session&) { all_in.arrive_and_wait(); }); }));
    for (auto& f : busy) f.get();
    server.restart();
    auto e = db.once(key_of("after-restart"), "fp", [](idem::unit_of_work& uow) {
        move(uow, 10);
        return std::string("moved");
    });
    CHECK(e.status() == execution_status::executed);
    for (int i = 0; i < 8; ++i) CHECK(balance(db, "bob") == 10);  // every session works again
}

#endif
