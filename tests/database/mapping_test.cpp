// Mapped objects in a unit of work (idem/mapping.hpp) on real SQLite files and
// a throwaway PostgreSQL: the identity map, change tracking, flush and its
// order, savepoints, session hooks, stale writes, db.once returning a mapped
// row, SOCI's use/into through the same mapping, and the typed errors of rows
// that do not fit.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "idem/database.hpp"
#include "mapped_bank.hpp"

namespace bank {

// Every kind of member a mapping takes, nullable too (table made by create_table).
struct profile {
    long long id = 0;
    std::string name;
    std::optional<std::string> note;
    int visits = 0;
    short level = 0;
    bool active = false;
    double score = 0;
    std::optional<long long> referrer;
};

// A label that may not be NULL, in a table where it can be.
struct labelled {
    std::string id;
    std::string label;
};

// The accounts table through a member too small for its balances.
struct small_account {
    std::string id;
    short balance = 0;
};

// A mapping naming a column the table does not have.
struct misspelt_account {
    std::string id;
    long long balance = 0;
};

struct missing_table_row {
    std::string id;
};

}  // namespace bank

template <>
struct idem::mapping<bank::profile> {
    static constexpr auto table = "profiles";
    static constexpr auto columns =
        idem::columns(idem::key("id", &bank::profile::id), idem::column("name", &bank::profile::name),
                      idem::column("note", &bank::profile::note), idem::column("visits", &bank::profile::visits),
                      idem::column("level", &bank::profile::level), idem::column("active", &bank::profile::active),
                      idem::column("score", &bank::profile::score), idem::column("referrer", &bank::profile::referrer));
};

template <>
struct idem::mapping<bank::labelled> {
    static constexpr auto table = "labels";
    static constexpr auto columns =
        idem::columns(idem::key("id", &bank::labelled::id), idem::column("label", &bank::labelled::label));
};

template <>
struct idem::mapping<bank::small_account> {
    static constexpr auto table = "accounts";
    static constexpr auto columns = idem::columns(idem::key("id", &bank::small_account::id),
                                                  idem::column("balance", &bank::small_account::balance));
};

template <>
struct idem::mapping<bank::misspelt_account> {
    static constexpr auto table = "accounts";
    static constexpr auto columns = idem::columns(idem::key("id", &bank::misspelt_account::id),
                                                  idem::column("balanse", &bank::misspelt_account::balance));
};

template <>
struct idem::mapping<bank::missing_table_row> {
    static constexpr auto table = "no_such_table";
    static constexpr auto columns = idem::columns(idem::key("id", &bank::missing_table_row::id));
};

namespace {

using namespace idem::test;
using idem::execution_status;

idem::database open_mapped_bank(const place& where, idem::database_options options = {}) {
    idem::database db = open_bank(where, std::move(options));
    db.create_table<bank::versioned_account>();
    db.transact([](idem::unit_of_work& uow) {
        uow.add(bank::versioned_account{"v1", 100, 0});
        uow.add(bank::versioned_account{"v2", 100, 0});
    });
    return db;
}

long long transfers(idem::database& db) {
    return count_rows(db, "SELECT COUNT(*) FROM transfers");
}

}  // namespace

TEST_CASE("mapping: one object per key in a unit of work, loaded once; an unchanged one is not written") {
    on_every_bank([&](idem::database& db) {
        db.transact([](idem::unit_of_work& uow) {
            bank::account& alice = uow.get<bank::account>("alice");
            CHECK(alice.balance == 1000000);
            // Behind the session's back: a second get is the same object, not a second read.
            uow.sql() << "UPDATE accounts SET balance = 5 WHERE id = 'alice'";
            bank::account& again = uow.get<bank::account>("alice");
            CHECK(&again == &alice);
            CHECK(again.balance == 1000000);
            CHECK(uow.find<bank::account>("alice") == &alice);
            CHECK(uow.find<bank::account>("carol") == nullptr);
            CHECK_THROWS_AS((void)uow.get<bank::account>("carol"), idem::not_found);
        });
        CHECK(balance(db, "alice") == 5);  // nothing changed in memory, so nothing was written over it
    });
}

