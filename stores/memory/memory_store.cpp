#include "idem/memory_store.hpp"

#include <array>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "internal/saturating_time.hpp"

namespace idem {
namespace {

constexpr std::size_t shard_count = 64;
// Entries a call looks at, walking round its shard, before its own work; the
// expired ones it removes. A pass over n entries takes n / 8 calls, and an
// entry is removed at most two passes after it expired: those calls add at
// most n / 4 entries, so expired ones stay within a third of the live ones.
constexpr std::size_t sweep_per_call = 8;

using digest = std::array<std::byte, 32>;
constexpr std::size_t token_length = 32;  // detail::new_token's

// The digest is uniformly distributed already: its first bytes are the hash.
std::uint32_t hash_of(const digest& d) noexcept {
    std::uint32_t h;
    std::memcpy(&h, d.data(), sizeof h);
    return h;
}

bool same(const digest& a, const digest& b) noexcept {
    return std::memcmp(a.data(), b.data(), a.size()) == 0;
}

struct digest_hash {
    std::size_t operator()(const digest& d) const noexcept { return hash_of(d); }
};

// A remembered key once its result is gone: the fingerprint's digest and when
// the key may be forgotten.
struct tombstone {
    std::string fingerprint;  // detail::fingerprint_digest
    time_point forget_at;
};

}  // namespace

// The entries of one shard: a dense array, found through an open-addressing
// index, and swept by a cursor walking round the array.
struct memory_store::shard {
    struct entry {
        digest key;
        bool completed = false;
        // A reservation's token: the store's own, all of one length, kept in
        // place. A completed entry needs none (no token completes or releases it).
        std::array<char, token_length> token{};
        std::string fingerprint;
        std::string payload;

        [[nodiscard]] bool holds(std::string_view t) const noexcept {
            return t == std::string_view(token.data(), token.size());
        }
    };
    // One index cell: 1 + the slot of the entry whose key hashes here (0: an
    // empty cell), beside that key's hash, so that a probe rarely reads an entry.
    struct cell {
        std::uint32_t hash = 0;
        std::uint32_t slot = 0;
    };

    mutable std::mutex mutex;
    // Slots below size() hold entries, in no order; past them, emptied entries
    // whose string buffers the next entries reuse.
    std::vector<entry> entries;
    // expiry[i]: when entries[i] expires. Apart from the entries, so that a
    // sweep reads eight of them from one cache line.
    std::vector<time_point> expiry;
    std::vector<cell> index = std::vector<cell>(min_index);  // a power of two, at most half full; linear probing
    std::size_t cursor = 0;  // the sweep has slots [0, cursor) left in this pass, and walks down
    // Remembered keys (record_store::complete's `remember`), beside the records,
    // and the same in the order their windows end, for the purge and the sweep.
    std::unordered_map<digest, tombstone, digest_hash> tombstones;
    std::set<std::pair<time_point, digest>> forget_order;

    [[nodiscard]] std::size_t size() const noexcept { return expiry.size(); }

    // The cell holding `key`, or the empty cell that ends its probe run.
    [[nodiscard]] std::size_t probe(const digest& key, std::uint32_t h) const noexcept {
        const std::size_t mask = index.size() - 1;
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
            const cell c = index[i];
            if (c.slot == 0 || (c.hash == h && same(entries[c.slot - 1].key, key))) return i;
        }
    }

    // The slot of `key`'s entry, or size() when it has none.
    [[nodiscard]] std::size_t find(const digest& key) const noexcept {
        const cell c = index[probe(key, hash_of(key))];
        return c.slot == 0 ? size() : c.slot - 1;
    }

    // The slot of `key`'s entry, added when absent (fresh: empty, its expiry
    // to be set by the caller). One probe either way.
    std::pair<std::size_t, bool> find_or_add(const digest& key) {
        const std::uint32_t h = hash_of(key);
        std::size_t at = probe(key, h);
        if (index[at].slot != 0) return {index[at].slot - 1, false};
        if (2 * (size() + 1) > index.size()) {
            reindex(2 * index.size());
            at = probe(key, h);
        }
        const std::size_t slot = size();
        if (slot == entries.size()) entries.emplace_back();
        entries[slot].key = key;
        expiry.emplace_back();
        index[at] = {h, static_cast<std::uint32_t>(slot + 1)};
        return {slot, true};
    }

    // Removes the entry in `slot`; the last entry moves into its place.
    void erase(std::size_t slot) {
        unlink(cell_of(slot));
        const std::size_t last = size() - 1;
        if (slot != last) {
            index[cell_of(last)].slot = static_cast<std::uint32_t>(slot + 1);
            std::swap(entries[slot], entries[last]);
            expiry[slot] = expiry[last];
        }
        expiry.pop_back();
        entry& spare = entries[last];
        spare.fingerprint.clear();
        // A large result's buffer is not worth keeping.
        if (spare.payload.capacity() > kept_payload_capacity) std::string().swap(spare.payload);
        spare.payload.clear();
        shrink();
    }

