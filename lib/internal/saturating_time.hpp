// Time arithmetic that clamps at the ends of time_point instead of overflowing.
// Stored times may lie anywhere: PostgreSQL's 'infinity', SQLite rows written
// by hand past 2262, where nanoseconds since 1970 no longer fit in 64 bits.
#pragma once

#include <chrono>
#include <type_traits>

#include "idem/clock.hpp"

namespace idem::detail {

static_assert(std::is_same_v<time_point::duration, duration>);

// `d` in nanoseconds, clamped to duration::min() and duration::max().
template <class Rep, class Period>
[[nodiscard]] constexpr duration saturating_duration(std::chrono::duration<Rep, Period> d) noexcept {
    using source = std::chrono::duration<Rep, Period>;
    constexpr auto highest = std::chrono::floor<source>(duration::max());
    constexpr auto lowest = std::chrono::ceil<source>(duration::min());
    if (d > highest) return duration::max();
    if (d < lowest) return duration::min();
    return std::chrono::duration_cast<duration>(d);
}

// t + d, clamped to time_point::min() and time_point::max().
[[nodiscard]] constexpr time_point saturating_add(time_point t, duration d) noexcept {
    duration::rep sum{};
    if (__builtin_add_overflow(t.time_since_epoch().count(), d.count(), &sum))
        return d > duration::zero() ? time_point::max() : time_point::min();
    return time_point(duration(sum));
}

// a - b, clamped to duration::min() and duration::max().
[[nodiscard]] constexpr duration saturating_difference(time_point a, time_point b) noexcept {
    duration::rep difference{};
    if (__builtin_sub_overflow(a.time_since_epoch().count(), b.time_since_epoch().count(), &difference))
        return a > b ? duration::max() : duration::min();
    return duration(difference);
}

// A time given as a count since the Unix epoch, clamped.
template <class Rep, class Period>
[[nodiscard]] constexpr time_point saturating_time(std::chrono::duration<Rep, Period> since_epoch) noexcept {
    return time_point(saturating_duration(since_epoch));
}

}  // namespace idem::detail
