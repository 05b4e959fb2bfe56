// Memory store: reserve + complete per second against a mutex-guarded hash map
// doing the same inserts, updates and erases, with and without the clock reads
// and tokens the contract asks of any store.
#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "bench.hpp"
#include "idem/memory_store.hpp"
#include "idem/record_store.hpp"

namespace idem::bench {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t keys_per_thread = 1 << 16;

std::vector<std::vector<record_key>> make_keys(int threads) {
    std::vector<std::vector<record_key>> keys(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        keys[static_cast<std::size_t>(t)].reserve(keys_per_thread);
        for (std::size_t i = 0; i < keys_per_thread; ++i)
            keys[static_cast<std::size_t>(t)].emplace_back("bench", std::to_string(t) + "-" + std::to_string(i));
    }
    return keys;
}

// Runs `op(thread, i)` on `threads` threads for `span`; total operations per
// second of CPU time (nothing here waits on I/O; other processes' load does not count).
double on_threads(int threads, std::chrono::milliseconds span, const std::function<void(int, std::uint64_t)>& op) {
    std::vector<double> rates(static_cast<std::size_t>(threads));
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back(
                [&, t] { rates[static_cast<std::size_t>(t)] = measure_cpu([&](std::uint64_t i) { op(t, i); }, span); });
    }
    double total = 0;
    for (double r : rates) total += r;
    return total;
}

// The same work on one mutex and one std::unordered_map, keyed by the same
// 32-byte digest with the same hash, holding as many entries as the store: an
// entry inserted at the reserve, updated at the completion, and one older
// entry erased per call, as the store sweeps one expired entry per reservation.
// `contract`: also what any store of the contract must do besides: read the
// clock at each call and compare expiry times, draw a token per reservation
// and keep it, check the token at the completion. Without it, the bare map.
class baseline_map {
public:
    baseline_map(const std::vector<std::vector<record_key>>& keys, std::size_t held) : keys_(keys), held_(held) {}

    void bare(int thread, std::uint64_t i) {
        const auto& keys = keys_[static_cast<std::size_t>(thread)];
        const auto& key = keys[i % keys_per_thread].digest();
        {
            std::lock_guard lock(mutex_);
            auto& e = entries_[key];
            e.token = "token";
            e.fingerprint = "fp";
        }
        std::lock_guard lock(mutex_);
        auto& e = entries_[key];
        e.payload = "result";
        e.completed = true;
        entries_.erase(keys[(i + keys_per_thread - held_) % keys_per_thread].digest());
    }

    void contract(int thread, std::uint64_t i) {
        const auto& keys = keys_[static_cast<std::size_t>(thread)];
        const auto& key = keys[i % keys_per_thread].digest();
        std::string token = detail::new_token();
        time_point now = clock_->now();
        {
            std::lock_guard lock(mutex_);
            auto [it, fresh] = entries_.try_emplace(key);
            entry& e = it->second;
            if (!fresh && e.expires_at > now) throw std::logic_error("the key is live: not the work measured");
            e.token = token;
            e.fingerprint = "fp";
            e.payload.clear();
            e.completed = false;
            e.expires_at = now + 1ms;
        }
        now = clock_->now();
        std::lock_guard lock(mutex_);
        entry& e = entries_[key];  // as the store, records the result even if the lease ended meanwhile
        if (e.expires_at > now && (e.completed || e.token != token)) throw std::logic_error("the reservation was lost");
        e.payload = "result";
        e.completed = true;
        e.expires_at = now + 1ms;
        entries_.erase(keys[(i + keys_per_thread - held_) % keys_per_thread].digest());
    }

private:
    using digest = std::array<std::byte, 32>;
    struct digest_hash {
        std::size_t operator()(const digest& d) const noexcept {
            std::size_t h;
            std::memcpy(&h, d.data(), sizeof h);
            return h;
        }
    };
    struct entry {
        std::string token, fingerprint, payload;
        bool completed = false;
        time_point expires_at;
    };
    const std::vector<std::vector<record_key>>& keys_;
    const std::size_t held_;
    const std::shared_ptr<const clock> clock_ = clock::system();
    std::mutex mutex_;
    std::unordered_map<digest, entry, digest_hash> entries_;
};

}  // namespace

void run_memory(const options& o, report& out) {
    for (int threads : {1, 2}) {
        const auto keys = make_keys(threads);
        // Entries live 1 ms; a thread comes back to a key only after 65536 operations,
        // when it has expired (and been swept or taken over).
        // Each thread walks its keys on from where its last round stopped: a
        // round starting over would meet keys the last one left live.
        std::vector<std::uint64_t> store_next(keys.size()), map_next(keys.size());
        memory_store store;
        const auto subject = [&] {
            return on_threads(threads, o.span, [&](int t, std::uint64_t) {
                const std::uint64_t i = store_next[static_cast<std::size_t>(t)]++;
                const record_key& key = keys[static_cast<std::size_t>(t)][i % keys_per_thread];
                auto r = store.try_reserve(key, "fp", 1ms);
                if (r.status == reservation_status::reserved) (void)store.complete(key, r.token, "fp", "result", 1ms);
            });
        };
        // The baseline holds as many entries as the store does (live, and expired
        // but not yet swept): a larger map would miss the cache more often.
        (void)subject();
        const std::size_t held = std::max<std::size_t>(1, store.size() / static_cast<std::size_t>(threads));
        baseline_map map(keys, held);
        const std::string name =
            "reserve + complete, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
        const auto contract = [&] {
            return on_threads(threads, o.span,
                              [&](int t, std::uint64_t) { map.contract(t, map_next[static_cast<std::size_t>(t)]++); });
        };
        out.add({.group = "memory",
                 .name = name,
                 .subject = "memory_store",
                 .baseline = "mutex + unordered_map by digest, as many entries, a clock read per call and a token per "
                             "reservation",
                 .result = compare(subject, contract, o.rounds),
                 .unit = "ops/s"});
        if (threads > 1) continue;
        const auto bare = [&] {
            return on_threads(threads, o.span,
                              [&](int t, std::uint64_t) { map.bare(t, map_next[static_cast<std::size_t>(t)]++); });
        };
        out.add({.group = "memory",
                 .name = name + ", against the bare map",
                 .subject = "memory_store",
                 .baseline = "mutex + unordered_map by digest, as many entries, no clock, no token",
                 .result = compare(subject, bare, o.rounds),
                 .unit = "ops/s"});
    }
}

}  // namespace idem::bench
