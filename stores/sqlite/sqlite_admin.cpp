#include "sqlite_admin.hpp"

#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "internal/crypto.hpp"
#include "internal/saturating_time.hpp"

namespace idem::detail::sqlite {
namespace {

// The payload column is read only when asked for; its size comes from the
// record header either way.
constexpr std::string_view inspect_sql = R"(
SELECT state, updated_at, expires_at, length(payload), typeof(payload) = 'blob', namespace,
       CASE WHEN ?2 THEN payload END
FROM idem_records WHERE key_hash = ?1)";

// No index covers namespace: a scan of the whole table, keeping the newest
// `limit` rows as it goes (SQLite's sorter with a LIMIT keeps only that many).
constexpr std::string_view recent_sql = R"(
SELECT key_hash, state, updated_at, expires_at, length(payload), typeof(payload) = 'blob'
FROM idem_records WHERE namespace = ?1 ORDER BY updated_at DESC, key_hash LIMIT ?2)";

// A record completed at or after ?2 expires after it (a retention is at least
// a millisecond): the expires_at index finds those rows, and the rows that
// expired before ?2 are never read. INDEXED BY: this read never scans the table.
// ?4 a scope id, or NULL for every scope.
constexpr std::string_view completed_since_sql = R"(
SELECT key_hash, state, updated_at, expires_at, length(payload), typeof(payload) = 'blob'
FROM idem_records INDEXED BY idem_records_expires_at
WHERE expires_at > ?2 AND namespace = ?1 AND state = 1 AND updated_at >= ?2 AND (?4 IS NULL OR scope_id = ?4)
ORDER BY updated_at DESC, key_hash LIMIT ?3)";

constexpr std::string_view delete_sql = R"(
DELETE FROM idem_records WHERE key_hash = ?1)";

constexpr std::string_view count_sql = R"(
SELECT (SELECT count(*) FROM idem_records WHERE expires_at <= ?1)
     + (SELECT count(*) FROM idem_tombstones WHERE forget_at <= ?1))";

// A remembered key's tombstone goes with its record, or alone; answers when it would have been forgotten.
constexpr std::string_view delete_tombstone_sql = R"(
DELETE FROM idem_tombstones WHERE key_hash = ?1 RETURNING forget_at)";

// rewrite_payloads' walk in key-hash order, through the primary key: a batch
// reads only the rows it hands over. An empty blob sorts before every key hash.
constexpr std::string_view payloads_after_sql = R"(
SELECT key_hash, payload FROM idem_records WHERE key_hash > ?1 AND state = 1 ORDER BY key_hash LIMIT ?2)";

// Only over the payload just read: a row written anew meanwhile keeps its own.
constexpr std::string_view rewrite_payload_sql = R"(
UPDATE idem_records SET payload = ?3 WHERE key_hash = ?1 AND state = 1 AND payload = ?2)";

// Clamped: a row may hold any integer, and nanoseconds end in 2262.
time_point at(std::int64_t milliseconds) {
    return detail::saturating_time(std::chrono::milliseconds(milliseconds));
}

// The state of the row `s` stands on, its columns (state, updated_at,
// expires_at, length(payload), typeof(payload) = 'blob') from `first`; `id`
// names a corrupt one.
record_state state_of(statement_use& s, int first, std::span<const std::byte> id, std::int64_t now) {
    const auto state = s->column_int(first);
    const auto updated_at = s->column_int(first + 1);
    const auto expires_at = s->column_int(first + 2);
    const auto payload_bytes = s->column_int(first + 3);  // NULL while in flight
    // A completed record's payload is a blob, as the store itself requires when it replays one.
    const bool payload_is_blob = s->column_int(first + 4).value_or(0) == 1;
    // A corrupt row is named by the key hash logs print: the digest's first 8 bytes.
    if (!state || (*state != 0 && *state != 1) || !updated_at || !expires_at || (*state == 1 && !payload_is_blob))
        throw store_error(store_failure::corrupt_record, "idem: the record " + hex(id.first(8)) +
                                                             " is corrupt: it does not have the shape idem writes");
    record_state r;
    r.completed = *state == 1;
    r.created_at = at(*updated_at);
    r.expires_at = at(*expires_at);
    r.now = at(now);
    r.payload_bytes = static_cast<std::size_t>(payload_bytes.value_or(0));
    return r;
}

}  // namespace

admin_statements::admin_statements(database* db)
    : inspect_(db, inspect_sql, "inspecting a record"),
      recent_(db, recent_sql, "listing recent records"),
      completed_since_(db, completed_since_sql, "listing records completed since a time"),
      delete_(db, delete_sql, "deleting a record"),
      count_(db, count_sql, "counting expired records"),
      delete_tombstone_(db, delete_tombstone_sql, "deleting a tombstone"),
      payloads_after_(db, payloads_after_sql, "reading stored payloads"),
      rewrite_payload_(db, rewrite_payload_sql, "rewriting a stored payload") {}

std::optional<record_state> admin_statements::inspect(const record_id_type& id, bool with_payload, std::int64_t now) {
    statement_use s(inspect_);
    s->bind(1, id);
    s->bind(2, std::int64_t{with_payload ? 1 : 0});
    if (!s->step()) return std::nullopt;
    record_state r = state_of(s, 0, id, now);
    r.name_space = std::string(s->column_text(5).value_or(""));
    if (const auto payload = s->column_blob(6)) r.payload = std::string(*payload);
    return r;
}

