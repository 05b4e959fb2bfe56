// The record operations on one PostgreSQL connection: one prepared statement
// per operation, binary parameters and results, kept per connection.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/record_store.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"
#include "postgresql_native.hpp"
#include "sql/fast_path.hpp"
#include "sql/record_id.hpp"

namespace idem::detail::pg {

class record_statements : public std::enable_shared_from_this<record_statements> {
public:
    // `named`: prepared once per connection; otherwise sent unnamed each time,
    // so no statement outlives a transaction (behind a transaction pooler).
    record_statements(PGconn* conn, bool named);

    // Still the connection these were prepared on (a session may reconnect).
    [[nodiscard]] bool serves(const PGconn* conn) const noexcept;
    [[nodiscard]] PGconn* conn() const noexcept { return conn_; }

    // The detached view's reserve, each statement its own transaction: a live
    // entry is answered by the same statement that would insert (a replay is
    // one read-only round trip); only an entry committed meanwhile needs a second.
    [[nodiscard]] reservation try_reserve(const record_key& key, std::string_view fingerprint, std::string_view token,
                                          duration lease);
    // The reserve in the caller's transaction: one INSERT (after `tx`'s held
    // BEGIN, in the same round trip); only when a live entry is in the way does a
    // second statement lock and read it. `tx` is null outside a runner's
    // transaction (another transaction implementation).
    [[nodiscard]] reservation try_reserve_in(const record_key& key, std::string_view fingerprint,
                                             std::string_view token, duration lease, fast_path* tx);
    // Completes the entry carrying `token`, or an absent or expired one; one statement.
    // `remember` (zero: none): the key's tombstone too, by the same statement.
    [[nodiscard]] bool complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                std::string_view payload, duration retention, duration remember);
    // Completes the entry this connection's transaction reserved (reserved_in()),
    // sent with COMMIT: fails the transaction when it completes nothing.
    [[nodiscard]] std::unique_ptr<deferred> complete_at_commit(const record_key& key, std::string_view token,
                                                               std::string_view fingerprint, std::string_view payload,
                                                               duration retention, duration remember);
    [[nodiscard]] bool release(const record_key& key, std::string_view token);

    // The one-statement form (transactional_record_store::look_up): a plain read
    // by primary key, after `tx`'s held BEGIN in the same round trip. While most
    // lookups on this connection find a record that answers the call (a burst of
    // retries), it goes before BEGIN, outside the transaction, and BEGIN is held
    // further: a replay is one round trip and sends no BEGIN at all; when it finds
    // no record, BEGIN goes alone before the work, whatever way that reaches the
    // session. The record inserted with COMMIT decides between duplicates either way.
    [[nodiscard]] record_lookup look_up(const record_key& key, std::string_view fingerprint, fast_path* tx);
    // Its record, to send with COMMIT: a plain INSERT that fails the transaction
    // when the key has a record by then (store_error(lost_race), SQLSTATE 23505 as its native code
    // when a concurrent transaction committed it first).
    [[nodiscard]] std::unique_ptr<deferred> insert_at_commit(const record_key& key, std::string_view fingerprint,
                                                             std::optional<std::string_view> payload, duration span,
                                                             duration remember);
    // The same record, sent now.
    void insert(const record_key& key, std::string_view fingerprint, std::optional<std::string_view> payload,
                duration span, duration remember);

    // Whether this connection reserved `key` with `token` in the transaction `serial`.
    [[nodiscard]] bool reserved_in(std::uint64_t serial, const record_key& key, std::string_view token) const noexcept;

    [[nodiscard]] std::optional<record_state> inspect(const record_id_type& id, bool with_payload);
    [[nodiscard]] std::vector<listed_record> recent(std::string_view name_space, std::size_t limit);
    // The completed rows of `name_space` written at or after `since`, newest first,
    // at most `limit`; found through the expires_at index when the planner finds it cheaper.
    [[nodiscard]] std::vector<listed_record> completed_since(std::string_view name_space,
                                                             const std::optional<scope_id_type>& owner,
                                                             time_point since, std::size_t limit);
    [[nodiscard]] forget_result forget(const record_id_type& id, bool force);
    // Deletes the key's tombstone; when it would have been forgotten, or nullopt when there was none.
    [[nodiscard]] std::optional<record_state> forget_tombstone(const record_id_type& id);
    [[nodiscard]] std::size_t count_expired(duration older_than);
    // Deletes up to `limit` rows expired at least `older_than` ago, then tombstones
    // whose window ended that long ago (each its own statement); returns how many.
    [[nodiscard]] std::size_t purge(std::size_t limit, duration older_than);
    // One batch of store_admin::rewrite_payloads: a read, then the writes in one transaction.
    [[nodiscard]] rewrite_progress rewrite_payloads(const std::optional<record_id_type>& after, std::size_t limit,
                                                    const payload_rewrite& rewrite);

private:
    class at_commit;
    class completion;
    class insertion;

