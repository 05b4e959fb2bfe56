// The transaction runner's rules, on real SQLite files.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/error.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "sql/migrations.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"
#include "temp_dir.hpp"
#include "worker_processes.hpp"

namespace {

using namespace std::chrono_literals;
using idem::transaction_state;
using idem::unit_of_work;

struct database {
    idem::test::temp_dir dir{"runner"};
    std::string path = (dir.path() / "runner.db").string();
    soci::session session;
    idem::transaction_runner runner;

    database() : runner(open(session, path)) { session << "CREATE TABLE items (name TEXT PRIMARY KEY)"; }

    static soci::session& open(soci::session& s, const std::string& path) {
        idem::open_sqlite_session(s, path, {1s, idem::sqlite_synchronous::normal});
        return s;
    }

    // What another connection sees: only committed rows.
    [[nodiscard]] long long committed(const std::string& name = "%") const {
        soci::session other;
        open(other, path);
        long long n = 0;
        other << "SELECT count(*) FROM items WHERE name LIKE :n", soci::use(name), soci::into(n);
        return n;
    }
};

void insert(unit_of_work& tx, const std::string& name) {
    tx.sql() << "INSERT INTO items (name) VALUES (:n)", soci::use(name);
}

struct business_failure : std::runtime_error {
    business_failure() : std::runtime_error("business failure") {}
};

// What a worker process that calls exit() from the work (destroying its static
// runner mid-run) logs; `how` as sqlite_worker's exit-in-run takes it.
std::string log_of_exit_in_run(const database& db, const std::string& how) {
    auto worker = idem::test::start_worker({IDEM_SQLITE_WORKER, "exit-in-run", db.path, how});
    std::string line = idem::test::line_of(*worker);
    CHECK(idem::test::exit_code(*worker) == 0);  // reported, not thrown: the process ends normally
    return line;
}

}  // namespace

TEST_CASE("runner: the work's writes commit when it returns") {
    database db;
    CHECK_FALSE(db.runner.last_state().has_value());
    const int result = db.runner.run([&](unit_of_work& tx) {
        CHECK(tx.state() == transaction_state::active);
        CHECK(tx.internals().dialect().soci_backend() == "sqlite3");
        CHECK(db.runner.in_transaction());
        insert(tx, "a");
        CHECK(db.committed() == 0);  // not visible to others before the commit
        return 42;
    });
    CHECK(result == 42);
    CHECK_FALSE(db.runner.in_transaction());
    CHECK(db.runner.last_state() == transaction_state::committed);
    CHECK(db.committed() == 1);
}

TEST_CASE("runner: a throwing work is rolled back and its exception rethrown") {
    database db;
    CHECK_THROWS_AS(db.runner.run([&](unit_of_work& tx) {
        insert(tx, "a");
        throw business_failure();
    }),
                    business_failure);
    CHECK(db.runner.last_state() == transaction_state::rolled_back);
    CHECK(db.committed() == 0);
    // The session is usable again.
    db.runner.run([&](unit_of_work& tx) { insert(tx, "b"); });
    CHECK(db.committed() == 1);
}

TEST_CASE("runner: the should-commit predicate decides, and the result comes back either way") {
    database db;
    const auto ok = [](const std::optional<std::string>& r) { return r.has_value(); };
    auto failed = db.runner.run(
        [&](unit_of_work& tx) -> std::optional<std::string> {
            insert(tx, "rejected");
            return std::nullopt;  // a failed result: its writes must not land
        },
        ok);
    CHECK_FALSE(failed.has_value());
    CHECK(db.runner.last_state() == transaction_state::rolled_back);
    CHECK(db.committed() == 0);

    auto done = db.runner.run(
        [&](unit_of_work& tx) -> std::optional<std::string> {
            insert(tx, "accepted");
            return "receipt";
        },
        ok);
    CHECK(done == "receipt");
    CHECK(db.runner.last_state() == transaction_state::committed);
    CHECK(db.committed() == 1);

    db.runner.run([&](unit_of_work& tx) { insert(tx, "void"); }, [] { return false; });
    CHECK(db.committed("void") == 0);
}

