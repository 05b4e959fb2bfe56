#include "idem/memory_store.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "internal/saturating_time.hpp"

namespace idem {
namespace {

constexpr std::size_t shard_count = 64;
// Expired entries a call sweeps from its shard before its own work: bounded, so
// no call pays for a large backlog, yet the store never grows without bound.
constexpr std::size_t sweep_per_call = 4;

using digest = std::array<std::byte, 32>;

struct digest_hash {
    std::size_t operator()(const digest& d) const noexcept {
        std::size_t h;
        std::memcpy(&h, d.data(), sizeof h);  // already uniformly distributed
        return h;
    }
};

}  // namespace

struct memory_store::shard {
    struct entry {
        std::string token;
        std::string fingerprint;
        std::string payload;
        bool completed = false;
        std::multimap<time_point, digest>::iterator expiry;
    };

    mutable std::mutex mutex;
    std::unordered_map<digest, entry, digest_hash> entries;
    std::multimap<time_point, digest> by_expiry;

    // Finds a live entry; an expired one is erased on the spot, as absent.
    entry* live(const digest& key, time_point now) {
        auto it = entries.find(key);
        if (it == entries.end()) return nullptr;
        if (it->second.expiry->first <= now) {
            by_expiry.erase(it->second.expiry);
            entries.erase(it);
            return nullptr;
        }
        return &it->second;
    }

    entry& put(const digest& key, time_point expires_at) {
        auto [it, inserted] = entries.try_emplace(key);
        if (!inserted) by_expiry.erase(it->second.expiry);
        it->second.expiry = by_expiry.emplace(expires_at, key);
        return it->second;
    }

    std::size_t sweep(time_point now, std::size_t limit) {
        std::size_t removed = 0;
        while (removed < limit && !by_expiry.empty() && by_expiry.begin()->first <= now) {
            entries.erase(by_expiry.begin()->second);
            by_expiry.erase(by_expiry.begin());
            ++removed;
        }
        return removed;
    }
};

memory_store::memory_store(std::shared_ptr<const clock> time)
    : clock_(std::move(time)), shards_(std::make_unique<shard[]>(shard_count)) {}

memory_store::~memory_store() = default;

memory_store::shard& memory_store::shard_for(const record_key& key) const {
    // The digest's last byte picks the shard; its first bytes feed the hash map.
    return shards_[std::to_integer<std::size_t>(key.digest()[31]) % shard_count];
}

std::size_t memory_store::size() const {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count; ++i) {
        std::lock_guard lock(shards_[i].mutex);
        total += shards_[i].entries.size();
    }
    return total;
}

reservation memory_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    std::string token = detail::new_token();
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call);
    if (const auto* existing = s.live(key.digest(), now)) {
        if (existing->fingerprint != fingerprint) return reservation::fingerprint_mismatch();
        if (existing->completed) return reservation::completed(existing->payload);
        return reservation::in_flight();
    }
    auto& fresh = s.put(key.digest(), detail::saturating_add(now, lease));
    fresh.token = token;
    fresh.fingerprint = fingerprint;
    fresh.payload.clear();
    fresh.completed = false;
    return reservation::reserved(std::move(token));
}

bool memory_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                               std::string_view payload, duration retention) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call);
    if (const auto* existing = s.live(key.digest(), now)) {
        if (existing->completed || existing->token != token) return false;
    }
    auto& done = s.put(key.digest(), detail::saturating_add(now, retention));
    done.token = token;
    done.fingerprint = fingerprint;
    done.payload = payload;
    done.completed = true;
    return true;
}

bool memory_store::do_release(const record_key& key, std::string_view token) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call);
    const auto* existing = s.live(key.digest(), now);
    if (existing == nullptr || existing->completed || existing->token != token) return false;
    s.by_expiry.erase(existing->expiry);
    s.entries.erase(key.digest());
    return true;
}

std::size_t memory_store::do_purge_expired(std::size_t limit) {
    std::size_t removed = 0;
    for (std::size_t i = 0; i < shard_count && removed < limit; ++i) {
        std::lock_guard lock(shards_[i].mutex);
        removed += shards_[i].sweep(clock_->now(), limit - removed);
    }
    return removed;
}

}  // namespace idem
