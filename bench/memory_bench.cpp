// Memory store: reserve + complete per second against a mutex-guarded hash map
// doing the same inserts, updates and erases.
#include <mutex>
#include <thread>
#include <unordered_map>

#include "bench.hpp"
#include "idem/memory_store.hpp"

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
            pool.emplace_back([&, t] { rates[static_cast<std::size_t>(t)] = measure_cpu([&](std::uint64_t i) { op(t, i); }, span); });
    }
    double total = 0;
    for (double r : rates) total += r;
    return total;
}

struct baseline_map {
    struct entry {
        std::string token, fingerprint, payload;
        bool completed = false;
    };
    std::mutex mutex;
    std::unordered_map<std::string, entry> entries;
};

}  // namespace

void run_memory(const options& o, report& out) {
    for (int threads : {1, 2}) {
        const auto keys = make_keys(threads);
        std::vector<std::vector<std::string>> names(keys.size());
        for (std::size_t t = 0; t < keys.size(); ++t)
            for (const auto& k : keys[t]) names[t].push_back(k.to_storage_key());

        // Entries live 1 ms; a thread comes back to a key only after 65536 operations,
        // when it has expired (and been swept or taken over).
        memory_store store;
        baseline_map map;
        const auto subject = [&] {
            return on_threads(threads, o.span, [&](int t, std::uint64_t i) {
                const record_key& key = keys[static_cast<std::size_t>(t)][i % keys_per_thread];
                auto r = store.try_reserve(key, "fp", 1ms);
                if (r.status == reservation_status::reserved) (void)store.complete(key, r.token, "fp", "result", 1ms);
            });
        };
        const auto baseline = [&] {
            return on_threads(threads, o.span, [&](int t, std::uint64_t i) {
                const auto& names_t = names[static_cast<std::size_t>(t)];
                const std::string& name = names_t[i % keys_per_thread];
                {
                    std::lock_guard lock(map.mutex);
                    auto& e = map.entries[name];
                    e.token = "token";
                    e.fingerprint = "fp";
                }
                {
                    std::lock_guard lock(map.mutex);
                    auto& e = map.entries[name];
                    e.payload = "result";
                    e.completed = true;
                    map.entries.erase(names_t[(i + keys_per_thread / 2) % keys_per_thread]);
                }
            });
        };
        const paired p = compare(subject, baseline, o.rounds);
        out.add({.group = "memory",
                 .name = "reserve + complete, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads"),
                 .subject = "memory_store", .baseline = "mutex + unordered_map, same inserts and erases",
                 .result = p, .unit = "ops/s"});
    }
}

}  // namespace idem::bench
