// The payments service's money: accounts, transfers and provider deposits, in
// the same database as idem's records, so both commit together. Every change is
// one conditional UPDATE that checks its bounds as it writes, so a concurrent
// request can never drive a balance below zero or past max_balance.
#pragma once

#include <idem/database.hpp>

#include <string>

namespace payments {

// Creates the tables (STRICT on SQLite, so a balance can never turn into a REAL).
void create_schema(idem::database& db);

// Opens `id` with `balance` cents; false when it exists.
bool open_account(idem::unit_of_work& uow, const std::string& id, long long balance);
// The balance, or -1 for no such account.
long long balance_of(soci::session& sql, const std::string& id);

// Moves `amount` cents and writes the transfer row `id`; throws `rejected`
// (404 unknown account, 422 insufficient funds or balance limit), which rolls it all back.
void move_money(idem::unit_of_work& uow, const std::string& id, const std::string& from, const std::string& to,
                long long amount);

// Credits a provider deposit; false (nothing written) when the account is
// unknown or would pass max_balance: a permanent failure of that event.
bool deposit(idem::unit_of_work& uow, const std::string& event_id, const std::string& account, long long amount,
             std::string& why_not);

}  // namespace payments
