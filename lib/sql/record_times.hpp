// A record's times as the SQL stores that count leases on this process's
// clock keep them (SQLite, MariaDB): integer milliseconds since the Unix epoch.
//
//   const record_times t = record_times_of(clock->now(), lease);  // t.now, t.expires_at
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

#include "idem/clock.hpp"

namespace idem::detail {

struct record_times {
    std::int64_t now;
    std::int64_t expires_at;
};

// `now`, and `span` after it, in milliseconds: the span rounded up, so a
// positive one never expires on the spot, and saturated rather than
// overflowing for an absurdly long one.
[[nodiscard]] inline record_times record_times_of(time_point now, duration span) noexcept {
    using std::chrono::milliseconds;
    const std::int64_t at = std::chrono::floor<milliseconds>(now.time_since_epoch()).count();
    const std::int64_t length = std::max<std::int64_t>(std::chrono::ceil<milliseconds>(span).count(), 1);
    std::int64_t end = 0;
    if (__builtin_add_overflow(at, length, &end)) end = std::numeric_limits<std::int64_t>::max();
    return {at, end};
}

}  // namespace idem::detail