    // Looks at up to `look` entries, walking down from the cursor and round,
    // and removes the expired ones, at most `limit`; how many it removed. An
    // entry moved into a removed one's slot comes from the top of the array:
    // looked at already in this pass, or added since.
    std::size_t sweep(time_point now, std::size_t look, std::size_t limit) {
        std::size_t removed = 0;
        for (; look > 0 && removed < limit && size() > 0; --look) {
            if (cursor == 0 || cursor > size()) cursor = size();  // a new pass
            --cursor;
            if (expiry[cursor] <= now) {
                erase(cursor);
                ++removed;
            }
        }
        return removed;
    }

    // Removes up to `limit` expired entries: the rest of this pass, then one
    // whole pass from the top, then tombstones whose window ended, so fewer than
    // `limit` means none is left.
    std::size_t purge(time_point now, std::size_t limit) {
        std::size_t removed = sweep(now, cursor, limit);
        if (removed < limit) {
            cursor = 0;
            removed += sweep(now, size(), limit - removed);
        }
        if (removed < limit) removed += forget_ended(now, limit - removed);
        return removed;
    }

    // Remembers `key` for `fingerprint` until `forget_at`.
    void remember(const digest& key, std::string_view fingerprint, time_point forget_at) {
        auto [at, fresh] = tombstones.try_emplace(key);
        if (!fresh) forget_order.erase({at->second.forget_at, key});
        at->second = {detail::fingerprint_digest(fingerprint), forget_at};
        forget_order.emplace(forget_at, key);
    }

    // The answer of `key`'s live tombstone: expired for its fingerprint,
    // fingerprint_mismatch for another; nullopt when there is none.
    [[nodiscard]] std::optional<reservation> remembered(const digest& key, std::string_view fingerprint,
                                                        time_point now) const {
        if (tombstones.empty()) return std::nullopt;
        const auto at = tombstones.find(key);
        if (at == tombstones.end() || at->second.forget_at <= now) return std::nullopt;
        if (at->second.fingerprint != detail::fingerprint_digest(fingerprint))
            return reservation::fingerprint_mismatch();
        return reservation::expired();
    }

    // Deletes `key`'s tombstone; whether it had one.
    bool forget_tombstone(const digest& key) {
        const auto at = tombstones.find(key);
        if (at == tombstones.end()) return false;
        forget_order.erase({at->second.forget_at, key});
        tombstones.erase(at);
        return true;
    }

    // Removes up to `limit` tombstones whose window ended; how many.
    std::size_t forget_ended(time_point now, std::size_t limit) {
        std::size_t removed = 0;
        while (removed < limit && !forget_order.empty() && forget_order.begin()->first <= now) {
            tombstones.erase(forget_order.begin()->second);
            forget_order.erase(forget_order.begin());
            ++removed;
        }
        return removed;
    }

private:
    static constexpr std::size_t min_index = 16;
    static constexpr std::size_t kept_payload_capacity = 1024;

    [[nodiscard]] std::size_t cell_of(std::size_t slot) const noexcept {
        const std::size_t mask = index.size() - 1;
        std::size_t i = hash_of(entries[slot].key) & mask;
        while (index[i].slot != slot + 1) i = (i + 1) & mask;
        return i;
    }

    // Empties the cell at `hole`, moving later cells of its probe run back so
    // that no probe stops early at the gap.
    void unlink(std::size_t hole) noexcept {
        const std::size_t mask = index.size() - 1;
        for (std::size_t i = (hole + 1) & mask; index[i].slot != 0; i = (i + 1) & mask) {
            const std::size_t home = index[i].hash & mask;
            if (((i - home) & mask) >= ((i - hole) & mask)) {  // the hole lies on this cell's probe path
                index[hole] = index[i];
                hole = i;
            }
        }
        index[hole] = {};
    }

    void reindex(std::size_t cells) {
        index.assign(cells, {});
        const std::size_t mask = cells - 1;
        for (std::size_t slot = 0; slot < size(); ++slot) {
            const std::uint32_t h = hash_of(entries[slot].key);
            std::size_t i = h & mask;
            while (index[i].slot != 0) i = (i + 1) & mask;
            index[i] = {h, static_cast<std::uint32_t>(slot + 1)};
        }
    }

    // After a peak the shard gives memory back, by halves, so that a store
    // hovering at one size does not reallocate back and forth.
    void shrink() {
        if (index.size() > min_index && 8 * size() < index.size()) reindex(index.size() / 2);
        if (entries.size() > min_index && 4 * size() < entries.size()) {
            entries.resize(entries.size() / 2);
            entries.shrink_to_fit();
            expiry.shrink_to_fit();
        }
    }
};

memory_store::memory_store(std::shared_ptr<const clock> time)
    : clock_(std::move(time)), shards_(std::make_unique<shard[]>(shard_count)) {}

memory_store::~memory_store() = default;

