// The record operations on one MariaDB session, inside a transaction the
// caller opened: reserve, complete, release and the one-statement form's read
// and insert, and what an operator does (store_admin). SOCI's mysql backend
// sends each statement's values in its text: nothing is prepared, nothing is
// kept per connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "idem/record_store.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"
#include "mariadb_deferred.hpp"
#include "sql/record_id.hpp"
#include "sql/record_times.hpp"

namespace soci {
class session;
}

namespace idem::detail::mariadb {

// Inserts a reservation, or takes over an expired entry, under the row's lock;
// a live entry (or a live tombstone) answers instead.
[[nodiscard]] reservation try_reserve(soci::session& sql, const record_key& key, std::string_view fingerprint,
                                      std::string_view token, record_times t);
// Completes the entry carrying `token`, or an absent or expired one, under its
// lock; `forget_at`: the key's tombstone too, until then.
[[nodiscard]] bool complete(soci::session& sql, const record_key& key, std::string_view token,
                            std::string_view fingerprint, std::string_view payload, record_times t,
                            std::optional<std::int64_t> forget_at);
[[nodiscard]] bool release(soci::session& sql, const record_key& key, std::string_view token, std::int64_t now);
// The one-statement form (transactional_record_store::look_up): a plain read
// of what is committed; the record inserted before COMMIT decides between
// duplicates (a second one fails on the primary key: store_error(lost_race)).
// `begin`, when not null, is the transaction's held-back START TRANSACTION:
// sent ahead of the read, both answers read after (mariadb_pipeline.hpp).
[[nodiscard]] record_lookup look_up(soci::session& sql, const record_key& key, std::string_view fingerprint,
                                    std::int64_t now, const char* begin);
void insert(soci::session& sql, const record_key& key, std::string_view fingerprint, std::string_view token,
            std::optional<std::string_view> payload, record_times t, std::optional<std::int64_t> forget_at);
// The same insert, its statements left for the runner to send with COMMIT,
// their values inlined as hexadecimal literals: for results below
// `deferred_payload_limit` (a larger one goes the ordinary way, measured
// against max_allowed_packet, its round trip small beside its transfer).
constexpr std::size_t deferred_payload_limit = 64 * 1024;
[[nodiscard]] std::unique_ptr<deferred_write> insert_at_commit(const record_key& key, std::string_view fingerprint,
                                                               std::string_view token,
                                                               std::optional<std::string_view> payload, record_times t,
                                                               std::optional<std::int64_t> forget_at);
// Deletes up to `limit` rows expired by `cutoff`, then tombstones whose window
// ended by then, passing over rows other transactions hold; returns how many.
[[nodiscard]] std::size_t purge(soci::session& sql, std::int64_t cutoff, std::size_t limit);

[[nodiscard]] std::optional<record_state> inspect(soci::session& sql, const record_id_type& id, bool with_payload,
                                                  std::int64_t now);
[[nodiscard]] std::vector<listed_record> recent(soci::session& sql, std::string_view name_space, std::size_t limit,
                                                std::int64_t now);
[[nodiscard]] std::vector<listed_record> completed_since(soci::session& sql, std::string_view name_space,
                                                         const std::optional<scope_id_type>& owner, std::int64_t since,
                                                         std::size_t limit, std::int64_t now);
// Deletes the row of `id` unless it is in flight and `force` is not set; the
// row is locked first, so nothing changes between the look and the delete.
[[nodiscard]] forget_result forget(soci::session& sql, const record_id_type& id, bool force, std::int64_t now);
[[nodiscard]] std::size_t count_expired(soci::session& sql, std::int64_t cutoff);
[[nodiscard]] rewrite_progress rewrite_payloads(soci::session& sql, const std::optional<record_id_type>& after,
                                                std::size_t limit, const payload_rewrite& rewrite);

}  // namespace idem::detail::mariadb
