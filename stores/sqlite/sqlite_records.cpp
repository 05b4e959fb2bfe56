#include "sqlite_records.hpp"

#include <chrono>
#include <limits>
#include <string>

#include "sql/record_id.hpp"

namespace idem::detail::sqlite {
namespace {

// ?1 the key hash, ?2 the namespace and ?10 the scope id (bind_identity) in
// every statement that writes a row.
// Expired means expires_at <= now, the same test everywhere: a row is either
// live (and untouchable but by its token) or absent. A live tombstone keeps an
// absent or expired key from being reserved: read_live() then answers from it.
constexpr std::string_view reserve_sql = R"(
INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at, scope_id)
SELECT ?1, ?2, ?3, ?4, 0, NULL, ?5, ?6, ?10
WHERE NOT EXISTS (SELECT 1 FROM idem_tombstones WHERE key_hash = ?1 AND forget_at > ?6)
ON CONFLICT (key_hash) DO UPDATE SET
    fingerprint = excluded.fingerprint, token = excluded.token, state = 0, payload = NULL,
    expires_at = excluded.expires_at, updated_at = excluded.updated_at, scope_id = excluded.scope_id
WHERE idem_records.expires_at <= excluded.updated_at
RETURNING 1)";

// The one-statement form's record: the transaction holds the file's write lock
// since its BEGIN IMMEDIATE and looked the key up under it, so the key is free;
// a plain INSERT still fails rather than overwrite anything.
constexpr std::string_view insert_sql = R"(
INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at, scope_id)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?10))";

constexpr std::string_view lookup_sql = R"(
SELECT state, token, fingerprint, payload, expires_at FROM idem_records WHERE key_hash = ?1)";

// A live entry with another token, or a completed one, stays as it is.
constexpr std::string_view complete_sql = R"(
INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at, scope_id)
VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?10)
ON CONFLICT (key_hash) DO UPDATE SET
    fingerprint = excluded.fingerprint, token = excluded.token, state = 1, payload = excluded.payload,
    expires_at = excluded.expires_at, updated_at = excluded.updated_at, scope_id = excluded.scope_id
WHERE idem_records.expires_at <= excluded.updated_at
   OR (idem_records.state = 0 AND idem_records.token = excluded.token)
RETURNING 1)";

constexpr std::string_view release_sql = R"(
DELETE FROM idem_records WHERE key_hash = ?1 AND token = ?2 AND state = 0 AND expires_at > ?3
RETURNING 1)";

constexpr std::string_view purge_sql = R"(
DELETE FROM idem_records WHERE key_hash IN
    (SELECT key_hash FROM idem_records WHERE expires_at <= ?1 LIMIT ?2))";

// A remembered key's tombstone: the key hash, the fingerprint's digest, and when it may be forgotten.
constexpr std::string_view remember_sql = R"(
INSERT INTO idem_tombstones (key_hash, fingerprint, forget_at) VALUES (?1, ?2, ?3)
ON CONFLICT (key_hash) DO UPDATE SET fingerprint = excluded.fingerprint, forget_at = excluded.forget_at)";

constexpr std::string_view remembered_sql = R"(
SELECT fingerprint FROM idem_tombstones WHERE key_hash = ?1 AND forget_at > ?2)";

// Through the forget_at index, from the window that ended first.
constexpr std::string_view forget_ended_sql = R"(
DELETE FROM idem_tombstones WHERE key_hash IN
    (SELECT key_hash FROM idem_tombstones WHERE forget_at <= ?1 ORDER BY forget_at LIMIT ?2))";

// `scope` holds the key's scope id until the statement has run (bindings are by pointer).
void bind_identity(statement_use& s, const record_key& key, scope_id_type& scope) {
    scope = scope_id(key.owner());
    s->bind(1, record_id(key.digest()));
    s->bind_text(2, key.name_space());
    s->bind(10, scope);
}

[[noreturn]] void corrupt(const record_key& key, const char* why) {
    throw store_error(store_failure::corrupt_record, "idem: the record " + key.key_hash() + " is corrupt: " + why);
}

}  // namespace

record_statements::record_statements(database* db)
    : reserve_(db, reserve_sql, "reserving a record"),
      lookup_(db, lookup_sql, "reading a record"),
      insert_(db, insert_sql, "inserting a record"),
      complete_(db, complete_sql, "completing a record"),
      release_(db, release_sql, "releasing a record"),
      purge_(db, purge_sql, "purging expired records"),
      remember_(db, remember_sql, "remembering a key"),
      remembered_(db, remembered_sql, "reading a key's tombstone"),
      forget_ended_(db, forget_ended_sql, "purging tombstones") {}

reservation record_statements::try_reserve(const record_key& key, std::string_view fingerprint, std::string_view token,
                                           record_times t) {
    {
        statement_use s(reserve_);
        scope_id_type scope;
        bind_identity(s, key, scope);
        s->bind_blob(3, fingerprint);
        s->bind_text(4, token);
        s->bind(5, t.expires_at);
        s->bind(6, t.now);
        if (s->step()) return reservation::reserved(std::string(token));
    }
    return read_live(key, fingerprint, t.now);
}

reservation record_statements::read_live(const record_key& key, std::string_view fingerprint, std::int64_t now) {
    {
        statement_use s(lookup_);
        s->bind(1, record_id(key.digest()));
        // The upsert left the row alone, so it exists and is live (in this
        // transaction, which holds the write lock), unless it is malformed or a
        // tombstone stopped the upsert.
        if (s->step()) {
            const auto expires_at = s->column_int(4);
            if (!expires_at || *expires_at > now) return decide(s, key, fingerprint);
        }
    }
    if (auto answer = remembered(key, fingerprint, now)) return std::move(*answer);
    corrupt(key, "it vanished between two statements of one transaction");
}

