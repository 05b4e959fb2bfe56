// Every statement on the outbox table (migrations/*/NNNN_outbox.sql), written
// once for every SQL dialect: the dialect says only how bytes travel through
// SOCI and how a claim skips rows another relay holds (sql_dialect.hpp). Each
// runs in the caller's unit of work. Times are milliseconds since the epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
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

// Takes in up to 16 batches of the intake (in order of publication; when an
// id arrives again, id_arrived_again: see take_in_one_by_one), then takes up to `limit` due
// messages for `token` until `lease_end`, in the order they came due, none
// whose ordering key has an earlier undelivered message (so at most one of a
// key): their attempts go up by one. When it finds few, messages that will
// go on waiting (deep in a key's queue, behind a dead letter) are set aside
// until `lease_end`; settle() makes the next of a key due as soon as the one
// before is delivered.
[[nodiscard]] IDEM_API std::vector<claimed_row> claim(unit_of_work& uow, std::size_t limit, std::int64_t now,
                                                      std::int64_t lease_end, const std::string& token);

// claim() found a message whose id is in the outbox already (or twice in
// the intake): nothing is dropped; the caller rolls the claim back, runs
// take_in_one_by_one in a transaction of its own, and claims again.
class IDEM_API id_arrived_again : public std::runtime_error {
public:
    id_arrived_again();
    ~id_arrived_again() override;  // defined in idem_sql, which alone emits its typeinfo
};

// A message of the intake whose id was taken.
struct arrived_again {
    std::string id;
    std::string topic;
    std::string kept_as;  // conflicts: the id it is dead-lettered under
};
struct intake_report {
    std::vector<arrived_again> duplicates;  // the same message again: dropped, its twin delivers it
    std::vector<arrived_again> conflicts;   // another message: kept as a dead letter under a new id
};

// Takes in up to `limit` messages of the intake one at a time, in
// publication order: a message whose id is free comes in as claim() takes
// it in; one whose id is taken by the same message (topic, ordering key,
// headers and payload) is a duplicate and goes; one whose id is taken by
// another message is a conflict and comes in dead, under a new random id,
// its answer naming the id it had. Nothing else is dropped. The slow path,
// for the rare claim that met an id again.
[[nodiscard]] IDEM_API intake_report take_in_one_by_one(unit_of_work& uow, std::size_t limit);

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