memory_store::shard& memory_store::shard_for(const record_key& key) const {
    // The digest's last byte picks the shard; its first bytes feed the index.
    return shards_[std::to_integer<std::size_t>(key.digest()[31]) % shard_count];
}

std::size_t memory_store::size() const {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count; ++i) {
        std::lock_guard lock(shards_[i].mutex);
        total += shards_[i].size();
    }
    return total;
}

store_traits memory_store::traits() const noexcept {
    store_traits t;
    t.remembers = true;
    return t;
}

reservation memory_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    std::string token = detail::new_token();
    if (token.size() != token_length) throw std::logic_error("idem: a token of unexpected length");
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call, sweep_per_call);
    (void)s.forget_ended(now, sweep_per_call);
    const auto [slot, fresh] = s.find_or_add(key.digest());
    shard::entry& e = s.entries[slot];
    if (!fresh && s.expiry[slot] > now) {
        if (e.fingerprint != fingerprint) return reservation::fingerprint_mismatch();
        if (e.completed) return reservation::completed(e.payload);
        return reservation::in_flight();
    }
    if (auto answer = s.remembered(key.digest(), fingerprint, now)) {
        if (fresh) s.erase(slot);
        return std::move(*answer);
    }
    // Absent, or expired: a reservation of the key's own, in place.
    s.expiry[slot] = detail::saturating_add(now, lease);
    std::memcpy(e.token.data(), token.data(), e.token.size());
    e.fingerprint.assign(fingerprint);
    e.payload.clear();
    e.completed = false;
    return reservation::reserved(std::move(token));
}

bool memory_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                               std::string_view payload, duration retention, duration remember) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call, sweep_per_call);
    const auto [slot, fresh] = s.find_or_add(key.digest());
    shard::entry& e = s.entries[slot];
    if (!fresh && s.expiry[slot] > now && (e.completed || !e.holds(token))) return false;
    // The caller's live reservation, or an entry gone or expired since: the result is recorded.
    s.expiry[slot] = detail::saturating_add(now, retention);
    e.fingerprint.assign(fingerprint);
    e.payload.assign(payload);
    e.completed = true;
    if (remember > duration::zero()) s.remember(key.digest(), fingerprint, detail::saturating_add(now, remember));
    return true;
}

bool memory_store::do_release(const record_key& key, std::string_view token) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    s.sweep(now, sweep_per_call, sweep_per_call);
    const std::size_t slot = s.find(key.digest());
    if (slot == s.size()) return false;
    const shard::entry& e = s.entries[slot];
    const bool expired = s.expiry[slot] <= now;
    if (!expired && (e.completed || !e.holds(token))) return false;
    s.erase(slot);
    return !expired;
}

std::optional<record_state> memory_store::inspect(const record_key& key, bool with_payload) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    const std::size_t slot = s.find(key.digest());
    if (slot == s.size()) return std::nullopt;
    const shard::entry& e = s.entries[slot];
    record_state r{.completed = e.completed,
                   .expires_at = s.expiry[slot],
                   .now = now,
                   .name_space = std::string(key.name_space()),
                   .payload_bytes = e.completed ? e.payload.size() : 0};
    if (with_payload && e.completed) r.payload = e.payload;
    return r;
}

forget_result memory_store::forget(const record_key& key, bool force) {
    shard& s = shard_for(key);
    const time_point now = clock_->now();
    std::lock_guard lock(s.mutex);
    const std::size_t slot = s.find(key.digest());
    if (slot == s.size()) {
        const auto t = s.tombstones.find(key.digest());
        if (t == s.tombstones.end()) return {};
        forget_result r{forget_outcome::tombstone_deleted,
                        {.completed = true,
                         .expires_at = t->second.forget_at,
                         .now = now,
                         .name_space = std::string(key.name_space())},
                        true};
        (void)s.forget_tombstone(key.digest());
        return r;
    }
    const shard::entry& e = s.entries[slot];
    forget_result r{forget_outcome::deleted,
                    {.completed = e.completed,
                     .expires_at = s.expiry[slot],
                     .now = now,
                     .name_space = std::string(key.name_space()),
                     .payload_bytes = e.completed ? e.payload.size() : 0}};
    if (!r.record.completed && !r.record.expired() && !force) {
        r.outcome = forget_outcome::refused_in_flight;
        return r;
    }
    s.erase(slot);
    r.tombstone = s.forget_tombstone(key.digest());
    return r;
}

std::size_t memory_store::do_purge_expired(std::size_t limit) {
    // Each call starts at the shard where the last one stopped: a purge loop
    // goes round the store once, not once per call.
    std::size_t removed = 0;
    const std::size_t first = purge_from_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < shard_count; ++i) {
        const std::size_t at = (first + i) % shard_count;
        std::lock_guard lock(shards_[at].mutex);
        removed += shards_[at].purge(clock_->now(), limit - removed);
        if (removed == limit) {
            purge_from_.store(at, std::memory_order_relaxed);
            break;
        }
    }
    return removed;
}

}  // namespace idem
