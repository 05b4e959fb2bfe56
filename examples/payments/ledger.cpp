#include "ledger.hpp"

#include <soci/soci.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "request.hpp"

namespace payments {
void create_schema(idem::database& db) {
    const bool sqlite = db.engine() == "sqlite";
    const std::string money = sqlite ? "INTEGER" : "BIGINT";
    // A key: SQLite's strict tables know TEXT alone; a server indexes a VARCHAR (MariaDB no TEXT).
    const std::string id = sqlite ? "TEXT" : "VARCHAR(255)";
    const std::string strict = sqlite ? " STRICT" : "";
    const std::string bounds = " BETWEEN 0 AND " + std::to_string(max_balance);
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS accounts (id " + id + " PRIMARY KEY, balance " + money +
                         " NOT NULL CHECK (balance" + bounds + "))" + strict;
        uow.sql() << "CREATE TABLE IF NOT EXISTS transfers (id " + id +
                         " PRIMARY KEY, from_account TEXT NOT NULL, "
                         "to_account TEXT NOT NULL, amount " +
                         money + " NOT NULL CHECK (amount > 0))" + strict;
        uow.sql() << "CREATE TABLE IF NOT EXISTS deposits (event_id " + id +
                         " PRIMARY KEY, account TEXT NOT NULL, amount " + money + " NOT NULL CHECK (amount > 0))" +
                         strict;
        uow.sql() << "CREATE TABLE IF NOT EXISTS payouts (id " + id + " PRIMARY KEY, account TEXT NOT NULL, amount " +
                         money +
                         " NOT NULL CHECK (amount > 0), destination TEXT NOT NULL, state TEXT NOT NULL, "
                         "provider_ref TEXT)" +
                         strict;
        // Every balance change of a payout's steps, one row each and no key: a step
        // that ran twice would show twice.
        uow.sql() << "CREATE TABLE IF NOT EXISTS payout_entries (payout TEXT NOT NULL, step TEXT NOT NULL, amount " +
                         money + " NOT NULL)" + strict;
    });
}

bool open_account(idem::unit_of_work& uow, const std::string& id, long long balance) {
    if (uow.find<account>(id) != nullptr) return false;
    uow.add(account{id, balance});  // INSERTed before COMMIT, with the record
    return true;
}

long long balance_of(soci::session& sql, const std::string& id) {
    long long balance = -1;
    sql << "SELECT balance FROM accounts WHERE id = :id", soci::use(id), soci::into(balance);
    return sql.got_data() ? balance : -1;
}

void move_money(idem::unit_of_work& uow, const std::string& id, const std::string& from, const std::string& to,
                long long amount) {
    // Read in one order (by account id): on PostgreSQL each read locks its row
    // (FOR UPDATE), so crossing transfers queue instead of deadlocking.
    account* first = uow.find<account>(std::min(from, to));
    account* second = uow.find<account>(std::max(from, to));
    account* source = from < to ? first : second;
    account* target = from < to ? second : first;
    if (source == nullptr) throw rejected(404, "Payments.UnknownAccount", "no such account: from");
    if (target == nullptr) throw rejected(404, "Payments.UnknownAccount", "no such account: to");
    if (source->balance < amount) throw rejected(422, "Payments.InsufficientFunds", "insufficient funds");
    if (target->balance > max_balance - amount)  // both are at most 10^15: no overflow
        throw rejected(422, "Payments.BalanceLimit", "the transfer would take the account past its limit");
    source->balance -= amount;  // both written before COMMIT, with the transfer row
    target->balance += amount;
    uow.add(transfer{id, from, to, amount});
    // Told to others if and only if the money moved: the event commits with it,
    // and `idem relay` delivers it, in order per paying account.
    (void)uow.publish({.topic = "transfer.completed",
                       .payload = nlohmann::json{{"id", id}, {"from", from}, {"to", to}, {"amount", amount}}.dump(),
                       .ordering_key = from,
                       .headers = {{"Content-Type", "application/json"}}});
}

idem::webhook::handler_result apply_deposit(idem::unit_of_work& uow, std::string_view event_id, std::string_view body) {
    using idem::webhook::handler_result;
    std::string to;
    long long amount = 0;
    try {
        const nlohmann::json event = parse_object(std::string(body), {"id", "account", "amount"});
        if (id_field(event, "id") != event_id) return handler_result::permanent_failure("the event id is malformed");
        to = id_field(event, "account");
        amount = cents_field(event, "amount", 1, max_amount);
    } catch (const rejected& r) {
        return handler_result::permanent_failure(r.what());
    }
    soci::session& sql = uow.sql();
    const std::string id(event_id);
    // The event claims its row first, in one statement that cannot race: a
    // redelivery finds it and writes nothing.
    std::string claimed;
    const bool mariadb = sql.get_backend_name() == "mysql";  // MariaDB names this INSERT IGNORE
    sql << (mariadb ? "INSERT IGNORE INTO deposits (event_id, account, amount) VALUES (:e, :a, :m) RETURNING event_id"
                    : "INSERT INTO deposits (event_id, account, amount) VALUES (:e, :a, :m) "
                      "ON CONFLICT (event_id) DO NOTHING RETURNING event_id"),
        soci::use(id), soci::use(to), soci::use(amount), soci::into(claimed);
    if (!sql.got_data()) return handler_result::applied("already applied");
    // A transient failure rolls the claim back with everything else; a permanent one
    // commits, so it withdraws the claim itself.
    account* credited = uow.find<account>(to);
    if (credited == nullptr) return handler_result::transient_failure("unknown account");
    if (credited->balance > max_balance - amount) {
        sql << "DELETE FROM deposits WHERE event_id = :e", soci::use(id);
        return handler_result::permanent_failure("the account is at its limit");
    }
    credited->balance += amount;
    (void)uow.publish({.topic = "deposit.applied",
                       .payload = nlohmann::json{{"event", id}, {"account", to}, {"amount", amount}}.dump(),
                       .ordering_key = to,
                       .headers = {{"Content-Type", "application/json"}}});
    return handler_result::applied();
}

}  // namespace payments
