#include "ledger.hpp"

#include <soci/soci.h>

#include <nlohmann/json.hpp>

#include "request.hpp"

namespace payments {
namespace {

long long changed_rows(soci::statement&& st) {
    st.execute(true);
    return st.get_affected_rows();
}

// Adds `amount` to `account` if the result stays within [0, max_balance]; the
// bound is computed here, where both operands are known to be small.
bool add(soci::session& sql, const std::string& account, long long amount) {
    const long long floor = amount < 0 ? -amount : 0;
    const long long ceiling = amount > 0 ? max_balance - amount : max_balance;
    return changed_rows((sql.prepare << "UPDATE accounts SET balance = balance + :amount "
                                        "WHERE id = :id AND balance >= :floor AND balance <= :ceiling",
                         soci::use(amount), soci::use(account), soci::use(floor), soci::use(ceiling))) == 1;
}

}  // namespace

void create_schema(idem::database& db) {
    const bool sqlite = db.backend() == idem::database_url::backend::sqlite;
    const std::string money = sqlite ? "INTEGER" : "BIGINT";
    const std::string strict = sqlite ? " STRICT" : "";
    const std::string bounds = " BETWEEN 0 AND " + std::to_string(max_balance);
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance " + money +
                         " NOT NULL CHECK (balance" + bounds + "))" + strict;
        uow.sql() << "CREATE TABLE IF NOT EXISTS transfers (id TEXT PRIMARY KEY, from_account TEXT NOT NULL, "
                     "to_account TEXT NOT NULL, amount " +
                         money + " NOT NULL CHECK (amount > 0))" + strict;
        uow.sql() << "CREATE TABLE IF NOT EXISTS deposits (event_id TEXT PRIMARY KEY, account TEXT NOT NULL, amount " +
                         money + " NOT NULL CHECK (amount > 0))" + strict;
    });
}

bool open_account(idem::unit_of_work& uow, const std::string& id, long long balance) {
    return changed_rows((uow.sql().prepare << "INSERT INTO accounts (id, balance) VALUES (:id, :balance) "
                                              "ON CONFLICT (id) DO NOTHING",
                         soci::use(id), soci::use(balance))) == 1;
}

long long balance_of(soci::session& sql, const std::string& id) {
    long long balance = -1;
    sql << "SELECT balance FROM accounts WHERE id = :id", soci::use(id), soci::into(balance);
    return sql.got_data() ? balance : -1;
}

void move_money(idem::unit_of_work& uow, const std::string& id, const std::string& from, const std::string& to,
                long long amount) {
    soci::session& sql = uow.sql();
    const auto debit = [&] {
        if (add(sql, from, -amount)) return;
        if (balance_of(sql, from) < 0) throw rejected(404, "Payments.UnknownAccount", "no such account: from");
        throw rejected(422, "Payments.InsufficientFunds", "insufficient funds");
    };
    const auto credit = [&] {
        if (add(sql, to, amount)) return;
        if (balance_of(sql, to) < 0) throw rejected(404, "Payments.UnknownAccount", "no such account: to");
        throw rejected(422, "Payments.BalanceLimit", "the transfer would take the account past its limit");
    };
    // Rows locked in one order (by account id), so crossing transfers queue instead of deadlocking.
    if (from < to) {
        debit();
        credit();
    } else {
        credit();
        debit();
    }
    sql << "INSERT INTO transfers (id, from_account, to_account, amount) VALUES (:id, :f, :t, :a)", soci::use(id),
        soci::use(from), soci::use(to), soci::use(amount);
}

idem::webhook::handler_result apply_deposit(idem::unit_of_work& uow, std::string_view event_id, std::string_view body) {
    using idem::webhook::handler_result;
    std::string account;
    long long amount = 0;
    try {
        const nlohmann::json event = parse_object(std::string(body), {"id", "account", "amount"});
        if (id_field(event, "id") != event_id) return handler_result::permanent_failure("the event id is malformed");
        account = id_field(event, "account");
        amount = cents_field(event, "amount", 1, max_amount);
    } catch (const rejected& r) {
        return handler_result::permanent_failure(r.what());
    }
    soci::session& sql = uow.sql();
    const std::string id(event_id);
    // The event claims its row first: a redelivery finds it and writes nothing.
    if (changed_rows((sql.prepare << "INSERT INTO deposits (event_id, account, amount) VALUES (:e, :a, :m) "
                                     "ON CONFLICT (event_id) DO NOTHING",
                      soci::use(id), soci::use(account), soci::use(amount))) == 0)
        return handler_result::applied("already applied");
    if (add(sql, account, amount)) return handler_result::applied();
    // A transient failure rolls the claim back with everything else; a permanent one
    // commits, so it withdraws the claim itself.
    if (balance_of(sql, account) < 0) return handler_result::transient_failure("unknown account");
    sql << "DELETE FROM deposits WHERE event_id = :e", soci::use(id);
    return handler_result::permanent_failure("the account is at its limit");
}

}  // namespace payments