TEST_CASE("mapping: a change is written before COMMIT, only the columns that changed") {
    on_every_bank([&](idem::database& db) {
        db.transact([](idem::unit_of_work& uow) {
            uow.sql()
                << "INSERT INTO transfers (id, from_account, to_account, amount) VALUES ('t1', 'alice', 'bob', 5)";
        });
        db.transact([](idem::unit_of_work& uow) {
            bank::transfer& t = uow.get<bank::transfer>("t1");
            t.amount = 7;
            // Another column changed in the database meanwhile: the flush writes amount alone.
            uow.sql() << "UPDATE transfers SET to_account = 'carol' WHERE id = 't1'";
        });
        const bank::transfer after = db.transact([](idem::unit_of_work& uow) { return uow.get<bank::transfer>("t1"); });
        CHECK(after.amount == 7);
        CHECK(after.to == "carol");
        CHECK(after.from == "alice");
    });
}

TEST_CASE("mapping: add inserts at flush and remove deletes; flush on demand; a key tracked twice is refused") {
    on_every_bank([&](idem::database& db) {
        const auto rows_here = [](idem::unit_of_work& uow) {
            long long n = -1;
            uow.sql() << "SELECT COUNT(*) FROM transfers", soci::into(n);
            return n;
        };
        db.transact([&](idem::unit_of_work& uow) {
            bank::transfer& t = uow.add(bank::transfer{"t1", "alice", "bob", 5});
            CHECK(uow.find<bank::transfer>("t1") == &t);  // tracked before it is written
            CHECK(rows_here(uow) == 0);
            uow.flush();
            CHECK(rows_here(uow) == 1);
            CHECK_THROWS_AS(uow.add(bank::transfer{"t1", "alice", "bob", 6}), std::invalid_argument);
            t.amount = 6;  // written at COMMIT, as an UPDATE
            uow.add(bank::transfer{"t2", "alice", "bob", 1});
        });
        CHECK(transfers(db) == 2);
        CHECK(count_rows(db, "SELECT amount FROM transfers WHERE id = 't1'") == 6);
        db.transact([&](idem::unit_of_work& uow) {
            uow.remove(uow.get<bank::transfer>("t1"));
            CHECK(uow.find<bank::transfer>("t1") == nullptr);  // removed in this unit of work
            const bank::transfer stranger{"t2", "alice", "bob", 1};
            CHECK_THROWS_AS(uow.remove(stranger), std::invalid_argument);  // not the tracked object
            bank::transfer& fresh = uow.add(bank::transfer{"t3", "alice", "bob", 2});
            uow.remove(fresh);  // never written: just forgotten
        });
        CHECK(transfers(db) == 1);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM transfers WHERE id = 't2'") == 1);
    });
}

TEST_CASE("mapping: select flushes, then answers with the tracked objects") {
    on_every_bank([&](idem::database& db) {
        db.transact([](idem::unit_of_work& uow) {
            bank::account& alice = uow.get<bank::account>("alice");
            alice.balance = 7;  // flushed before the query runs, so it selects alice
            const auto poor = uow.select<bank::account>("balance < :limit ORDER BY id", 100);
            REQUIRE(poor.size() == 2);
            CHECK(&poor[0].get() == &alice);
            CHECK(poor[1].get().id == "bob");
            CHECK(&uow.get<bank::account>("bob") == &poor[1].get());
            CHECK(uow.select<bank::account>("id = :id", std::string("nobody")).empty());
            CHECK(uow.select<bank::account>("").size() == 2);
        });
        CHECK(balance(db, "alice") == 7);
    });
}

TEST_CASE("mapping: create_table takes every member kind; NULL, bool and double read back as written") {
    on_every_bank([&](idem::database& db) {
        db.create_table<bank::profile>();
        db.create_table<bank::profile>();  // IF NOT EXISTS
        const bank::profile full{1, "ada", "first", 3, 2, true, 0.1 + 0.2, 7};
        const bank::profile sparse{2, "bob", std::nullopt, 0, 0, false, -1.5, std::nullopt};
        db.transact([&](idem::unit_of_work& uow) {
            uow.add(full);
            uow.add(sparse);
        });
        CHECK(count_rows(db, "SELECT COUNT(*) FROM profiles WHERE note IS NULL AND referrer IS NULL") == 1);
        db.transact([&](idem::unit_of_work& uow) {
            const bank::profile& a = uow.get<bank::profile>(1);
            CHECK(a.name == "ada");
            CHECK(a.note == std::optional<std::string>("first"));
            CHECK(a.visits == 3);
            CHECK(a.level == 2);
            CHECK(a.active);
            CHECK(a.score == 0.1 + 0.2);  // bit for bit
            CHECK(a.referrer == std::optional<long long>(7));
            const bank::profile& b = uow.get<bank::profile>(2);
            CHECK_FALSE(b.note.has_value());
            CHECK_FALSE(b.referrer.has_value());
            CHECK_FALSE(b.active);
            CHECK(b.score == -1.5);
        });
    });
}

