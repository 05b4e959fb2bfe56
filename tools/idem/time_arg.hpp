// Times on the command line: a UTC time, as `inspect` prints them
// (2024-11-29T22:02:21.492Z; seconds and their fraction optional, an offset
// such as +01:00 instead of Z), or a duration back from now (2h: two hours ago).
#pragma once

#include <string_view>

#include "idem/clock.hpp"

namespace idem::cli {

inline constexpr std::string_view time_forms =
    "a UTC time such as 2024-11-29T22:02:21Z (or .492Z, or an offset such as +01:00 for Z), or a duration back "
    "from now: a whole number followed by s, m, h or d (e.g. 15m, 2h, 7d)";

// std::invalid_argument naming the accepted forms for anything else, and for a
// date that does not exist (2024-02-30) or a time before 1970.
[[nodiscard]] time_point parse_time(std::string_view text, time_point now);

}  // namespace idem::cli
