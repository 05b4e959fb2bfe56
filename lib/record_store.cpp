#include "idem/record_store.hpp"

#include <pthread.h>

#include <array>
#include <span>
#include <stdexcept>

#include "internal/crypto.hpp"

namespace idem {

std::string_view to_string(reservation_status status) noexcept {
    switch (status) {
        case reservation_status::reserved: return "reserved";
        case reservation_status::in_flight: return "in_flight";
        case reservation_status::completed: return "completed";
        case reservation_status::fingerprint_mismatch: return "fingerprint_mismatch";
        case reservation_status::expired: return "expired";
    }
    return "unknown";
}

reservation record_store::try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    detail::check_fingerprint(fingerprint);
    detail::check_duration(lease, "lease");
    return do_try_reserve(key, fingerprint, lease);
}

bool record_store::complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                            std::string_view payload, duration retention, duration remember) {
    detail::check_token(token);
    detail::check_fingerprint(fingerprint);
    detail::check_duration(retention, "retention");
    detail::check_remember(remember, retention, traits());
    return do_complete(key, token, fingerprint, payload, retention, remember);
}

bool record_store::release(const record_key& key, std::string_view token) {
    detail::check_token(token);
    return do_release(key, token);
}

std::size_t record_store::purge_expired(std::size_t limit) {
    if (limit == 0) throw std::invalid_argument("idem: purge limit must be positive");
    return do_purge_expired(limit);
}

namespace detail {

void check_fingerprint(std::string_view fingerprint) {
    if (fingerprint.empty()) throw std::invalid_argument("idem: fingerprint is empty");
    if (fingerprint.size() > 1024) throw std::invalid_argument("idem: fingerprint is longer than 1024 bytes");
}

void check_token(std::string_view token) {
    if (token.empty()) throw std::invalid_argument("idem: token is empty");
    if (token.size() > 128) throw std::invalid_argument("idem: token is longer than 128 bytes");
    if (token == unheld_token) throw std::invalid_argument("idem: token \"-\" is no reservation's token");
}

void check_duration(duration d, const char* what) {
    if (d <= duration::zero()) throw std::invalid_argument(std::string("idem: ") + what + " must be positive");
    if (d > max_duration)
        throw std::invalid_argument(std::string("idem: ") + what + " must be at most 100 years (idem::max_duration)");
}

void check_remember(duration remember, duration retention, const store_traits& traits) {
    if (remember == duration::zero()) return;
    if (remember < duration::zero()) throw std::invalid_argument("idem: remember must not be negative");
    if (remember <= retention) throw std::invalid_argument("idem: remember must be longer than the retention");
    if (remember > max_duration)
        throw std::invalid_argument("idem: remember must be at most 100 years (idem::max_duration)");
    if (!traits.remembers) throw std::invalid_argument("idem: this store keeps no tombstones (traits().remembers)");
}

std::string fingerprint_digest(std::string_view fingerprint) {
    const auto d = sha256(fingerprint);
    return std::string(reinterpret_cast<const char*>(d.data()), fingerprint_digest_bytes);
}

namespace {

constexpr std::size_t token_bytes = 16;
thread_local std::array<std::byte, token_bytes * 256> token_pool{};
thread_local std::size_t token_pool_used = token_pool.size();

// A forked child must not hand out the tokens its parent already drew.
void discard_token_pool_in_child() {
    token_pool_used = token_pool.size();
}
const int fork_guard = pthread_atfork(nullptr, nullptr, discard_token_pool_in_child);

}  // namespace

std::string new_token() {
    // Drawn from a per-thread buffer refilled from the CSPRNG: one RAND_bytes call
    // per 256 tokens instead of one per token.
    (void)fork_guard;
    if (token_pool_used == token_pool.size()) {
        random_bytes(token_pool);
        token_pool_used = 0;
    }
    const std::span<const std::byte> token(token_pool.data() + token_pool_used, token_bytes);
    token_pool_used += token_bytes;
    return hex(token);
}

}  // namespace detail
}  // namespace idem
