// idem/store_admin.hpp: the operator's view of a SQL record store: schema,
// purge job, a look at one record, a namespace's latest or what it completed
// since a time, and deleting one record by hand. The `idem` command drives it;
// a service can too (e.g. a purge thread):
//
//   idem::store_admin& admin = store;  // sqlite_store, postgresql_store
//   admin.migrate();
//   while (admin.purge_batch(1000, std::chrono::hours(1)) > 0) {}  // expired for over an hour
//   if (auto r = admin.inspect(key.digest(), false)) print(r->completed, r->expires_at);
//   for (const idem::listed_record& l : admin.recent("payments.capture", 20)) print(l.key_hash, l.state.completed);
//   const auto since = idem::clock::system()->now() - std::chrono::hours(1);
//   for (const idem::listed_record& l : admin.completed_since("payments.capture", since, 100)) print(l.key_hash, true);
//   auto acme = admin.completed_since("payments.capture", idem::scope::tenant("acme"), since, 100);  // one tenant's
//   if (admin.forget(key.digest(), false).outcome == idem::forget_outcome::refused_in_flight) ask_again();
//
// Every built-in store, the memory and Redis ones too, is a record_inspector:
// a look at one record by its key.
//
//   idem::record_inspector& any_store = store;  // memory_store, redis_store, sqlite_store, postgresql_store
//   if (auto r = any_store.inspect(key, false); r && !r->expired()) print(r->completed, r->expires_at);
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/record_key.hpp"
#include "idem/scope.hpp"

namespace idem {

struct IDEM_API record_state {
    bool completed = false;
    time_point created_at = {};  // when the current reservation (or completion) was written
    time_point expires_at = {};  // end of the lease (in flight) or of the retention (completed)
    time_point now = {};         // the store's clock when it was read (the server's, on PostgreSQL)
    // The operation the record is for, for operators; never used to find it.
    // Rows hold no scope or key text: keys often carry customer or order ids.
    std::string name_space = {};
    std::size_t payload_bytes = 0;
    std::optional<std::string> payload = {};  // only when asked for

    [[nodiscard]] bool expired() const noexcept { return expires_at <= now; }
};

// One row of store_admin::recent.
struct IDEM_API listed_record {
    std::array<std::byte, 16> key_hash{};  // the digest's first 16 bytes: the row's primary key
    record_state state;                    // without the payload
};

enum class forget_outcome {
    deleted,            // the record is gone; a request with its key runs anew
    tombstone_deleted,  // no record, but the key was remembered (its tombstone is gone): a request runs anew
    not_found,          // no record has that digest (nothing changed)
    refused_in_flight,  // reserved and its lease not over: kept (nothing changed)
};

struct IDEM_API forget_result {
    forget_outcome outcome = forget_outcome::not_found;
    record_state record;  // the record deleted or kept, without the payload; empty when not_found
    // The key's tombstone (profile_options::remember) was deleted too; with
    // tombstone_deleted, record.expires_at is when it would have been forgotten.
    bool tombstone = false;
};

// A completed record's stored payload, as rewrite_payloads hands it over.
struct IDEM_API stored_payload {
    std::array<std::byte, 16> key_hash{};  // the digest's first 16 bytes: the row's primary key
    std::string_view payload;
};

// What one batch of rewrite_payloads did.
struct IDEM_API rewrite_progress {
    std::size_t read = 0;       // completed records read
    std::size_t rewritten = 0;  // whose payload was replaced
    // The key hash the next batch starts after; nullopt once every record was read.
    std::optional<std::array<std::byte, 16>> next;
};

// Given a completed record's payload, the payload to store instead, or nullopt to keep it.
using payload_rewrite = std::function<std::optional<std::string>(const stored_payload&)>;

// recent() and completed_since() list at most this many records.
inline constexpr std::size_t max_recent_records = 1000;

// A look at one record by its key, on any store: find it, and tell whether it
// exists (found and not expired()). What a store keeps decides what it can
// report: the memory and Redis stores keep no write time (created_at is zero),
// and Redis drops an expired record at once, while the others report it as
// expired until a purge (or the memory store's sweep) removes it.
class IDEM_API record_inspector {
public:
    virtual ~record_inspector() = default;

    // `key`'s record: state, expiry, namespace, payload size, and the payload
    // itself when `with_payload`; nullopt when the store holds none. Reads only.
    [[nodiscard]] virtual std::optional<record_state> inspect(const record_key& key, bool with_payload) = 0;
};

class IDEM_API store_admin : public record_inspector {
public:
    virtual ~store_admin() = default;

