// A bank of its own for each test of idem::database: a SQLite file in a temp
// folder, or a scratch database on the shared throwaway PostgreSQL (built with
// IDEM_TEST_POSTGRESQL) or MariaDB (IDEM_TEST_MARIADB, where a test file runs
// there), each with accounts alice (1,000,000) and bob (0).
#pragma once

#include <doctest/doctest.h>

#include <soci/soci.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "idem/database.hpp"
#include "temp_dir.hpp"
#ifdef IDEM_TEST_POSTGRESQL
#include "idem/postgresql_store.hpp"
#include "postgres_server.hpp"
#endif
#ifdef IDEM_TEST_MARIADB
#include "mariadb_server.hpp"
#endif

namespace idem::test {

// A database of its own for one test: a SQLite file in a temp folder, or a scratch PostgreSQL database.
class place {
public:
    virtual ~place() = default;
    [[nodiscard]] virtual std::string url() const = 0;
    [[nodiscard]] virtual bool postgresql() const = 0;
    [[nodiscard]] virtual bool mariadb() const { return false; }
    // A server's database: writers run at once, each holding the rows it locks.
    [[nodiscard]] bool server() const { return postgresql() || mariadb(); }
};

class sqlite_place final : public place {
public:
    [[nodiscard]] std::string url() const override { return "sqlite:" + (dir_.path() / "bank.db").string(); }
    [[nodiscard]] bool postgresql() const override { return false; }

private:
    temp_dir dir_{"database"};
};

// A database the test names itself (a PostgreSQL server of its own, say).
class connection_place final : public place {
public:
    explicit connection_place(std::string url) : url_(std::move(url)) {}
    [[nodiscard]] std::string url() const override { return url_; }
    [[nodiscard]] bool postgresql() const override { return !url_.starts_with("sqlite:"); }

private:
    std::string url_;
};

#ifdef IDEM_TEST_POSTGRESQL
class postgresql_place final : public place {
public:
    [[nodiscard]] std::string url() const override { return scratch_.conninfo(); }
    [[nodiscard]] bool postgresql() const override { return true; }

private:
    scratch_database scratch_{shared_postgres(), "database"};
};
#endif

#ifdef IDEM_TEST_MARIADB
class mariadb_place final : public place {
public:
    [[nodiscard]] std::string url() const override { return scratch_.connection(); }
    [[nodiscard]] bool postgresql() const override { return false; }
    [[nodiscard]] bool mariadb() const override { return true; }

private:
    mariadb_scratch_database scratch_{shared_mariadb(), "database"};
};
#endif

// How to make each place this build tests, in order: SQLite, then PostgreSQL
// and MariaDB where the test is built for them.
using place_factory = std::unique_ptr<place> (*)();
inline std::vector<place_factory> place_factories() {
    std::vector<place_factory> all{[]() -> std::unique_ptr<place> { return std::make_unique<sqlite_place>(); }};
#ifdef IDEM_TEST_POSTGRESQL
    all.push_back([]() -> std::unique_ptr<place> { return std::make_unique<postgresql_place>(); });
#endif
#ifdef IDEM_TEST_MARIADB
    all.push_back([]() -> std::unique_ptr<place> { return std::make_unique<mariadb_place>(); });
#endif
    return all;
}

// One place of each kind.
inline std::vector<std::unique_ptr<place>> places() {
    std::vector<std::unique_ptr<place>> all;
    for (const place_factory make : place_factories()) all.push_back(make());
    return all;
}

// Moves `amount` from alice to bob.
inline void move(idem::unit_of_work& uow, long long amount) {
    uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount);
    uow.sql() << "UPDATE accounts SET balance = balance + :a WHERE id = 'bob'", soci::use(amount);
}

inline idem::record_key key_of(const std::string& k) {
    return {"bank.transfer", idem::scope::tenant("acme"), k};
}

inline idem::database open_bank(const place& where, idem::database_options options = {}) {
    idem::database db = idem::database::open(where.url(), std::move(options));
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS accounts (id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS transfers (id VARCHAR(64) PRIMARY KEY, "
                     "from_account VARCHAR(64) NOT NULL, to_account VARCHAR(64) NOT NULL, amount BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('alice', 1000000), ('bob', 0)";
    });
    return db;
}

using bank_opener = idem::database (*)(const place&, idem::database_options);

// Runs scenario(db) on a bank opened afresh (by `open`, with `options`) at every
// place, the place named when a check fails.
template <class Scenario>
void on_every_bank(bank_opener open, const idem::database_options& options, Scenario&& scenario) {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open(*where, options);
        scenario(db);
    }
}
template <class Scenario>
void on_every_bank(const idem::database_options& options, Scenario&& scenario) {
    on_every_bank(open_bank, options, std::forward<Scenario>(scenario));
}
template <class Scenario>
void on_every_bank(Scenario&& scenario) {
    on_every_bank(open_bank, {}, std::forward<Scenario>(scenario));
}

inline long long balance(idem::database& db, const std::string& id) {
    return db.read([&](soci::session& sql) {
        long long b = -1;
        sql << "SELECT balance FROM accounts WHERE id = :id", soci::use(id), soci::into(b);
        return b;
    });
}

inline long long count_rows(idem::database& db, const std::string& sql_text) {
    return db.read([&](soci::session& sql) {
        long long n = -1;
        sql << sql_text, soci::into(n);
        return n;
    });
}

}  // namespace idem::test
