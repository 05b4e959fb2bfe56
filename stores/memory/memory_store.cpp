#include "idem/memory_store.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
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
        time_point due_at;  // the time of this entry's pending pair in by_expiry: never after expires_at
    };
    // When entries are due to be looked at: a min-heap of (time, key). Each
    // entry has one pending pair, at or before its expiry; a pair popped early
    // (the entry was completed with a longer retention since) is pushed again
    // at the entry's expiry, so a completion within the lease pushes nothing.
    // A popped pair whose entry is gone, or has another pending pair, is stale:
    // skipped.
    struct due {
        time_point at;
        digest key;
        bool operator>(const due& other) const noexcept { return at > other.at; }
    };
    using map = std::unordered_map<digest, entry, digest_hash>;

    mutable std::mutex mutex;
    map entries;
    std::vector<due> by_expiry;  // heap ordered by std::greater: earliest first
    // Nodes of erased entries, kept for the next ones with their strings'
    // buffers: an entry then costs no allocation.
    std::vector<map::node_type> spare;

    // The entry for `key`, created when absent: fresh says so. A fresh entry
    // is empty and has no pending pair yet.
    // One lookup either way: a spare node offered to the map comes back when
    // the key is there already.
    std::pair<entry*, bool> find_or_add(const digest& key) {
        if (spare.empty()) {
            auto [it, fresh] = entries.try_emplace(key);
            return {&it->second, fresh};
        }
        spare.back().key() = key;
        auto added = entries.insert(std::move(spare.back()));
        spare.pop_back();
        if (!added.inserted) spare.push_back(std::move(added.node));
        return {&added.position->second, added.inserted};
    }

    void erase(map::iterator it) {
        if (spare.size() == spare_limit) {
            entries.erase(it);
            return;
        }
        map::node_type node = entries.extract(it);
        entry& e = node.mapped();
        e.token.clear();
        e.fingerprint.clear();
        // A large result's buffer is not worth keeping.
        if (e.payload.capacity() > kept_payload_capacity) std::string().swap(e.payload);
        e.payload.clear();
        spare.push_back(std::move(node));
    }

    // Sets when the entry expires, keeping its pending pair (if it has one:
    // `pending`) at or before then.
    void expire(const digest& key, entry& e, time_point at, bool pending) {
        e.expires_at = at;
        if (pending && e.due_at <= at) return;
        e.due_at = at;
        by_expiry.push_back({at, key});
        std::push_heap(by_expiry.begin(), by_expiry.end(), std::greater<>{});
        // Stale pairs wait for their time; calls that release or shorten
        // entries within a long lease would pile them up, so past twice the
        // entries the heap is rebuilt from the entries (amortized: one rebuild
        // per as many pushes as there are entries).
        if (by_expiry.size() > 2 * entries.size() + 64) rebuild();
    }

    void rebuild() {
        by_expiry.clear();
        for (auto& [k, v] : entries) {
            v.due_at = v.expires_at;
            by_expiry.push_back({v.expires_at, k});
        }
        std::make_heap(by_expiry.begin(), by_expiry.end(), std::greater<>{});
    }

    // Removes up to `limit` expired entries, earliest first; how many. Stale
    // and early pairs popped on the way cost nothing extra over time: each
    // push pops once.
    std::size_t sweep(time_point now, std::size_t limit) {
        std::size_t removed = 0;
        while (removed < limit && !by_expiry.empty() && by_expiry.front().at <= now) {
            std::pop_heap(by_expiry.begin(), by_expiry.end(), std::greater<>{});
            const due d = by_expiry.back();
            by_expiry.pop_back();
            auto it = entries.find(d.key);
            if (it == entries.end() || it->second.due_at != d.at) continue;  // stale
            if (it->second.expires_at <= now) {
                erase(it);
                ++removed;
            } else {
                expire(d.key, it->second, it->second.expires_at, false);  // due later: look again then
            }
        }
        return removed;
    }

    static constexpr std::size_t spare_limit = 16;
    static constexpr std::size_t kept_payload_capacity = 1024;
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
    auto [e, fresh] = s.find_or_add(key.digest());
    if (!fresh && e->expires_at > now) {
        if (e->fingerprint != fingerprint) return reservation::fingerprint_mismatch();
        if (e->completed) return reservation::completed(e->payload);
        return reservation::in_flight();
    }
    // Absent, or expired: a reservation of the key's own, in place.
    s.expire(key.digest(), *e, detail::saturating_add(now, lease), !fresh);
    e->token.assign(token);
    e->fingerprint.assign(fingerprint);
    e->payload.clear();
    e->completed = false;
    return reservation::reserved(std::move(token));
}

bool memory_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                               std::string_view payload, duration retention) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call);
    auto [e, fresh] = s.find_or_add(key.digest());
    if (!fresh && e->expires_at > now && (e->completed || e->token != token)) return false;
    // The caller's live reservation, or an entry gone or expired since: the result is recorded.
    s.expire(key.digest(), *e, detail::saturating_add(now, retention), !fresh);
    e->token.assign(token);
    e->fingerprint.assign(fingerprint);
    e->payload.assign(payload);
    e->completed = true;
    return true;
}

bool memory_store::do_release(const record_key& key, std::string_view token) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call);
    const auto it = s.entries.find(key.digest());
    if (it == s.entries.end()) return false;
    const shard::entry& e = it->second;
    const bool expired = e.expires_at <= now;
    if (!expired && (e.completed || e.token != token)) return false;
    s.erase(it);  // its pending pair goes stale
    return !expired;
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