    // Queues `tx`'s held BEGIN, prepared on this connection like the statements.
    void queue_begin(pipeline& p, fast_path& tx);

    [[nodiscard]] bool run_checked(prepared_statement& s, const parameters& values);
    // The live entry a reserve found in its way, locked; nullopt when it is gone or
    // expired by now. store_error(unsupported) outside READ COMMITTED.
    [[nodiscard]] std::optional<reservation> locked_entry(const record_key& key, std::string_view fingerprint);
    [[nodiscard]] static store_error changing(const record_key& key);
    // recent()'s rows (and completed_since()'s), of `name_space`.
    [[nodiscard]] static std::vector<listed_record> listed(const result& r, std::string_view name_space);
    // The statement's name on this connection; empty when statements go unnamed.
    [[nodiscard]] std::string name(std::string_view operation) const;
    // Whether most of the last 8 lookups on this connection that decided
    // between a replay and a first run found a record that answers the call.
    [[nodiscard]] bool mostly_answered() const noexcept { return std::popcount(answered_) > 4; }

    PGconn* conn_;
    int backend_pid_;
    std::string prefix_;
    prepared_statement reserve_, reserve_in_, lookup_, look_up_, insert_, complete_, complete_at_commit_, release_,
        inspect_, recent_, completed_since_, forget_, forget_tombstone_, count_expired_, purge_, forget_ended_,
        payloads_after_, rewrite_payload_;
    // The transaction control the fast path sends in its pipelines: parsed once
    // per connection rather than per transaction. BEGIN's text is the runner's
    // (these statements belong to one runner), known at its first use.
    statement_text begin_text_{nullptr, {}, "BEGIN"};
    prepared_statement begin_, commit_;
    // The last reservation made in a runner's transaction on this connection.
    std::uint64_t reserved_serial_ = 0;
    std::array<std::byte, 32> reserved_digest_{};
    std::string reserved_token_;
    std::uint8_t answered_ = 0;  // one bit per such lookup, the latest lowest: 1 when it answered
};

// How the statements' answer rows are read: store_error(corrupt_record) for a
// malformed row, store_error(unsupported) below READ COMMITTED.
// A statement's (isolation level, done) row: whether it did its work.
[[nodiscard]] bool done_at_read_committed(const result& r, std::string_view what);
// The reserve's row: reserved (with `token`), the live entry's answer, or
// nullopt when an entry committed meanwhile must be read locked.
[[nodiscard]] std::optional<reservation> reserve_answer(const result& row, const record_key& key,
                                                        std::string_view fingerprint, std::string_view token);
// The locked read's row: the live entry's answer; nullopt when it is gone or expired.
[[nodiscard]] std::optional<reservation> locked_answer(const result& row, const record_key& key,
                                                       std::string_view fingerprint);
// The one-statement form's lookup row; `tells_level`: the level it ran at is
// the transaction's (store_error(unsupported) unless READ COMMITTED).
[[nodiscard]] record_lookup looked_up(const result& row, const record_key& key, std::string_view fingerprint,
                                      bool tells_level);
// Throws store_error(lost_race, "23505") when `r` failed on idem_records' primary key.
void raise_if_taken(const result& r);
// The inspect row; nullopt when there is none.
[[nodiscard]] std::optional<record_state> inspected(const result& row, bool with_payload);

// The readable text of a key part: PostgreSQL text cannot hold NUL, so NULs
// become U+FFFD there (the row is found by its hash, never by this text).
[[nodiscard]] std::string_view readable(std::string_view part, std::string& scratch);

}  // namespace idem::detail::pg