TEST_CASE("runner: a nested run joins behind a savepoint; its failure undoes only its part") {
    database db;
    db.runner.run([&](unit_of_work& outer) {
        insert(outer, "outer-1");
        CHECK_THROWS_AS(db.runner.run([&](unit_of_work& inner) {
            CHECK(&inner == &outer);  // the same transaction
            insert(inner, "inner-failed");
            throw business_failure();
        }),
                        business_failure);
        CHECK(outer.state() == transaction_state::active);
        db.runner.run([&](unit_of_work& inner) { insert(inner, "inner-kept"); });
        db.runner.run([&](unit_of_work& inner) { insert(inner, "inner-declined"); }, [] { return false; });
        insert(outer, "outer-2");
    });
    CHECK(db.committed() == 3);
    CHECK(db.committed("inner-failed") == 0);
    CHECK(db.committed("inner-declined") == 0);
    CHECK(db.committed("inner-kept") == 1);
}

TEST_CASE("runner: savepoints nest, and a failure that escapes them rolls back everything") {
    database db;
    CHECK_THROWS_AS(db.runner.run([&](unit_of_work& tx) {
        insert(tx, "outer");
        tx.savepoint([&] {
            insert(tx, "level-1");
            CHECK_THROWS_AS(tx.savepoint([&] {
                insert(tx, "level-2");
                throw business_failure();
            }),
                            business_failure);
            const int kept = tx.savepoint([&] {
                insert(tx, "level-2-kept");
                return 7;
            });
            CHECK(kept == 7);
        });
        long long seen = 0;
        tx.sql() << "SELECT count(*) FROM items", soci::into(seen);
        CHECK(seen == 3);  // outer, level-1, level-2-kept
        throw business_failure();
    }),
                    business_failure);
    CHECK(db.committed() == 0);
}

TEST_CASE("runner: transaction states have names") {
    CHECK(idem::to_string(transaction_state::active) == "active");
    CHECK(idem::to_string(transaction_state::committed) == "committed");
    CHECK(idem::to_string(transaction_state::rolled_back) == "rolled back");
    CHECK(idem::to_string(transaction_state::in_doubt) == "in doubt");
}

TEST_CASE("runner: a rollback that fails leaves the transaction in doubt and reports the original error") {
    database db;
    // The work ends the transaction behind the runner's back, then fails: the
    // runner's ROLLBACK fails, and whether the writes landed is not its to know.
    try {
        db.runner.run([&](unit_of_work& tx) {
            insert(tx, "a");
            tx.sql() << "COMMIT";
            throw business_failure();
        });
        FAIL("run() returned");
    } catch (const idem::transaction_error& e) {
        CHECK(std::string(e.what()).find("in doubt") != std::string::npos);
        CHECK_THROWS_AS(std::rethrow_if_nested(e), business_failure);
    }
    CHECK(db.runner.last_state() == transaction_state::in_doubt);
    CHECK_FALSE(db.runner.in_transaction());
    db.runner.run([&](unit_of_work& tx) { insert(tx, "b"); });  // the runner recovers for the next transaction
    CHECK(db.runner.last_state() == transaction_state::committed);
}

TEST_CASE("runner: destroyed inside run(), it rolls the transaction back and tells its telemetry sink") {
    database db;
    const std::string line = log_of_exit_in_run(db, "rolls-back");
    CHECK(line.find("level=warning event=idem.transaction.abandoned") != std::string::npos);
    CHECK(line.find("rolled back") != std::string::npos);
    CHECK(db.committed() == 0);
}

TEST_CASE("runner: destroyed inside run() with a ROLLBACK that fails, it reports the transaction in doubt") {
    database db;
    // The work commits behind the runner's back before exit(): the destructor's ROLLBACK fails.
    const std::string line = log_of_exit_in_run(db, "rollback-fails");
    CHECK(line.find("level=error event=idem.transaction.rollback_failed") != std::string::npos);
    CHECK(line.find("in doubt") != std::string::npos);
    CHECK(line.find("ROLLBACK: SQL logic error (SQLite 1)") != std::string::npos);  // SQLite's own answer
    CHECK(db.committed() == 1);
}

TEST_CASE("runner: a savepoint that cannot be rolled back puts the transaction in doubt; it cannot commit") {
    database db;
    CHECK_THROWS_AS(db.runner.run([&](unit_of_work& tx) {
        insert(tx, "outer");
        try {
            tx.savepoint([&] {
                tx.sql() << "ROLLBACK";  // the database ended the whole transaction
                throw business_failure();
            });
        } catch (const idem::transaction_error& e) {
            CHECK_THROWS_AS(std::rethrow_if_nested(e), business_failure);
        }
        CHECK(tx.state() == transaction_state::in_doubt);
        CHECK_THROWS_AS(tx.savepoint([] {}), idem::transaction_error);
    }),
                    idem::transaction_error);  // returning normally does not commit a transaction in doubt
    CHECK(db.committed() == 0);
}