std::optional<reservation> record_statements::remembered(const record_key& key, std::string_view fingerprint,
                                                         std::int64_t now) {
    statement_use s(remembered_);
    s->bind(1, record_id(key.digest()));
    s->bind(2, now);
    if (!s->step()) return std::nullopt;
    const auto stored = s->column_blob(0);
    if (!stored || stored->size() != fingerprint_digest_bytes) corrupt(key, "its tombstone's fingerprint is malformed");
    if (*stored != fingerprint_digest(fingerprint)) return reservation::fingerprint_mismatch();
    return reservation::expired();
}

void record_statements::remember(const record_key& key, std::string_view fingerprint, std::int64_t forget_at) {
    const std::string digest = fingerprint_digest(fingerprint);
    statement_use s(remember_);
    s->bind(1, record_id(key.digest()));
    s->bind_blob(2, digest);
    s->bind(3, forget_at);
    (void)s->step();
}

std::optional<reservation> record_statements::peek(const record_key& key, std::string_view fingerprint,
                                                   std::int64_t now) {
    statement_use s(lookup_);
    s->bind(1, record_id(key.digest()));
    if (!s->step()) return std::nullopt;
    const auto expires_at = s->column_int(4);
    if (expires_at && *expires_at <= now) return std::nullopt;
    return decide(s, key, fingerprint);
}

record_lookup record_statements::look_up(const record_key& key, std::string_view fingerprint, std::int64_t now) {
    bool absent = false;
    {
        statement_use s(lookup_);
        s->bind(1, record_id(key.digest()));
        absent = !s->step();
        if (!absent) {
            const auto expires_at = s->column_int(4);
            if (!expires_at || *expires_at > now) {
                reservation answer = decide(s, key, fingerprint);
                if (answer.status == reservation_status::in_flight) return {record_lookup::found::reserve, {}};
                return {record_lookup::found::answer, std::move(answer)};
            }
        }
    }
    if (auto answer = remembered(key, fingerprint, now)) return {record_lookup::found::answer, std::move(*answer)};
    // Absent: the work may run; expired: to take over.
    return {absent ? record_lookup::found::nothing : record_lookup::found::reserve, {}};
}

void record_statements::insert(const record_key& key, std::string_view fingerprint, std::string_view token,
                               std::optional<std::string_view> payload, record_times t,
                               std::optional<std::int64_t> forget_at) {
    {
        statement_use s(insert_);
        scope_id_type scope;
        bind_identity(s, key, scope);
        s->bind_blob(3, fingerprint);
        s->bind_text(4, token);
        s->bind(5, std::int64_t{payload ? 1 : 0});
        if (payload) s->bind_blob(6, *payload);
        s->bind(7, t.expires_at);
        s->bind(8, t.now);
        (void)s->step();
    }
    if (forget_at) remember(key, fingerprint, *forget_at);
}

reservation record_statements::decide(statement_use& s, const record_key& key, std::string_view fingerprint) {
    const auto state = s->column_int(0);
    const auto stored_token = s->column_text(1);
    const auto stored_fingerprint = s->column_blob(2);
    const auto payload = s->column_blob(3);
    if (!s->column_int(4)) corrupt(key, "expires_at is not an integer");
    if (!state || (*state != 0 && *state != 1)) corrupt(key, "unknown state");
    if (!stored_token || stored_token->empty()) corrupt(key, "missing token");
    if (!stored_fingerprint || stored_fingerprint->empty()) corrupt(key, "missing fingerprint");
    if (*state == 1 && !payload) corrupt(key, "completed without a payload");

    if (*stored_fingerprint != fingerprint) return reservation::fingerprint_mismatch();
    if (*state == 1) return reservation::completed(std::string(*payload));
    return reservation::in_flight();
}

bool record_statements::complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                 std::string_view payload, record_times t, std::optional<std::int64_t> forget_at) {
    {
        statement_use s(complete_);
        scope_id_type scope;
        bind_identity(s, key, scope);
        s->bind_blob(3, fingerprint);
        s->bind_text(4, token);
        s->bind_blob(5, payload);
        s->bind(6, t.expires_at);
        s->bind(7, t.now);
        if (!s->step()) return false;
    }
    if (forget_at) remember(key, fingerprint, *forget_at);
    return true;
}

bool record_statements::release(const record_key& key, std::string_view token, std::int64_t now) {
    statement_use s(release_);
    s->bind(1, record_id(key.digest()));
    s->bind_text(2, token);
    s->bind(3, now);
    return s->step();
}

std::size_t record_statements::purge(std::int64_t now, std::size_t limit) {
    const auto rows = [&](statement& which, std::size_t at_most) {
        statement_use s(which);
        s->bind(1, now);
        s->bind(2, static_cast<std::int64_t>(std::min<std::size_t>(at_most, std::numeric_limits<std::int64_t>::max())));
        (void)s->step();
        return static_cast<std::size_t>(sqlite_api::sqlite3_changes64(db()));
    };
    std::size_t deleted = rows(purge_, limit);
    // Then the tombstones whose window ended, within the same bound.
    if (deleted < limit) deleted += rows(forget_ended_, limit - deleted);
    return deleted;
}

}  // namespace idem::detail::sqlite
