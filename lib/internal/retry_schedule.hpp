// One retry policy for every loop that tries a call again (idem::database's
// reruns of a unit of work, the retrying HTTP client, the Redis router): how
// many runs, within what time, and the waits between them.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <thread>

namespace idem::detail {

struct retry_schedule {
    int attempts = std::numeric_limits<int>::max();  // runs, the first included
    std::chrono::milliseconds first{10};             // the wait after the first run
    std::chrono::milliseconds ceiling{5000};         // doubling stops here
    std::chrono::milliseconds budget{0};             // no run starts later than this after the first; 0: no limit
};

// The wait after run `attempt` (from 1): `first`, doubled for each further
// run up to `ceiling`, drawn in the upper half of that step, so callers that
// collided once spread out. For loops that sleep (retrying) and for work that
// is put off to a later time instead (the outbox relay's next attempt).
[[nodiscard]] inline std::chrono::microseconds backoff_after(const retry_schedule& schedule, int attempt) {
    thread_local std::minstd_rand random{std::random_device{}()};
    auto full = std::chrono::duration_cast<std::chrono::microseconds>(schedule.first);
    const auto ceiling = std::chrono::duration_cast<std::chrono::microseconds>(schedule.ceiling);
    for (int i = 1; i < attempt && full < ceiling; ++i) full *= 2;
    full = std::min(full, ceiling);
    if (full.count() <= 1) return full;
    std::uniform_int_distribution<long long> pick(full.count() - full.count() / 2, full.count());
    return std::chrono::microseconds(pick(random));
}

// One call's way through a schedule.
class retrying {
public:
    using clock = std::chrono::steady_clock;

    explicit retrying(const retry_schedule& schedule) : schedule_(schedule), started_(clock::now()) {}

    // The run under way, from 1.
    [[nodiscard]] int attempt() const noexcept { return attempt_; }

    // After a failed run: false at once when the schedule is used up; else waits
    // (at least `asked`, a wait the other side named, cut to what is left of the
    // budget) and returns true for the next run.
    [[nodiscard]] bool wait(clock::duration asked = clock::duration::zero()) {
        if (attempt_ >= schedule_.attempts) return false;
        clock::duration pause = std::max<clock::duration>(asked, backoff_after(schedule_, attempt_));
        if (schedule_.budget.count() > 0) {
            const clock::duration left = started_ + schedule_.budget - clock::now();
            if (left <= clock::duration::zero()) return false;
            pause = std::min(pause, left);
        }
        std::this_thread::sleep_for(pause);
        ++attempt_;
        return true;
    }

private:
    retry_schedule schedule_;
    clock::time_point started_;
    int attempt_ = 1;
};

}  // namespace idem::detail