TEST_CASE("runner: a COMMIT that fails is rolled back and reported as a store_error") {
    database db;
    db.session << "PRAGMA foreign_keys = ON";
    db.session << "CREATE TABLE parents (id INTEGER PRIMARY KEY)";
    db.session << "CREATE TABLE children (parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)";
    try {
        db.runner.run([&](unit_of_work& tx) {
            insert(tx, "a");
            tx.sql() << "INSERT INTO children (parent) VALUES (99)";  // checked at COMMIT
        });
        FAIL("run() returned");
    } catch (const idem::store_error& e) {
        CHECK(e.native_code() == "787");  // SQLITE_CONSTRAINT_FOREIGNKEY
        CHECK(e.failure() == idem::store_failure::constraint);
    }
    CHECK(db.runner.last_state() == transaction_state::rolled_back);
    CHECK(db.committed() == 0);
}

TEST_CASE("runner: a writer that cannot get the lock in time gets a transient store_error") {
    database db;
    soci::session other;
    idem::open_sqlite_session(other, db.path, {100ms, idem::sqlite_synchronous::normal});
    idem::transaction_runner other_runner{other};
    db.runner.run([&](unit_of_work&) {
        const auto started = std::chrono::steady_clock::now();
        try {
            other_runner.run([](unit_of_work&) {});
            FAIL("BEGIN IMMEDIATE did not wait for the lock");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::timeout);
            CHECK(e.is_transient());
            CHECK(e.native_code() == "5");  // SQLITE_BUSY
        }
        CHECK(std::chrono::steady_clock::now() - started >= 90ms);
    });
    CHECK_FALSE(other_runner.last_state().has_value());  // it never began
}

TEST_CASE("runner: the connection cache keeps one slot per owner for the runner's life") {
    database db;
    std::shared_ptr<void>* first = nullptr;
    db.runner.run([&](unit_of_work& tx) {
        auto& internals = tx.internals();
        internals.connection_cache(1) = std::make_shared<int>(7);
        first = &internals.connection_cache(1);
        CHECK(internals.connection_cache(2) == nullptr);
    });
    db.runner.run([&](unit_of_work& tx) {
        CHECK(&tx.internals().connection_cache(1) == first);
        CHECK(*static_cast<int*>(tx.internals().connection_cache(1).get()) == 7);
    });
    CHECK(idem::detail::new_connection_cache_owner() != idem::detail::new_connection_cache_owner());
}

namespace {

// A dialect is one object: this one speaks SQLite through SOCI alone, with
// BEGIN EXCLUSIVE, and counts the connections runners open with it. Its SQL
// for idem's tables is the store's dialect's.
struct counting_dialect final : idem::detail::sql_dialect {
    explicit counting_dialect(const idem::detail::sql_dialect& store) : store_(store) {}
    mutable int connections = 0;
    [[nodiscard]] std::string_view soci_backend() const noexcept override { return "sqlite3"; }
    [[nodiscard]] std::string begin_sql(const idem::transaction_options&) const override { return "BEGIN EXCLUSIVE"; }
    [[nodiscard]] std::unique_ptr<idem::detail::sql_connection> connect(soci::session& session,
                                                                        std::string begin) const override {
        ++connections;
        return sql_dialect::connect(session, std::move(begin));
    }
    [[nodiscard]] const idem::detail::outbox_statements& outbox() const noexcept override { return store_.outbox(); }
    [[nodiscard]] const idem::detail::operations_statements& operations() const noexcept override {
        return store_.operations();
    }
    [[nodiscard]] const idem::detail::schema_statements& schema() const noexcept override { return store_.schema(); }
    [[nodiscard]] const idem::detail::mapping_statements& mapping() const noexcept override { return store_.mapping(); }

private:
    const idem::detail::sql_dialect& store_;
};

}  // namespace

