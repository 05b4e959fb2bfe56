// idem/record_store.hpp: the contract every record store keeps.
//
// A store holds one entry per record key: reserved (in flight, until its lease
// ends) or completed (with an opaque payload, until its retention ends). An
// expired entry is absent. The executor drives a store; you can too:
//
//   auto r = store.try_reserve(key, fingerprint, std::chrono::minutes(1));
//   if (r.status == idem::reservation_status::reserved) {
//       std::string result = do_the_work();
//       store.complete(key, r.token, fingerprint, result, std::chrono::hours(24));
//   } else if (r.status == idem::reservation_status::completed) {
//       return r.payload;  // the first run's result, byte for byte
//   }
//
// Payloads are bytes carried in std::string (NULs allowed) and may be empty.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/record_key.hpp"

namespace idem {

enum class reservation_status {
    reserved,              // the caller owns the key: run, then complete or release
    in_flight,             // another run holds the key and has not finished
    completed,             // a run finished: payload holds its stored result
    fingerprint_mismatch,  // the key is live for other content
    expired,               // the result is gone, but the key is remembered for this content: do not run
};

[[nodiscard]] IDEM_API std::string_view to_string(reservation_status status) noexcept;

struct IDEM_API reservation {
    reservation_status status;
    std::string token;    // reserved: the fencing token that complete and release need
    std::string payload;  // completed: the stored result

    [[nodiscard]] static reservation reserved(std::string token) {
        return {reservation_status::reserved, std::move(token), {}};
    }
    [[nodiscard]] static reservation completed(std::string payload) {
        return {reservation_status::completed, {}, std::move(payload)};
    }
    [[nodiscard]] static reservation in_flight() { return {reservation_status::in_flight, {}, {}}; }
    [[nodiscard]] static reservation fingerprint_mismatch() {
        return {reservation_status::fingerprint_mismatch, {}, {}};
    }
    [[nodiscard]] static reservation expired() { return {reservation_status::expired, {}, {}}; }
};

// What a store can promise. The contract suite (idem/contract.hpp) picks its
// scenarios by them, and the executor joins a caller's transaction only with a
// store that says joins_transactions.
struct IDEM_API store_traits {
    bool atomic_reserve = true;       // concurrent reserves of one key: exactly one wins
    bool joins_transactions = false;  // a transactional_record_store that joins the caller's transaction
    bool server_clock = false;        // expiry decided by the server's clock
    bool self_expiring = false;       // the server drops expired entries itself; purge has nothing to do
    bool remembers = false;           // keeps tombstones: complete() and insert() take a remembered window
};

class IDEM_API record_store {
public:
    virtual ~record_store() = default;

    // One atomic step: reserved (fresh random token), in_flight, completed
    // (with payload) or fingerprint_mismatch (live entry for another fingerprint).
    // With no live entry, a tombstone of the key (see complete's `remember`)
    // answers expired for its fingerprint, fingerprint_mismatch for another.
    [[nodiscard]] reservation try_reserve(const record_key& key, std::string_view fingerprint, duration lease);

    // Compare-and-set on the token: stores the payload while the entry carries
    // `token` and is not completed, or when the entry is gone. Keeps it for `retention`.
    // `remember` (zero: none; else longer than retention, and the store must say
    // `remembers`): when it stores the payload, it also keeps a tombstone (the key
    // hash, a digest of the fingerprint, no payload) until `remember` from now.
    [[nodiscard]] bool complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                std::string_view payload, duration retention, duration remember = duration::zero());

    // Removes the entry while it carries `token` and is not completed.
    [[nodiscard]] bool release(const record_key& key, std::string_view token);

    // Deletes up to `limit` expired entries; never a live one. Returns how many.
    std::size_t purge_expired(std::size_t limit = 1000);

    [[nodiscard]] virtual store_traits traits() const noexcept { return {}; }

protected:
    virtual reservation do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) = 0;
    // `remember` is zero unless the store's traits say `remembers`.
    virtual bool do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                             std::string_view payload, duration retention, duration remember) = 0;
    virtual bool do_release(const record_key& key, std::string_view token) = 0;
    virtual std::size_t do_purge_expired(std::size_t limit) = 0;
};

namespace detail {
// The argument checks every store shares (std::invalid_argument); a duration
// must be positive and at most max_duration.
IDEM_API void check_fingerprint(std::string_view fingerprint);
IDEM_API void check_token(std::string_view token);
IDEM_API void check_duration(duration d, const char* what);
// A remembered window: zero, or longer than `retention` and at most max_duration,
// on a store that remembers (std::invalid_argument otherwise).
IDEM_API void check_remember(duration remember, duration retention, const store_traits& traits);
// A tombstone's fingerprint: the first 16 bytes of the fingerprint's SHA-256.
inline constexpr std::size_t fingerprint_digest_bytes = 16;
[[nodiscard]] IDEM_API std::string fingerprint_digest(std::string_view fingerprint);
// A fresh random fencing token: 32 lowercase hex characters.
[[nodiscard]] IDEM_API std::string new_token();
// The token of a record a transaction writes whole (insert): no one holds
// it, so no release or completion may name it (check_token refuses it), and
// one byte instead of a random token's 32 keeps every record row shorter.
inline constexpr std::string_view unheld_token = "-";
}  // namespace detail

}  // namespace idem
