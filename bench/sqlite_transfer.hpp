// The steady-state transfer on a SQLite connection, written by hand: BEGIN
// IMMEDIATE, a debit and a credit of two of the 100,000 accounts at random, a
// ledger line, COMMIT (on the tables the steady-state prefills make).
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "sqlite_api.hpp"
#include "steady_state.hpp"

namespace idem::bench {

struct sqlite_transfer {
    explicit sqlite_transfer(sqlite3* db)
        : begin(db, "BEGIN IMMEDIATE"),
          commit(db, "COMMIT"),
          debit(db, "UPDATE bench_accounts SET balance = balance - 1 WHERE id = ?1"),
          credit(db, "UPDATE bench_accounts SET balance = balance + 1 WHERE id = ?1"),
          ledger(db, "INSERT INTO bench_ledger (transfer_id, amount) VALUES (?1, 1)") {}

    // The accounts, and a ledger of `rows` past transfers, in the caller's transaction.
    static void create_tables(sqlite3* db, std::size_t rows) {
        exec(db, "CREATE TABLE bench_accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)");
        exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                     std::to_string(steady_accounts) + ") INSERT INTO bench_accounts SELECT i, 1000000000 FROM n");
        exec(db, "CREATE TABLE bench_ledger (transfer_id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)");
        exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + std::to_string(rows) +
                     ") INSERT INTO bench_ledger SELECT i, 1 FROM n");
    }

    // The business statements, inside an open transaction.
    void transfer(std::uint64_t id) {
        const auto [from, to] = account_pair(rng);
        debit.bind(1, from).run();
        credit.bind(1, to).run();
        ledger.bind(1, static_cast<std::int64_t>(id)).run();
    }

    // The bare transfer, in a transaction of its own.
    void bare(std::uint64_t id) {
        begin.run();
        transfer(id);
        commit.run();
    }

    std::mt19937_64 rng{0x5eed};
    statement begin, commit, debit, credit, ledger;
};

}  // namespace idem::bench