TEST_CASE("mapping: SOCI's use and into work for a mapped type, by column name") {
    on_every_bank([&](idem::database& db) {
        const bank::transfer t{"t-soci", "alice", "bob", 42};
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "INSERT INTO transfers (id, from_account, to_account, amount) "
                         "VALUES (:id, :from_account, :to_account, :amount)",
                soci::use(t);
        });
        bank::transfer back;
        db.read([&](soci::session& sql) { sql << "SELECT * FROM transfers WHERE id = 't-soci'", soci::into(back); });
        CHECK(back.id == "t-soci");
        CHECK(back.from == "alice");
        CHECK(back.to == "bob");
        CHECK(back.amount == 42);
    });
}

TEST_CASE("mapping: the work's rows are flushed before db.once writes its record") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        // Each insert into transfers or idem_records logs its table, in order.
        db.transact([&](idem::unit_of_work& uow) {
            if (where->postgresql()) {
                uow.sql() << "CREATE TABLE insert_log (n BIGSERIAL PRIMARY KEY, tbl TEXT NOT NULL)";
                uow.sql() << "CREATE FUNCTION log_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                             "INSERT INTO insert_log (tbl) VALUES (TG_TABLE_NAME); RETURN NEW; END $$";
                for (const char* table : {"transfers", "idem_records"})
                    uow.sql() << std::string("CREATE TRIGGER log_") + table + " AFTER INSERT ON " + table +
                                     " FOR EACH ROW EXECUTE FUNCTION log_insert()";
            } else if (where->mariadb()) {
                uow.sql() << "CREATE TABLE insert_log (n BIGINT AUTO_INCREMENT PRIMARY KEY, tbl TEXT NOT NULL)";
                for (const char* table : {"transfers", "idem_records"})
                    uow.sql() << std::string("CREATE TRIGGER log_") + table + " AFTER INSERT ON " + table +
                                     " FOR EACH ROW INSERT INTO insert_log (tbl) VALUES ('" + table + "')";
            } else {
                uow.sql() << "CREATE TABLE insert_log (n INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL)";
                for (const char* table : {"transfers", "idem_records"})
                    uow.sql() << std::string("CREATE TRIGGER log_") + table + " AFTER INSERT ON " + table +
                                     " BEGIN INSERT INTO insert_log (tbl) VALUES ('" + table + "'); END";
            }
        });
        auto e = db.once(key_of("ordered"), "fp", [](idem::unit_of_work& uow) {
            bank::account& alice = uow.get<bank::account>("alice");
            bank::account& bob = uow.get<bank::account>("bob");
            alice.balance -= 5;
            bob.balance += 5;
            return uow.add(bank::transfer{"t-ordered", "alice", "bob", 5});
        });
        REQUIRE(e.status() == execution_status::executed);
        const std::vector<std::string> order = db.read([](soci::session& sql) {
            std::vector<std::string> tables(10);
            sql << "SELECT tbl FROM insert_log ORDER BY n", soci::into(tables);
            return tables;
        });
        CHECK(order == std::vector<std::string>{"transfers", "idem_records"});
        CHECK(balance(db, "bob") == 5);
    }
}

TEST_CASE("mapping: db.once returns a mapped row; the record keeps its key and a replay reads the row back") {
    on_every_bank([&](idem::database& db) {
        int runs = 0;
        auto work = [&](idem::unit_of_work& uow) {
            ++runs;
            uow.get<bank::account>("alice").balance -= 250;
            uow.get<bank::account>("bob").balance += 250;
            return uow.add(bank::transfer{"t-1", "alice", "bob", 250});
        };
        auto first = db.once(key_of("t-1"), "fp", work);
        auto replay = db.once(key_of("t-1"), "fp", work);
        REQUIRE(replay.status() == execution_status::replayed);
        CHECK(runs == 1);
        CHECK(first.value().id == "t-1");
        CHECK(replay.value().from == "alice");
        CHECK(replay.value().to == "bob");
        CHECK(replay.value().amount == 250);
        CHECK(balance(db, "bob") == 250);
        auto state = db.admin().inspect(key_of("t-1").digest(), true);
        REQUIRE(state.has_value());
        CHECK(state->payload == std::optional<std::string>("t-1"));

        // An integer key is kept as its decimal text.
        db.create_table<bank::profile>();
        auto p = db.once(key_of("p-1"), "fp", [](idem::unit_of_work& uow) {
            bank::profile big;
            big.id = 9007199254740993;
            big.name = "big";
            return uow.add(big);
        });
        CHECK(db.once(key_of("p-1"), "fp", [](idem::unit_of_work&) { return bank::profile{}; }).value().name == "big");
        CHECK(p.value().id == 9007199254740993);

        // The row is gone: a replay cannot make one up.
        db.transact([](idem::unit_of_work& uow) { uow.sql() << "DELETE FROM transfers"; });
        CHECK_THROWS_AS(db.once(key_of("t-1"), "fp", work), idem::store_error);
        CHECK(runs == 1);
    });
}