    // Applies pending migrations; returns their names (empty when none was pending).
    // Idempotent and safe to run from several processes at once.
    virtual std::vector<std::string> migrate() = 0;

    // The record whose digest (record_key::digest()) is `digest`, expired or
    // not. SQL stores key their rows by the digest's first 16 bytes, and find a
    // record by those alone too (the primary key as a table shows it);
    // std::invalid_argument for any other length.
    [[nodiscard]] virtual std::optional<record_state> inspect(std::span<const std::byte> digest, bool with_payload) = 0;
    // record_inspector's look, through the key's digest.
    [[nodiscard]] std::optional<record_state> inspect(const record_key& key, bool with_payload) override {
        return inspect(key.digest(), with_payload);
    }

    // The `limit` (1 to max_recent_records) records of `name_space` written last,
    // newest first (by created_at; a completion rewrites it), expired ones too.
    // Rows are not indexed by namespace: this reads every row of the table
    // once (docs/cli.md says what that costs). std::invalid_argument for a
    // limit out of range or a namespace record_key would refuse.
    [[nodiscard]] virtual std::vector<listed_record> recent(std::string_view name_space, std::size_t limit) = 0;

    // The `limit` (1 to max_recent_records) records of `name_space` completed
    // at or after `since` (by created_at: a completion rewrites it), newest
    // first, expired ones too; never one in flight. Read through the expires_at
    // index: a record completed since `since` expires after it, so only rows
    // expiring after `since` are read (every live row, roughly; not those that
    // expired before it). std::invalid_argument as for recent().
    [[nodiscard]] std::vector<listed_record> completed_since(std::string_view name_space, time_point since,
                                                             std::size_t limit) {
        return completed_since(name_space, std::nullopt, since, limit);
    }
    // The same, only the records of `owner`'s scope when it is set. A row keeps
    // its scope's id (the first 8 bytes of the SHA-256 of scope::text()), never
    // its text; rows written before that column existed have none and are
    // listed only without an owner.
    [[nodiscard]] virtual std::vector<listed_record> completed_since(std::string_view name_space,
                                                                     const std::optional<scope>& owner,
                                                                     time_point since, std::size_t limit) = 0;

    // Deletes the record whose digest (or its first 16 bytes, as for inspect) is
    // `digest`: for a key that is stuck or was used by mistake. A completed or
    // expired record is deleted; one in flight (reserved, its lease not over) is
    // kept and reported unless `force`, since its request may still be running
    // and a retry after the delete runs the operation a second time. The look and
    // the delete are one step (a transaction, or one statement that re-checks
    // the row under its lock): an expired record a retry takes over meanwhile is
    // kept. A deleted record's tombstone (a remembered key: profile_options::remember)
    // goes with it, and a tombstone alone is deleted too (tombstone_deleted): an
    // operator's explicit choice to let the key run again. A record kept in flight
    // keeps its tombstone. std::invalid_argument for any other digest length.
    [[nodiscard]] virtual forget_result forget(std::span<const std::byte> digest, bool force) = 0;

    // Rows expired at least `older_than` ago, and tombstones whose window ended that long ago.
    [[nodiscard]] virtual std::size_t count_expired(duration older_than) = 0;

    // Deletes up to `limit` rows expired at least `older_than` ago, in one short
    // transaction; never a live row. Concurrent purges delete each row once.
    // Tombstones whose window ended (at least `older_than` ago) count as rows:
    // records first, then tombstones, `limit` in all.
    virtual std::size_t purge_batch(std::size_t limit, duration older_than) = 0;

    // One batch of a walk over every completed record's payload, in key-hash
    // order (idem::reseal drives it): reads up to `limit` completed records whose
    // key hash follows `after` (nullopt: from the first), expired ones too, and
    // stores the payload `rewrite` returns for each, all in one short
    // transaction. A payload changed between the read and the write (the key
    // expired and ran again) is left as the new run wrote it. When `rewrite`
    // throws, nothing of the batch is written. std::invalid_argument for a zero
    // limit; store_error(unsupported) from a store that does not implement it
    // (the built-in SQL stores do).
    virtual rewrite_progress rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after, std::size_t limit,
                                              const payload_rewrite& rewrite);
};

}  // namespace idem
