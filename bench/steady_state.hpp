// The workload users run, at steady state: transfers between accounts drawn at
// random from 100,000 (so clients rarely wait on each other's row locks), into
// a ledger and a record table that already hold a retention's worth of rows.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench.hpp"
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

// Fills `bytes` with random bytes (a hand-written reservation's token); its size a multiple of 8.
inline const std::string& fill_random(std::mt19937_64& rng, std::string& bytes) {
    for (std::size_t i = 0; i < bytes.size(); i += 8) {
        const std::uint64_t r = rng();
        std::memcpy(bytes.data() + i, &r, 8);
    }
    return bytes;
}

// One round of op(client, id) on every client at once, each call a transfer id
// of its own from `next`: the function compare_all times.
template <class Client>
std::function<double()> on_each_client(std::vector<std::unique_ptr<Client>>& clients, std::chrono::milliseconds span,
                                       std::atomic<std::uint64_t>& next,
                                       std::function<void(Client&, std::uint64_t)> op) {
    return [&clients, span, &next, op = std::move(op)] {
        return on_clients(static_cast<int>(clients.size()), span,
                          [&](std::size_t c, std::uint64_t) { op(*clients[c], next++); });
    };
}

// One variant of a steady-state configuration: its name in the report, one timed round.
struct steady_variant {
    const char* name;
    std::function<double()> round;
};

// Times `variants` in alternating rounds and reports each over the first (the bare transfer).
inline void report_steady(report& out, const options& o, const std::string& group, const std::string& config,
                          const std::vector<steady_variant>& variants) {
    std::vector<std::function<double()>> rounds;
    for (const auto& v : variants) rounds.push_back(v.round);
    const std::vector<double> rates = compare_all(rounds, o.rounds);
    for (std::size_t v = 1; v < rates.size(); ++v)
        out.add({.group = group,
                 .name = config,
                 .subject = variants[v].name,
                 .baseline = variants[0].name,
                 .result = {{rates[v], 1e9 / rates[v]}, {rates[0], 1e9 / rates[0]}},
                 .unit = "transfers/s",
                 .note = std::to_string(o.steady_rows) + " rows"});
}

inline std::string clients_label(int clients) {
    return std::to_string(clients) + (clients == 1 ? " client" : " clients");
}

}  // namespace idem::bench
