// The payments service's money: accounts, transfers and provider deposits, in
// the same database as idem's records, so both commit together. Accounts and
// transfers are mapped objects (idem/mapping.hpp): a balance is read, checked
// against its bounds in C++ and written back by the unit of work. Accounts have
// no version column, so PostgreSQL reads them FOR UPDATE: a concurrent request
// for the same account waits for this one's COMMIT, then reads what it wrote,
// and a balance can never go below zero or past max_balance (the tables' CHECK
// constraints say so too).
#pragma once

#include <idem/database.hpp>
#include <idem/mapping.hpp>
#include <idem/webhook.hpp>

#include <string>
#include <tuple>

namespace payments {

struct account {
    std::string id;
    long long balance = 0;  // cents
};

struct transfer {
    std::string id;
    std::string from, to;
    long long amount = 0;  // cents
};

}  // namespace payments

template <>
struct idem::mapping<payments::account> {
    static constexpr auto table = "accounts";
    static constexpr auto columns =
        std::tuple(key("id", &payments::account::id), column("balance", &payments::account::balance));
};

template <>
struct idem::mapping<payments::transfer> {
    static constexpr auto table = "transfers";
    static constexpr auto columns =
        std::tuple(key("id", &payments::transfer::id), column("from_account", &payments::transfer::from),
                   column("to_account", &payments::transfer::to), column("amount", &payments::transfer::amount));
};

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

// Credits the deposit a provider event `body` (with id `event_id`) announces, once:
// - applied: credited now, or found applied already (the deposits row, keyed by the
//   event id, dedupes redeliveries even where no idempotency record does: Off, Observe);
// - permanent failure, nothing written: a malformed event, or an amount past a limit;
// - transient failure: the account does not exist yet. Events arrive out of order, so
//   the provider is asked to redeliver (503) once it may have been opened.
idem::webhook::handler_result apply_deposit(idem::unit_of_work& uow, std::string_view event_id, std::string_view body);

}  // namespace payments
