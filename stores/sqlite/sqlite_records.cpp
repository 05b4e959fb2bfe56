#include "sqlite_records.hpp"

#include <chrono>
#include <limits>
#include <string>

#include "sql/record_id.hpp"

namespace idem::detail::sqlite {
namespace {

// Expired means expires_at <= now, the same test everywhere: a row is either
// live (and untouchable but by its token) or absent.
constexpr std::string_view reserve_sql = R"(
INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at)
VALUES (?1, ?2, ?3, ?4, 0, NULL, ?5, ?6)
ON CONFLICT (key_hash) DO UPDATE SET
    fingerprint = excluded.fingerprint, token = excluded.token, state = 0, payload = NULL,
    expires_at = excluded.expires_at, updated_at = excluded.updated_at
WHERE idem_records.expires_at <= excluded.updated_at
RETURNING 1)";

// The one-statement form's record: the transaction holds the file's write lock
// since its BEGIN IMMEDIATE and looked the key up under it, so the key is free;
// a plain INSERT still fails rather than overwrite anything.
constexpr std::string_view insert_sql = R"(
INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8))";

constexpr std::string_view lookup_sql = R"(
SELECT state, token, fingerprint, payload, expires_at FROM idem_records WHERE key_hash = ?1)";

// A live entry with another token, or a completed one, stays as it is.
constexpr std::string_view complete_sql = R"(
INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at)
VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7)
ON CONFLICT (key_hash) DO UPDATE SET
    fingerprint = excluded.fingerprint, token = excluded.token, state = 1, payload = excluded.payload,
    expires_at = excluded.expires_at, updated_at = excluded.updated_at
WHERE idem_records.expires_at <= excluded.updated_at
   OR (idem_records.state = 0 AND idem_records.token = excluded.token)
RETURNING 1)";

constexpr std::string_view release_sql = R"(
DELETE FROM idem_records WHERE key_hash = ?1 AND token = ?2 AND state = 0 AND expires_at > ?3
RETURNING 1)";

constexpr std::string_view purge_sql = R"(
DELETE FROM idem_records WHERE key_hash IN
    (SELECT key_hash FROM idem_records WHERE expires_at <= ?1 LIMIT ?2))";

void bind_identity(statement_use& s, const record_key& key) {
    s->bind(1, record_id(key.digest()));
    s->bind_text(2, key.name_space());
}

[[noreturn]] void corrupt(const record_key& key, const char* why) {
    throw store_error(store_failure::corrupt_record, "idem: the record " + key.key_hash() + " is corrupt: " + why);
}

}  // namespace

record_times times(time_point now, duration span) noexcept {
    using std::chrono::milliseconds;
    const std::int64_t at = std::chrono::floor<milliseconds>(now.time_since_epoch()).count();
    // Round the span up, so a positive one never expires on the spot; saturate
    // rather than overflow for absurdly long ones.
    const std::int64_t length = std::max<std::int64_t>(std::chrono::ceil<milliseconds>(span).count(), 1);
    std::int64_t end = 0;
    if (__builtin_add_overflow(at, length, &end)) end = std::numeric_limits<std::int64_t>::max();
    return {at, end};
}

record_statements::record_statements(database* db)
    : reserve_(db, reserve_sql, "reserving a record"),
      lookup_(db, lookup_sql, "reading a record"),
      insert_(db, insert_sql, "inserting a record"),
      complete_(db, complete_sql, "completing a record"),
      release_(db, release_sql, "releasing a record"),
      purge_(db, purge_sql, "purging expired records") {}

reservation record_statements::try_reserve(const record_key& key, std::string_view fingerprint, std::string_view token,
                                           record_times t) {
    {
        statement_use s(reserve_);
        bind_identity(s, key);
        s->bind_blob(3, fingerprint);
        s->bind_text(4, token);
        s->bind(5, t.expires_at);
        s->bind(6, t.now);
        if (s->step()) return reservation::reserved(std::string(token));
    }
    return read_live(key, fingerprint);
}

reservation record_statements::read_live(const record_key& key, std::string_view fingerprint) {
    statement_use s(lookup_);
    s->bind(1, record_id(key.digest()));
    // The upsert left the row alone, so it exists and is live (in this
    // transaction, which holds the write lock), unless it is malformed.
    if (!s->step()) corrupt(key, "it vanished between two statements of one transaction");
    return decide(s, key, fingerprint);
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
    statement_use s(lookup_);
    s->bind(1, record_id(key.digest()));
    if (!s->step()) return {record_lookup::found::nothing, {}};
    const auto expires_at = s->column_int(4);
    if (expires_at && *expires_at <= now) return {record_lookup::found::reserve, {}};  // expired: to take over
    reservation answer = decide(s, key, fingerprint);
    if (answer.status == reservation_status::in_flight) return {record_lookup::found::reserve, {}};
    return {record_lookup::found::answer, std::move(answer)};
}

void record_statements::insert(const record_key& key, std::string_view fingerprint, std::string_view token,
                               std::optional<std::string_view> payload, record_times t) {
    statement_use s(insert_);
    bind_identity(s, key);
    s->bind_blob(3, fingerprint);
    s->bind_text(4, token);
    s->bind(5, std::int64_t{payload ? 1 : 0});
    if (payload) s->bind_blob(6, *payload);
    s->bind(7, t.expires_at);
    s->bind(8, t.now);
    (void)s->step();
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
                                 std::string_view payload, record_times t) {
    statement_use s(complete_);
    bind_identity(s, key);
    s->bind_blob(3, fingerprint);
    s->bind_text(4, token);
    s->bind_blob(5, payload);
    s->bind(6, t.expires_at);
    s->bind(7, t.now);
    return s->step();
}

bool record_statements::release(const record_key& key, std::string_view token, std::int64_t now) {
    statement_use s(release_);
    s->bind(1, record_id(key.digest()));
    s->bind_text(2, token);
    s->bind(3, now);
    return s->step();
}

std::size_t record_statements::purge(std::int64_t now, std::size_t limit) {
    statement_use s(purge_);
    s->bind(1, now);
    s->bind(2, static_cast<std::int64_t>(std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max())));
    (void)s->step();
    return static_cast<std::size_t>(sqlite_api::sqlite3_changes64(db()));
}

}  // namespace idem::detail::sqlite
