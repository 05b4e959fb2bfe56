#include "sqlite_admin.hpp"

#include <chrono>
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
SELECT state, namespace, updated_at, expires_at, length(payload), CASE WHEN ?2 THEN payload END,
       typeof(payload) = 'blob'
FROM idem_records WHERE key_hash = ?1)";

constexpr std::string_view count_sql = R"(
SELECT count(*) FROM idem_records WHERE expires_at <= ?1)";

// Clamped: a row may hold any integer, and nanoseconds end in 2262.
time_point at(std::int64_t milliseconds) {
    return detail::saturating_time(std::chrono::milliseconds(milliseconds));
}

}  // namespace

admin_statements::admin_statements(database* db)
    : inspect_(db, inspect_sql, "inspecting a record"), count_(db, count_sql, "counting expired records") {}

std::optional<record_state> admin_statements::inspect(const record_id_type& id, bool with_payload, std::int64_t now) {
    statement_use s(inspect_);
    s->bind(1, id);
    s->bind(2, std::int64_t{with_payload ? 1 : 0});
    if (!s->step()) return std::nullopt;
    const auto state = s->column_int(0);
    const auto updated_at = s->column_int(2);
    const auto expires_at = s->column_int(3);
    const auto payload_bytes = s->column_int(4);  // NULL while in flight
    // A completed record's payload is a blob, as the store itself requires when it replays one.
    const bool payload_is_blob = s->column_int(6).value_or(0) == 1;
    // A corrupt row is named by the key hash logs print: the digest's first 8 bytes.
    if (!state || (*state != 0 && *state != 1) || !updated_at || !expires_at || (*state == 1 && !payload_is_blob))
        throw store_error(store_failure::corrupt_record, "idem: the record " + hex(std::span(id).first(8)) +
                                                             " is corrupt: it does not have the shape idem writes");
    record_state r;
    r.completed = *state == 1;
    r.created_at = at(*updated_at);
    r.expires_at = at(*expires_at);
    r.now = at(now);
    r.name_space = std::string(s->column_text(1).value_or(""));
    r.payload_bytes = static_cast<std::size_t>(payload_bytes.value_or(0));
    if (const auto payload = s->column_blob(5)) r.payload = std::string(*payload);
    return r;
}

std::size_t admin_statements::count_expired(std::int64_t cutoff) {
    statement_use s(count_);
    s->bind(1, cutoff);
    if (!s->step()) throw store_error(store_failure::other, "idem: counting expired records returned no row");
    return static_cast<std::size_t>(s->column_int(0).value_or(0));
}

}  // namespace idem::detail::sqlite
