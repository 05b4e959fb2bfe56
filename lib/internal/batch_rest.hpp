// The rest between two batches of a job that holds the write lock (purge,
// reseal): busy handlers poll rather than queue, so the job rests as long as
// its batch held the lock, 1 ms to 100 ms, and writers waiting for it get it
// in between.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace idem::detail {

inline void rest_after_batch(std::chrono::steady_clock::time_point batch_start) {
    using namespace std::chrono_literals;
    std::this_thread::sleep_for(
        std::clamp<std::chrono::steady_clock::duration>(std::chrono::steady_clock::now() - batch_start, 1ms, 100ms));
}

}  // namespace idem::detail
