// The statements on the tables of operations in steps (migrations/*/NNNN_steps.sql
// and NNNN_completer.sql) that are not one run's own: what inspect, the
// completer, `idem complete` and the purge read and change, in the order this
// work needs; the SQL is the dialect's (operations_statements.hpp). Each runs
// on the caller's session (in its transaction, where one is open). Times are
// milliseconds since the epoch on the database's clock, so instances with
// skewed clocks agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/export.hpp"
#include "idem/operation_state.hpp"

namespace soci {
class session;
}

namespace idem::detail::operations_table {

// How results, inputs and fingerprints are kept: lowercase hex text, so every
// byte survives any driver. from_hex throws store_error(corrupt_record) for
// text idem did not write.
[[nodiscard]] IDEM_API std::string to_hex(std::string_view bytes);
[[nodiscard]] IDEM_API std::string from_hex(std::string_view text);

// Whether the completer's migration has run on the database `sql` is connected to.
[[nodiscard]] IDEM_API bool exists(soci::session& sql);

// The operation with this record id (32 lowercase hex characters) and its
// stored steps in order, results included; nothing when there is none.
[[nodiscard]] IDEM_API std::optional<operation_state> read(soci::session& sql, const std::string& record_id);

// Unfinished operations (running or compensating), the one whose lease ends
// (or ended) first first, without their steps: of `name_space`, or of every
// namespace when it is empty.
[[nodiscard]] IDEM_API std::vector<operation_state> unfinished(soci::session& sql, std::string_view name_space,
                                                               std::size_t limit);

struct backlog {
    std::int64_t unfinished = 0;
    std::int64_t overdue = 0;  // unfinished, their lease ended
    std::int64_t lag_ms = 0;   // since the longest-overdue lease ended (0: none overdue)
};
// The unfinished operations of every namespace (through the (state, expires_at) index).
[[nodiscard]] IDEM_API backlog count_unfinished(soci::session& sql);

struct due_row {
    std::string record_id;
    std::string name_space;
    int failures = 0;  // the completer's failed runs of it so far
};
// Unfinished operations of these namespaces whose lease ended, the longest ended first.
[[nodiscard]] IDEM_API std::vector<due_row> due(soci::session& sql, std::span<const std::string> namespaces,
                                                std::size_t limit);

// Deletes up to `limit` finished operations whose retention ended at least
// `older_than_ms` ago, with their steps, oldest first; returns how many. Never
// an unfinished one, whatever its lease: that work is the completer's.
[[nodiscard]] IDEM_API std::size_t purge(soci::session& sql, std::size_t limit, std::int64_t older_than_ms);
// How many a purge would delete (a plain read).
[[nodiscard]] IDEM_API std::size_t count_expired(soci::session& sql, std::int64_t older_than_ms);

// Puts an unfinished operation off: its lease ends `wait_ms` from now, `what`
// is kept as its last error (cut to 1 KiB of printable ASCII), and, when
// `failed`, it counts as one more failed run of the completer (compensate_after).
// With `fence`, only while the operation still carries that fencing token (the
// run's own); without, only while no run holds it (its lease ended).
IDEM_API void put_off(soci::session& sql, const std::string& record_id, std::optional<std::int64_t> fence,
                      std::int64_t wait_ms, std::string_view what, bool failed);

// An operator's hand on one unfinished operation: its lease ends now and its
// fencing token moves on, so the run holding it (if any) can write no step
// more and the next completer pass or retry takes it over. With `compensate`
// it is also marked to compensate: its next run (the completer's) undoes it.
[[nodiscard]] IDEM_API release_outcome release(soci::session& sql, const std::string& record_id, bool compensate);

}  // namespace idem::detail::operations_table