std::vector<listed_record> admin_statements::recent(std::string_view name_space, std::size_t limit, std::int64_t now) {
    statement_use s(recent_);
    s->bind_text(1, name_space);
    s->bind(2, static_cast<std::int64_t>(limit));
    return listed(s, name_space, now);
}

std::vector<listed_record> admin_statements::completed_since(std::string_view name_space,
                                                             const std::optional<scope_id_type>& owner,
                                                             std::int64_t since, std::size_t limit, std::int64_t now) {
    statement_use s(completed_since_);
    s->bind_text(1, name_space);
    s->bind(2, since);
    s->bind(3, static_cast<std::int64_t>(limit));
    if (owner) s->bind(4, *owner);
    return listed(s, name_space, now);
}

std::vector<listed_record> admin_statements::listed(statement_use& s, std::string_view name_space, std::int64_t now) {
    std::vector<listed_record> out;
    while (s->step()) {
        const auto hash = s->column_blob(0);
        if (!hash || hash->size() != record_id_bytes)
            throw store_error(store_failure::corrupt_record,
                              "idem: a record of this namespace is corrupt: its key_hash is not 16 bytes");
        listed_record l;
        std::memcpy(l.key_hash.data(), hash->data(), record_id_bytes);
        l.state = state_of(s, 1, l.key_hash, now);
        l.state.name_space = std::string(name_space);
        out.push_back(std::move(l));
    }
    return out;
}

forget_result admin_statements::forget(const record_id_type& id, bool force, std::int64_t now) {
    std::optional<record_state> found = inspect(id, false, now);
    if (found && !found->completed && !found->expired() && !force) return {forget_outcome::refused_in_flight, *found};
    if (found) {
        statement_use s(delete_);
        s->bind(1, id);
        (void)s->step();
    }
    std::optional<std::int64_t> forget_at;
    {
        statement_use s(delete_tombstone_);
        s->bind(1, id);
        if (s->step()) forget_at = s->column_int(0).value_or(0);
    }
    if (found) return {forget_outcome::deleted, *found, forget_at.has_value()};
    if (!forget_at) return {forget_outcome::not_found, {}};
    record_state remembered;
    remembered.completed = true;
    remembered.expires_at = at(*forget_at);
    remembered.now = at(now);
    return {forget_outcome::tombstone_deleted, remembered, true};
}

std::size_t admin_statements::count_expired(std::int64_t cutoff) {
    statement_use s(count_);
    s->bind(1, cutoff);
    if (!s->step()) throw store_error(store_failure::other, "idem: counting expired records returned no row");
    return static_cast<std::size_t>(s->column_int(0).value_or(0));
}

rewrite_progress admin_statements::rewrite_payloads(const std::optional<record_id_type>& after, std::size_t limit,
                                                    const payload_rewrite& rewrite) {
    struct row {
        record_id_type key_hash;
        std::string payload;
    };
    std::vector<row> rows;
    {
        statement_use s(payloads_after_);
        if (after)
            s->bind(1, *after);
        else
            s->bind_blob(1, {});
        s->bind(2, static_cast<std::int64_t>(limit));
        while (s->step()) {
            const auto hash = s->column_blob(0);
            const auto payload = s->column_blob(1);
            if (!hash || hash->size() != record_id_bytes || !payload)
                throw store_error(store_failure::corrupt_record,
                                  "idem: a completed record is corrupt: it does not have the shape idem writes");
            row r;
            std::memcpy(r.key_hash.data(), hash->data(), record_id_bytes);
            r.payload = std::string(*payload);
            rows.push_back(std::move(r));
        }
    }
    rewrite_progress progress;
    progress.read = rows.size();
    // The old payloads' bytes are zeroed where they were, not left in free
    // space, whatever this SQLite build's default; the connection's own
    // setting comes back after the batch (after a failure it keeps zeroing,
    // which costs only time).
    const bool secure_delete = pragma_value("PRAGMA secure_delete") == 1;
    if (!secure_delete) run_pragma("PRAGMA secure_delete = 1");
    for (const row& r : rows) {
        const std::optional<std::string> replacement = rewrite({.key_hash = r.key_hash, .payload = r.payload});
        if (!replacement) continue;
        statement_use s(rewrite_payload_);
        s->bind(1, r.key_hash);
        s->bind_blob(2, r.payload);
        s->bind_blob(3, *replacement);
        (void)s->step();
        progress.rewritten += static_cast<std::size_t>(sqlite_api::sqlite3_changes64(db()));
    }
    if (!secure_delete) run_pragma("PRAGMA secure_delete = 0");
    if (rows.size() == limit) progress.next = rows.back().key_hash;
    return progress;
}

std::int64_t admin_statements::pragma_value(const char* pragma) {
    statement s(db(), pragma, "reading a setting");
    statement_use use(s);
    return use->step() ? use->column_int(0).value_or(0) : 0;
}

void admin_statements::run_pragma(const char* pragma) {
    statement s(db(), pragma, "changing a setting");
    statement_use use(s);
    while (use->step()) {
    }
}

}  // namespace idem::detail::sqlite