TEST_CASE("mapping: a rolled-back savepoint puts tracked objects back and forgets what it added") {
    on_every_bank([&](idem::database& db) {
        db.transact([](idem::unit_of_work& uow) {
            bank::account& alice = uow.get<bank::account>("alice");
            alice.balance -= 100;  // flushed as the savepoint opens: outside it
            CHECK_THROWS_AS(uow.savepoint([&] {
                alice.balance -= 50;
                uow.get<bank::account>("bob").balance += 50;
                uow.add(bank::transfer{"t-undone", "alice", "bob", 50});
                uow.flush();
                throw std::runtime_error("undo");
            }),
                            std::runtime_error);
            CHECK(alice.balance == 1000000 - 100);                   // as when the savepoint began
            CHECK(uow.find<bank::transfer>("t-undone") == nullptr);  // forgotten, and its row is gone
            CHECK(uow.get<bank::account>("bob").balance == 0);       // read again: the savepoint's bob was forgotten
            uow.savepoint([&] { alice.balance -= 1; });              // a released savepoint keeps its changes
        });
        CHECK(balance(db, "alice") == 1000000 - 101);
        CHECK(balance(db, "bob") == 0);
        CHECK(transfers(db) == 0);
    });
}

TEST_CASE("mapping: session hooks run before COMMIT, after a known commit, after a known rollback") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        idem::database other = idem::database::open(where->url());  // another session: sees only what committed
        std::vector<std::string> events;
        db.transact([&](idem::unit_of_work& uow) {
            bank::account& alice = uow.get<bank::account>("alice");
            uow.before_commit([&] {
                events.push_back("before_commit");
                alice.balance -= 1;  // flushed after the hooks, before COMMIT
            });
            uow.after_commit([&] { events.push_back("after_commit " + std::to_string(balance(other, "alice"))); });
            uow.after_rollback([&] { events.push_back("after_rollback"); });
            CHECK_THROWS_AS(uow.savepoint([&] {
                uow.after_commit([&] { events.push_back("from a rolled-back savepoint"); });
                throw std::runtime_error("undo");
            }),
                            std::runtime_error);
        });
        CHECK(events == std::vector<std::string>{"before_commit", "after_commit 999999"});

        events.clear();
        CHECK_THROWS_AS(db.transact([&](idem::unit_of_work& uow) {
            uow.get<bank::account>("alice").balance = 0;
            uow.before_commit([&] { events.push_back("before_commit"); });
            uow.after_commit([&] { events.push_back("after_commit"); });
            uow.after_rollback([&] { events.push_back("after_rollback"); });
            throw std::runtime_error("refused");
        }),
                        std::runtime_error);
        CHECK(events == std::vector<std::string>{"after_rollback"});
        CHECK(balance(db, "alice") == 999999);

        // A unit of work run again (a transient failure) is told of each run's end.
        events.clear();
        int runs = 0;
        db.transact([&](idem::unit_of_work& uow) {
            const int run = ++runs;
            uow.after_commit([&, run] { events.push_back("after_commit " + std::to_string(run)); });
            uow.after_rollback([&, run] { events.push_back("after_rollback " + std::to_string(run)); });
            if (run == 1) throw idem::store_error(idem::store_failure::conflict, "a conflict, as a deadlock is");
        });
        CHECK(events == std::vector<std::string>{"after_rollback 1", "after_commit 2"});

        // An after_commit hook that throws: the commit stands, and nothing runs again.
        runs = 0;
        CHECK_THROWS_AS(db.transact([&](idem::unit_of_work& uow) {
            ++runs;
            uow.get<bank::account>("bob").balance += 1;
            uow.after_commit([] { throw idem::store_error(idem::store_failure::conflict, "after the fact"); });
        }),
                        idem::store_error);
        CHECK(runs == 1);
        CHECK(balance(db, "bob") == 1);
    }
}

