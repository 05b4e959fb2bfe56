// idem/operations.hpp: operations in steps as an operator sees them, in code:
// one with its steps (what idem inspect shows), the unfinished ones (idem
// complete's list), and the purge of finished ones past their retention (idem
// purge's), each read or batch in a transaction of its own.
//
//   if (auto op = idem::inspect_operation(db, key)) std::cout << idem::to_string(op->phase) << "\n";
//   for (const idem::operation_state& s : idem::unfinished_operations(db, "payments.payout")) alert(s);
//   idem::purge_operations(db, {.batch = 1000, .older_than = std::chrono::hours(24)});
//
// Link idem_database (pkg-config idem-database). See docs/steps.md.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "idem/export.hpp"
#include "idem/operation_state.hpp"
#include "idem/purge.hpp"
#include "idem/record_key.hpp"

namespace idem {

class database;

// The operation stored under `key`, with its steps; nothing when there is none.
[[nodiscard]] IDEM_API std::optional<operation_state> inspect_operation(database& db, const record_key& key);

// Unfinished operations (running or compensating) without their steps, the
// one whose lease ends (or ended) first first: of `name_space`, or of every
// namespace when it is empty. At most `limit` (1 to 10,000).
[[nodiscard]] IDEM_API std::vector<operation_state> unfinished_operations(database& db,
                                                                          std::string_view name_space = {},
                                                                          std::size_t limit = 100);

// Deletes finished operations whose retention ended at least
// options.older_than ago, with their steps, in batches (options.batch each,
// their own short transaction, oldest first, through an index), with the purge
// job's loop (idem/purge.hpp). Never an unfinished one: that is the completer's.
IDEM_API purge_result purge_operations(database& db, const purge_options& options = {});

}  // namespace idem
