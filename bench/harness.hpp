// A small timing harness: runs a body for a while, in alternating rounds with
// its baseline, so both see the same machine state and the ratio holds on a
// noisy machine.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace idem::bench {

struct rate {
    double per_second;    // median over the rounds
    double nanos_per_op;  // 1e9 / per_second
};

// Calls `op(i)` with i = 0, 1, 2, ... for `span`; returns operations per second.
inline double measure(const std::function<void(std::uint64_t)>& op, std::chrono::milliseconds span) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto stop = start + span;
    std::uint64_t n = 0;
    auto now = start;
    while (now < stop) {
        for (int batch = 0; batch < 16; ++batch) op(n++);
        now = clock::now();
    }
    return static_cast<double>(n) / std::chrono::duration<double>(now - start).count();
}

// As measure(), but per second of this thread's CPU time: for work that never
// waits on I/O, on a machine other processes share, time taken from it by them
// does not count.
inline double measure_cpu(const std::function<void(std::uint64_t)>& op, std::chrono::milliseconds span) {
    const auto cpu_seconds = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    };
    const double cpu_start = cpu_seconds();
    const auto stop = std::chrono::steady_clock::now() + span;
    std::uint64_t n = 0;
    while (std::chrono::steady_clock::now() < stop)
        for (int batch = 0; batch < 16; ++batch) op(n++);
    return static_cast<double>(n) / (cpu_seconds() - cpu_start);
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// Alternates `subject` and `baseline` for `rounds` rounds of `span` each.
struct paired {
    rate subject;
    rate baseline;
    [[nodiscard]] double time_ratio() const { return baseline.per_second / subject.per_second; }
};

inline paired compare(const std::function<double()>& subject, const std::function<double()>& baseline, int rounds) {
    std::vector<double> s, b;
    for (int r = 0; r < rounds; ++r) {
        // Alternate which goes first, so warm-up and drift hit both alike.
        if (r % 2 == 0) {
            b.push_back(baseline());
            s.push_back(subject());
        } else {
            s.push_back(subject());
            b.push_back(baseline());
        }
    }
    const double sm = median(s), bm = median(b);
    return {{sm, 1e9 / sm}, {bm, 1e9 / bm}};
}

// Several subjects in alternating rounds, each round starting one further
// along, so warm-up and drift hit all alike; the median rate of each.
inline std::vector<double> compare_all(const std::vector<std::function<double()>>& subjects, int rounds) {
    std::vector<std::vector<double>> rates(subjects.size());
    for (int r = 0; r < rounds; ++r)
        for (std::size_t i = 0; i < subjects.size(); ++i) {
            const std::size_t s = (i + static_cast<std::size_t>(r)) % subjects.size();
            rates[s].push_back(subjects[s]());
        }
    std::vector<double> medians;
    for (auto& r : rates) medians.push_back(median(r));
    return medians;
}

}  // namespace idem::bench
