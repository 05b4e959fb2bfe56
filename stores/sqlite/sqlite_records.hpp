// The record operations on one SQLite connection, inside a transaction the
// caller opened: one prepared statement per operation, kept per connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "idem/record_store.hpp"
#include "idem/transactional_record_store.hpp"
#include "sql/record_times.hpp"
#include "sqlite_native.hpp"

namespace idem::detail::sqlite {

class record_statements {
public:
    explicit record_statements(database* db);

    [[nodiscard]] database* db() const noexcept { return reserve_.db(); }

    // Inserts a reservation, or takes over an expired entry, in one statement;
    // only when a live entry is in the way does a second one read it.
    [[nodiscard]] reservation try_reserve(const record_key& key, std::string_view fingerprint, std::string_view token,
                                          record_times t);
    // Reads the entry without a write lock: the answer when it is live (in flight,
    // completed or a mismatch, true as of this read); nullopt when it is absent or
    // expired and only a reservation can tell.
    [[nodiscard]] std::optional<reservation> peek(const record_key& key, std::string_view fingerprint,
                                                  std::int64_t now);
    // The one-statement form (transactional_record_store::look_up), in a
    // transaction holding the write lock.
    [[nodiscard]] record_lookup look_up(const record_key& key, std::string_view fingerprint, std::int64_t now);
    // Its record: completed with `payload`, or in flight without; a plain INSERT.
    // `forget_at`: the key's tombstone too, until then.
    void insert(const record_key& key, std::string_view fingerprint, std::string_view token,
                std::optional<std::string_view> payload, record_times t, std::optional<std::int64_t> forget_at);
    // Completes the entry carrying `token`, or an absent/expired one; one statement,
    // and one more for the tombstone (`forget_at`) when it completed.
    [[nodiscard]] bool complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                std::string_view payload, record_times t, std::optional<std::int64_t> forget_at);
    [[nodiscard]] bool release(const record_key& key, std::string_view token, std::int64_t now);
    // Deletes up to `limit` expired rows, then tombstones whose window ended; returns how many.
    [[nodiscard]] std::size_t purge(std::int64_t now, std::size_t limit);

private:
    [[nodiscard]] reservation read_live(const record_key& key, std::string_view fingerprint, std::int64_t now);
    // The answer of `key`'s live tombstone (expired or fingerprint_mismatch); nullopt when none.
    [[nodiscard]] std::optional<reservation> remembered(const record_key& key, std::string_view fingerprint,
                                                        std::int64_t now);
    void remember(const record_key& key, std::string_view fingerprint, std::int64_t forget_at);
    // The decision for the row `s` stands on (bound and stepped), checked for corruption.
    [[nodiscard]] static reservation decide(statement_use& s, const record_key& key, std::string_view fingerprint);

    statement reserve_;
    statement lookup_;
    statement insert_;
    statement complete_;
    statement release_;
    statement purge_;
    statement remember_;
    statement remembered_;
    statement forget_ended_;
};

}  // namespace idem::detail::sqlite
