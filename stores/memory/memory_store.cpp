#include "idem/memory_store.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

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
        time_point expires_at;
    };
    // When an entry is due to expire: a min-heap of (time, key), pushed at every
    // put and never updated in place (no node to allocate or unlink per call).
    // A popped pair whose entry has since moved on, or is gone, is stale: skipped.
    struct due {
        time_point at;
        digest key;
        bool operator>(const due& other) const noexcept { return at > other.at; }
    };

    mutable std::mutex mutex;
    std::unordered_map<digest, entry, digest_hash> entries;
    std::vector<due> by_expiry;  // heap ordered by std::greater: earliest first

    // Finds a live entry; an expired one is erased on the spot, as absent.
    entry* live(const digest& key, time_point now) {
        auto it = entries.find(key);
        if (it == entries.end()) return nullptr;
        if (it->second.expires_at <= now) {
            entries.erase(it);
            return nullptr;
        }
        return &it->second;
    }

    entry& put(const digest& key, time_point expires_at) {
        entry& e = entries[key];
        e.expires_at = expires_at;
        by_expiry.push_back({expires_at, key});
        std::push_heap(by_expiry.begin(), by_expiry.end(), std::greater<>{});
        // Stale pairs wait for their time; calls that release or complete
        // within a long lease would pile them up, so past twice the entries
        // the heap is rebuilt from the entries (amortized: one rebuild per
        // as many puts as there are entries).
        if (by_expiry.size() > 2 * entries.size() + 64) rebuild();
        return e;
    }

    void rebuild() {
        by_expiry.clear();
        for (const auto& [k, v] : entries) by_expiry.push_back({v.expires_at, k});
        std::make_heap(by_expiry.begin(), by_expiry.end(), std::greater<>{});
    }

    // Removes up to `limit` expired entries, earliest first; how many. Stale
    // pairs popped on the way cost nothing extra over time: each put pushes one.
    std::size_t sweep(time_point now, std::size_t limit) {
        std::size_t removed = 0;
        while (removed < limit && !by_expiry.empty() && by_expiry.front().at <= now) {
            std::pop_heap(by_expiry.begin(), by_expiry.end(), std::greater<>{});
            const due d = by_expiry.back();
            by_expiry.pop_back();
            auto it = entries.find(d.key);
            // An entry put again since carries a later time; one due now has expired.
            if (it != entries.end() && it->second.expires_at <= now) {
                entries.erase(it);
                ++removed;
            }
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
    s.entries.erase(key.digest());  // its due pair goes stale
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
