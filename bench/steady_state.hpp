// The workload users run, at steady state: transfers between accounts drawn at
// random from 100,000 (so clients rarely wait on each other's row locks), into
// a ledger and a record table that already hold a retention's worth of rows.
#pragma once

#include <barrier>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "idem/record_key.hpp"

namespace idem::bench {

constexpr std::int64_t steady_accounts = 100'000;

// Two distinct-or-equal accounts at random, lower id first: every transfer locks
// its rows in id order, so concurrent transfers never deadlock.
inline std::pair<std::int64_t, std::int64_t> account_pair(std::mt19937_64& rng) {
    std::uniform_int_distribution<std::int64_t> pick(1, steady_accounts);
    const std::int64_t a = pick(rng), b = pick(rng);
    return {std::min(a, b), std::max(a, b)};
}

inline record_key transfer_key(std::uint64_t id) {
    return record_key("bench.transfer", "t-" + std::to_string(id));
}

// Runs op(client, i) on `clients` threads for `span`, started together; total operations per second.
inline double on_clients(int clients, std::chrono::milliseconds span,
                         const std::function<void(std::size_t, std::uint64_t)>& op) {
    std::vector<double> rates(static_cast<std::size_t>(clients));
    std::barrier start(clients);
    {
        std::vector<std::jthread> threads;
        for (int c = 0; c < clients; ++c)
            threads.emplace_back([&, c] {
                const auto i = static_cast<std::size_t>(c);
                start.arrive_and_wait();
                rates[i] = measure([&](std::uint64_t n) { op(i, n); }, span);
            });
    }
    double total = 0;
    for (double r : rates) total += r;
    return total;
}

}  // namespace idem::bench
