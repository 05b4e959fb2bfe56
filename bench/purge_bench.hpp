// The purge job's cost: rows per second, and what it does to the latency of
// reservations that run at the same time.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "idem/record_store.hpp"

namespace idem::bench {

struct latency {
    double p50_us = 0, p99_us = 0;
    std::size_t samples = 0;
};

inline latency percentiles(std::vector<double> us) {
    if (us.empty()) return {};
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)], us.size()};
}

// Reserve + complete of fresh keys, timed one by one, until `stop`.
inline std::vector<double> reserve_latencies(record_store& store, const std::atomic<bool>& stop, std::string_view tag) {
    std::vector<double> us;
    for (std::uint64_t i = 0; !stop; ++i) {
        const record_key key("bench.purge-traffic", std::string(tag) + "-" + std::to_string(i));
        const auto start = std::chrono::steady_clock::now();
        auto r = store.try_reserve(key, "fp", std::chrono::minutes(10));
        (void)store.complete(key, r.token, "fp", "ok", std::chrono::hours(1));
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    return us;
}

// Measures reservations alone for a few seconds, then purges `rows` expired rows
// (already inserted) in batches while the same traffic runs.
inline void measure_purge(record_store& store, std::size_t rows, const std::string& group, report& out) {
    std::atomic<bool> stop_alone{false};
    std::vector<double> alone;
    std::thread quiet([&] { alone = reserve_latencies(store, stop_alone, "alone"); });
    std::this_thread::sleep_for(std::chrono::seconds(3));
    stop_alone = true;
    quiet.join();

    std::atomic<bool> stop{false};
    std::vector<double> during;
    std::thread traffic([&] { during = reserve_latencies(store, stop, "during"); });
    const auto start = std::chrono::steady_clock::now();
    std::size_t purged = 0;
    while (std::size_t n = store.purge_expired(1000)) purged += n;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stop = true;
    traffic.join();

    const latency with = percentiles(during), without = percentiles(alone);
    const double rate = static_cast<double>(purged) / seconds;
    out.add({.group = group,
             .name = "purge " + std::to_string(rows) + " expired rows (batches of 1000)",
             .subject = "reserve+complete latency during purge",
             .baseline = "the same traffic without purge",
             .result = {{1e6 / with.p50_us, with.p50_us * 1000}, {1e6 / without.p50_us, without.p50_us * 1000}},
             .unit = "ops/s (1/p50)",
             .note = std::to_string(static_cast<long long>(rate)) + " rows/s purged (" + std::to_string(purged) +
                     " rows); reserve p50/p99 " + std::to_string(static_cast<int>(with.p50_us)) + "/" +
                     std::to_string(static_cast<int>(with.p99_us)) + " us during vs " +
                     std::to_string(static_cast<int>(without.p50_us)) + "/" +
                     std::to_string(static_cast<int>(without.p99_us)) + " us without"});
}

}  // namespace idem::bench
