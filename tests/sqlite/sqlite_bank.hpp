// The SQLite schema of the test bank (tests/support/bank.hpp).
#pragma once

#include "bank.hpp"
#include "idem/sqlite_store.hpp"

namespace idem::test::bank {

inline void create_schema(soci::session& session) {
    session << "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)";
    session << "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, transfer_key TEXT NOT NULL, amount INTEGER "
               "NOT NULL)";
    session << "INSERT OR IGNORE INTO accounts (id, balance) VALUES ('alice', :b), ('bob', :b)",
        soci::use(opening_balance, "b");
}

}  // namespace idem::test::bank