TEST_CASE("runner: the dialect registered for a SOCI backend is the one runners speak") {
    database db;
    const idem::detail::sql_dialect& stores = idem::detail::dialect_of(db.session);  // the SQLite store's
    static const counting_dialect counting{stores};
    idem::detail::register_dialect(counting);
    try {
        soci::session session;
        database::open(session, db.path);
        idem::transaction_runner runner{session};
        CHECK(counting.connections == 1);
        runner.run([&](unit_of_work& tx) {
            CHECK(&tx.internals().dialect() == &counting);
            insert(tx, "exclusive");
        });
        CHECK(db.committed("exclusive") == 1);
    } catch (...) {
        idem::detail::register_dialect(stores);
        throw;
    }
    idem::detail::register_dialect(stores);  // the store's dialect again, for every later runner
    soci::session session;
    database::open(session, db.path);
    idem::transaction_runner runner{session};
    CHECK(counting.connections == 1);
    runner.run([&](unit_of_work& tx) { CHECK(&tx.internals().dialect() == &stores); });
}

TEST_CASE("runner: a session that is not connected is refused") {
    soci::session unconnected;
    CHECK_THROWS_AS(idem::transaction_runner{unconnected}, std::invalid_argument);
}

namespace {

// Migrations as a dialect whose DDL commits as it runs would apply them (each
// a step of its own, under a lock of the connection's), on SQLite: its own
// SQL, with the lock and unlock leaving a mark that shows when they ran.
struct stepwise {
    database db;
    idem::detail::schema_statements statements = idem::detail::dialect_of(db.session).schema();
    std::vector<std::string> scripts = {"CREATE TABLE IF NOT EXISTS a (x INTEGER)",
                                        "CREATE TABLE IF NOT EXISTS b (x INTEGER)",
                                        "CREATE TABLE IF NOT EXISTS c (x INTEGER)"};
    std::vector<std::string> names = {"0001_a", "0002_b", "0003_c"};
    int runs_of_b = 0;

    stepwise() {
        statements.transactional_ddl = false;
        statements.lock = "CREATE TABLE migration_lock (x INTEGER)";  // fails if held: never taken twice
        statements.unlock = "DROP TABLE migration_lock";
    }

    std::vector<std::string> migrate() {
        std::vector<idem::detail::embedded_migration> migrations;
        for (std::size_t i = 0; i < scripts.size(); ++i)
            migrations.push_back({static_cast<int>(i + 1), names[i], scripts[i]});
        return idem::detail::apply_migrations(
            db.runner, migrations,
            [&](unit_of_work& tx, std::string_view sql) {
                if (sql.find(" b ") != std::string_view::npos) ++runs_of_b;
                tx.sql() << std::string(sql);
            },
            &statements);
    }

    [[nodiscard]] std::vector<int> recorded() {
        std::vector<int> versions;
        int v = 0;
        soci::statement st =
            (db.session.prepare << "SELECT version FROM idem_schema_versions ORDER BY version", soci::into(v));
        st.execute();
        while (st.fetch()) versions.push_back(v);
        return versions;
    }
    [[nodiscard]] bool locked() {
        long long n = 0;
        db.session << "SELECT count(*) FROM sqlite_master WHERE name = 'migration_lock'", soci::into(n);
        return n > 0;
    }
};

}  // namespace

TEST_CASE("migrations where DDL commits as it runs: each recorded as it ends, a failed one runs again whole") {
    stepwise s;
    s.scripts[1] = "CREATE TABLE IF NOT EXISTS b (x INTEGER) STRICT WITHOUT";  // a typo: the step fails
    CHECK_THROWS(s.migrate());
    CHECK(s.recorded() == std::vector<int>{1});  // the step before it stays, recorded
    CHECK_FALSE(s.locked());                     // given back after the failure

    s.scripts[1] = "CREATE TABLE IF NOT EXISTS b (x INTEGER)";
    CHECK(s.migrate() == std::vector<std::string>{"0002_b", "0003_c"});  // resumed where it failed
    CHECK(s.recorded() == std::vector<int>{1, 2, 3});
    CHECK(s.runs_of_b == 2);
    CHECK_FALSE(s.locked());

    CHECK(s.migrate().empty());  // current: no step runs again
    CHECK(s.runs_of_b == 2);

    // A newer database than the library: refused before any step.
    s.scripts.pop_back();
    s.names.pop_back();
    CHECK_THROWS_AS(s.migrate(), idem::store_error);
    CHECK_FALSE(s.locked());
}
