// Every statement on the outbox table (migrations/*/NNNN_outbox.sql), written
// once for every SQL dialect: the dialect says only how bytes travel through
// SOCI and how a claim skips rows another relay holds (sql_dialect.hpp). Each
// runs in the caller's unit of work. Times are milliseconds since the epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "idem/export.hpp"
#include "idem/outbox.hpp"

namespace soci {
class session;
}

namespace idem::detail::outbox_table {

// A message as publish gives it its id, before it is written.
struct new_row {
    std::string id;
    outgoing_message message;
};

// Writes the messages to the outbox's intake in order (one statement each),
// where they wait until a claim takes them in.
IDEM_API void insert(unit_of_work& uow, std::span<const new_row> rows, std::int64_t now);

struct claimed_row {
    std::int64_t seq = 0;
    std::string id;
    std::string topic;
    std::optional<std::string> ordering_key;
    std::vector<message_header> headers;
    std::string payload;
    int attempt = 0;  // this delivery's, from 1
    std::int64_t created_at = 0;
};

// Takes in up to 16 batches of the intake (in order of publication; a
// message whose id is in the outbox already, the same record's work run
// again after its record expired, is dropped), then takes up to `limit` due
// messages for `token` until `lease_end`, in the order they came due, none
// whose ordering key has an earlier undelivered message (so at most one of a
// key): their attempts go up by one. When it finds few, messages that will
// go on waiting (deep in a key's queue, behind a dead letter) are set aside
// until `lease_end`; settle() makes the next of a key due as soon as the one
// before is delivered.
[[nodiscard]] IDEM_API std::vector<claimed_row> claim(unit_of_work& uow, std::size_t limit, std::int64_t now,
                                                      std::int64_t lease_end, const std::string& token);

enum class settle_kind : unsigned char { retry, dead };

struct unsettled {
    std::string id;
    settle_kind kind = settle_kind::retry;
    std::int64_t available_at = 0;  // retry: when it is due again
    std::string answer;             // what the sink said
};

// Ends the claim `token` holds until `lease_end` (what claim() was given):
// each of `failed` is retried later or dead, every other message it claimed
// is delivered, and, when some had an ordering key (`keyed`), the next
// message of each such key is due now. A message whose lease ended and that
// another relay claimed meanwhile is not touched.
IDEM_API void settle(unit_of_work& uow, const std::string& token, std::int64_t lease_end,
                     std::span<const unsettled> failed, std::int64_t now, bool keyed);

// Dead letters back to pending with their attempts reset: the one with `id`, or all.
[[nodiscard]] IDEM_API std::size_t requeue(unit_of_work& uow, const std::optional<std::string>& id, std::int64_t now);

struct totals {
    std::int64_t pending = 0;
    std::int64_t dead = 0;
    std::optional<std::int64_t> oldest_pending = {};  // created_at of the first pending message by seq
};
[[nodiscard]] IDEM_API totals count(unit_of_work& uow);

// Deletes up to `limit` messages delivered at or before `delivered_before`,
// in the order they were delivered; returns how many.
[[nodiscard]] IDEM_API std::size_t purge(unit_of_work& uow, std::size_t limit, std::int64_t delivered_before);

// Whether the outbox's migration has run on the database `sql` is connected to.
[[nodiscard]] IDEM_API bool exists(soci::session& sql);
// Messages delivered at or before `delivered_before` (purge --dry-run; a plain read).
[[nodiscard]] IDEM_API std::size_t count_delivered(soci::session& sql, std::int64_t delivered_before);

// One dead letter, for operators.
struct dead_row {
    std::string id;
    std::string topic;
    int attempts = 0;
    std::string last_answer;
};
[[nodiscard]] IDEM_API std::vector<dead_row> dead_letters(unit_of_work& uow, std::size_t limit);

// Milliseconds since the epoch now, on the system clock.
[[nodiscard]] IDEM_API std::int64_t now_ms() noexcept;

}  // namespace idem::detail::outbox_table
