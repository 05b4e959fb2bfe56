// A tiny bank for the SQL-store contract suite and the stores' own tests: two
// accounts, a ledger, and an idempotent transfer whose record joins the
// transfer's transaction. The suite creates the tables in portable SQL
// (create_portable_schema); the stores' tests in their dialect's
// (tests/sqlite/sqlite_bank.hpp, tests/postgresql/postgresql_bank.hpp).
#pragma once

#include <soci/soci.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "idem/transaction_runner.hpp"
#include "idem/transactional_record_store.hpp"

namespace idem::test::bank {

inline constexpr long long opening_balance = 1'000'000;
inline constexpr const char* fingerprint = "alice->bob";

// What a business operation throws after its writes, to make its transaction roll back.
struct business_failure : std::runtime_error {
    business_failure() : std::runtime_error("business failure") {}
};

// The bank at its opening balances, in SQL every dialect speaks: the tables
// dropped and created again, so each scenario starts from the same rows.
inline void create_portable_schema(soci::session& session) {
    session << "DROP TABLE IF EXISTS ledger";
    session << "DROP TABLE IF EXISTS accounts";
    session << "CREATE TABLE accounts (id VARCHAR(32) PRIMARY KEY, balance BIGINT NOT NULL)";
    session << "CREATE TABLE ledger (transfer_key VARCHAR(200) NOT NULL, amount BIGINT NOT NULL)";
    for (const std::string account : {"alice", "bob"})
        session << "INSERT INTO accounts (id, balance) VALUES (:id, :b)", soci::use(account),
            soci::use(opening_balance);
}

[[nodiscard]] inline long long balance(soci::session& session, const std::string& account) {
    long long b = 0;
    session << "SELECT balance FROM accounts WHERE id = :id", soci::use(account), soci::into(b);
    return b;
}

[[nodiscard]] inline long long count(soci::session& session, const std::string& sql) {
    long long n = 0;
    session << sql, soci::into(n);
    return n;
}

[[nodiscard]] inline record_key transfer_key(const std::string& key) {
    return record_key("bank.transfer", key);
}

// What the store holds for the transfer `key`, seen from a connection of the
// store's own: a probe that finds the key free releases it again.
[[nodiscard]] inline reservation_status detached_status(record_store& store, const std::string& key) {
    using namespace std::chrono_literals;
    auto r = store.try_reserve(transfer_key(key), fingerprint, 1min);
    if (r.status == reservation_status::reserved && !store.release(transfer_key(key), r.token))
        throw std::logic_error("could not release a probe reservation");
    return r.status;
}

// Debits alice, credits bob and writes a ledger line; the body of every transfer.
inline void move_money(soci::session& session, const std::string& key, long long amount) {
    session << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount);
    session << "UPDATE accounts SET balance = balance + :a WHERE id = 'bob'", soci::use(amount);
    session << "INSERT INTO ledger (transfer_key, amount) VALUES (:k, :a)", soci::use(key), soci::use(amount);
}

enum class outcome { executed, replayed, in_flight, mismatch, expired };

// Reserve, move the money and complete, all in one transaction.
inline outcome transfer(transactional_record_store& store, transaction_runner& runner, const std::string& key,
                        long long amount) {
    using namespace std::chrono_literals;
    return runner.run([&](unit_of_work& tx) {
        const record_key k = transfer_key(key);
        auto r = store.try_reserve(tx, k, fingerprint, 1min);
        switch (r.status) {
            case reservation_status::completed: return outcome::replayed;
            case reservation_status::in_flight: return outcome::in_flight;
            case reservation_status::fingerprint_mismatch: return outcome::mismatch;
            case reservation_status::expired: return outcome::expired;
            case reservation_status::reserved: break;
        }
        move_money(tx.sql(), key, amount);
        if (!store.complete(tx, k, r.token, fingerprint, "moved " + std::to_string(amount), 24h))
            throw std::logic_error("the store refused to complete our own reservation");
        return outcome::executed;
    });
}

}  // namespace idem::test::bank
