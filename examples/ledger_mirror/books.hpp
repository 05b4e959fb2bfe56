// The ledger mirror's books, in its own database: every payments event it
// applied, in the order it applied them, and each account's net movement
// (what transfers and deposits did to it, the opening balance aside).
#pragma once

#include <idem/database.hpp>
#include <idem/webhook.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace ledger_mirror {

// Creates the tables (STRICT on SQLite).
void create_schema(idem::database& db);

// Applies one event the payments service published, in the receiver's unit of
// work (which also records its message id `id`, so a redelivery applies nothing):
// transfer.completed {"id","from","to","amount"} moves `amount` cents from one
// account's net to the other's, deposit.applied {"event","account","amount"} adds
// them to one. Another topic, or a body of another shape, is a permanent failure:
// stored, answered 200, never applied.
idem::webhook::handler_result apply(idem::unit_of_work& uow, std::string_view id, std::string_view topic,
                                    std::string_view ordering_key, std::string_view body);

// An account's net movement; nothing for an account no event named.
std::optional<long long> net_of(soci::session& sql, const std::string& account);

}  // namespace ledger_mirror
