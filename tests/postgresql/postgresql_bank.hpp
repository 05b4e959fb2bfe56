// The PostgreSQL schema of the test bank (tests/support/bank.hpp).
#pragma once

#include "bank.hpp"
#include "idem/postgresql_store.hpp"

namespace idem::test::pg_bank {

using namespace idem::test::bank;

// Fresh accounts and ledger, and no records: every test starts from the same bank.
inline void reset(soci::session& session) {
    session << "SET client_min_messages = warning";  // no notices for the IF EXISTS below
    session << "DROP TABLE IF EXISTS ledger, accounts";
    session << "CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)";
    session << "CREATE TABLE ledger (id bigserial PRIMARY KEY, transfer_key text NOT NULL, amount bigint NOT NULL)";
    session << "INSERT INTO accounts (id, balance) VALUES ('alice', :b), ('bob', :b)", soci::use(opening_balance, "b");
    session << "TRUNCATE idem_records";
}

}  // namespace idem::test::pg_bank
