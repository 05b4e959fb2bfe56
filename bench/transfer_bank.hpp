// The business work every transfer benchmark measures: debit, credit and a
// ledger line, as prepared statements on one session (SQLite or PostgreSQL).
#pragma once

#include <soci/soci.h>

#include <cstdint>
#include <string>

namespace idem::bench {

class transfer_bank {
public:
    // `reset`: create the tables if needed and start from two fresh accounts.
    explicit transfer_bank(soci::session& s, bool reset = true)
        : session_(s),
          debit_((reset ? create_schema(s) : s,
                  s.prepare << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount_))),
          credit_((s.prepare << "UPDATE accounts SET balance = balance + :a WHERE id = 'bob'", soci::use(amount_))),
          ledger_((s.prepare << "INSERT INTO ledger (transfer_id, amount) VALUES (:t, :a)", soci::use(transfer_id_),
                   soci::use(amount_))) {}

    void transfer(std::uint64_t id) {
        transfer_id_ = static_cast<long long>(id);
        debit_.execute(true);
        credit_.execute(true);
        ledger_.execute(true);
    }

private:
    static soci::session& create_schema(soci::session& s) {
        s << "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        s << "CREATE TABLE IF NOT EXISTS ledger (transfer_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL)";
        s << "DELETE FROM ledger";
        s << "DELETE FROM accounts";
        s << "INSERT INTO accounts (id, balance) VALUES ('alice', 1000000000000), ('bob', 0)";
        return s;
    }

    soci::session& session_;
    long long amount_ = 1;
    long long transfer_id_ = 0;
    soci::statement debit_, credit_, ledger_;
};

}  // namespace idem::bench