TEST_CASE("mapping: a version that moved on is a stale write; the unit of work runs again") {
    on_every_bank(open_mapped_bank, {}, [&](idem::database& db) {
        int runs = 0;
        try {
            db.transact([&](idem::unit_of_work& uow) {
                ++runs;
                bank::versioned_account& v = uow.get<bank::versioned_account>("v1");
                // Another writer, as far as the row's version tells.
                uow.sql() << "UPDATE versioned_accounts SET version = version + 1 WHERE id = 'v1'";
                v.balance += 1;
            });
            FAIL("a stale write was written");
        } catch (const idem::stale_write& e) {
            CHECK(e.failure() == idem::store_failure::conflict);
            CHECK(e.is_transient());
            CHECK(e.rolled_back());
            CHECK(e.type() == "bank::versioned_account");
        }
        CHECK(runs == 3);  // database_options::attempts
        const auto v1 = db.transact([](idem::unit_of_work& uow) { return uow.get<bank::versioned_account>("v1"); });
        CHECK(v1.balance == 100);
        CHECK(v1.version == 0);

        // A write that succeeds moves the version on, in the object too.
        db.transact([](idem::unit_of_work& uow) {
            bank::versioned_account& v = uow.get<bank::versioned_account>("v1");
            v.balance += 5;
            uow.flush();
            CHECK(v.version == 1);
            v.balance += 5;
        });
        const auto after = db.transact([](idem::unit_of_work& uow) { return uow.get<bank::versioned_account>("v1"); });
        CHECK(after.balance == 110);
        CHECK(after.version == 2);
    });
}

TEST_CASE("mapping: a kept statement that failed runs again on its connection, NULL where it binds NULL") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        // One pooled connection: every unit of work below runs the same kept statements.
        idem::database db = open_bank(*where, {.pool_size = 1});
        db.create_table<bank::profile>();
        db.transact([](idem::unit_of_work& uow) {
            uow.sql() << "CREATE UNIQUE INDEX profile_names ON profiles (name)";
            uow.add(bank::profile{1, "ada", "first", 0, 0, false, 0, std::nullopt});
            uow.add(bank::profile{2, "bob", std::nullopt, 0, 0, false, 0, std::nullopt});
        });
        const auto expect_refused = [&](auto&& work) {
            try {
                db.transact(work);
                FAIL("the database took a row it refuses");
            } catch (const idem::store_error& e) {
                CHECK(e.failure() == idem::store_failure::constraint);
            }
        };
        // Sets bob's name and note: the same UPDATE whatever the values, as both change.
        const auto rename_bob = [](idem::unit_of_work& uow, const std::string& name, std::optional<std::string> note) {
            uow.sql() << "UPDATE profiles SET note = 'before' WHERE id = 2";
            bank::profile& bob = uow.get<bank::profile>(2);
            bob.name = name;
            bob.note = std::move(note);
        };
        const auto profile = [&](long long id) {
            return db.transact([&](idem::unit_of_work& uow) { return uow.get<bank::profile>(id); });
        };
        long long prepared = -1;  // named statements on the connection after the first round
        for (int run = 0; run < 4; ++run) {
            CAPTURE(run);
            const std::string name = "run " + std::to_string(run);
            // The INSERT and the UPDATE refused by the unique key, each with a note.
            expect_refused([](idem::unit_of_work& uow) {
                uow.add(bank::profile{1, "again", "stale", 0, 0, false, 0, std::nullopt});
            });
            expect_refused([&](idem::unit_of_work& uow) { rename_bob(uow, "ada", "stale"); });
            // Both again, now with a NULL note: NULL is what they write.
            db.transact([&](idem::unit_of_work& uow) {
                uow.add(bank::profile{10 + run, name, std::nullopt, 0, 0, false, 0, std::nullopt});
                rename_bob(uow, name + " bob", std::nullopt);
            });
            const bank::profile added = profile(10 + run);
            CHECK(added.name == name);
            CHECK_FALSE(added.note.has_value());
            const bank::profile bob = profile(2);
            CHECK(bob.name == name + " bob");
            CHECK_FALSE(bob.note.has_value());
            if (where->postgresql()) {
                // A failure leaves no statement behind on the server connection.
                const long long now = count_rows(db, "SELECT COUNT(*) FROM pg_prepared_statements");
                if (run == 0) prepared = now;
                CHECK(now == prepared);
            }
        }
        CHECK(count_rows(db, "SELECT COUNT(*) FROM profiles") == 6);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM profiles WHERE note = 'stale'") == 0);
#ifdef IDEM_TEST_POSTGRESQL
        if (where->postgresql()) {
            // The load FOR UPDATE that failed (a lock it gave up on) runs again too.
            soci::session holder;
            idem::open_postgresql_session(holder, where->url());
            holder << "BEGIN";
            holder << "SELECT id FROM profiles WHERE id = 1 FOR UPDATE";
            for (int run = 0; run < 4; ++run) {
                CHECK_THROWS_AS(db.transact([](idem::unit_of_work& uow) {
                    uow.sql() << "SET LOCAL lock_timeout = '10ms'";
                    (void)uow.get<bank::profile>(1);
                }),
                                idem::store_error);
            }
            holder << "ROLLBACK";
            CHECK(profile(1).name == "ada");
            CHECK(count_rows(db, "SELECT COUNT(*) FROM pg_prepared_statements") == prepared);
        }
#endif
    }
}

#ifdef IDEM_TEST_POSTGRESQL
TEST_CASE("PostgreSQL: a concurrent commit between the read and the write reruns the unit on its result") {
    postgresql_place where;
    idem::database db = open_mapped_bank(where);
    int runs = 0;
    db.transact([&](idem::unit_of_work& uow) {
        bank::versioned_account& v = uow.get<bank::versioned_account>("v1");  // a plain read: no lock held
        if (++runs == 1) {
            std::thread([&] {
                db.transact([](idem::unit_of_work& other) { other.get<bank::versioned_account>("v1").balance += 10; });
            }).join();
        }
        v.balance -= 1;
    });
    CHECK(runs == 2);
    const auto v1 = db.transact([](idem::unit_of_work& uow) { return uow.get<bank::versioned_account>("v1"); });
    CHECK(v1.balance == 109);  // both writes, neither lost
    CHECK(v1.version == 2);
}
#endif

TEST_CASE("mapping: a row that does not fit is a typed error naming the column, and nothing is stored") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([](idem::unit_of_work& uow) {
            uow.sql() << "CREATE TABLE labels (id VARCHAR(64) PRIMARY KEY, label TEXT)";
            uow.sql() << "INSERT INTO labels (id, label) VALUES ('x', NULL)";
        });
        const auto expect_mapping_error = [&](auto&& work, const std::string& column) {
            try {
                db.transact([&](idem::unit_of_work& uow) {
                    uow.get<bank::account>("bob").balance = 77;  // would be written if the unit committed
                    work(uow);
                });
                FAIL("no mapping_error");
            } catch (const idem::mapping_error& e) {
                CHECK(e.column() == column);
                CHECK(std::string(e.what()).find(e.type()) != std::string::npos);
                CHECK_FALSE(e.is_transient());
                CHECK(e.rolled_back());
            }
            CHECK(balance(db, "bob") == 0);
        };
        // NULL where the member is no std::optional: an error, never a default value.
        expect_mapping_error([](idem::unit_of_work& uow) { (void)uow.get<bank::labelled>("x"); }, "label");
        expect_mapping_error(
            [](idem::unit_of_work& uow) {
                bank::labelled l;
                uow.sql() << "SELECT * FROM labels WHERE id = 'x'", soci::into(l);
            },
            "label");
        // A value past the member's range.
        expect_mapping_error([](idem::unit_of_work& uow) { (void)uow.get<bank::small_account>("alice"); }, "balance");
        // A column, or the table, the database does not have: at the first use.
        expect_mapping_error([](idem::unit_of_work& uow) { (void)uow.get<bank::misspelt_account>("alice"); },
                             "balanse");
        expect_mapping_error([](idem::unit_of_work& uow) { (void)uow.find<bank::missing_table_row>("a"); }, "");
        if (!where->server()) {
            // SQLite keeps whatever a column is given: text where the member is an integer.
            db.transact([](idem::unit_of_work& uow) {
                uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('eve', 'lots')";
            });
            expect_mapping_error([](idem::unit_of_work& uow) { (void)uow.get<bank::account>("eve"); }, "balance");
        }
    }
}
