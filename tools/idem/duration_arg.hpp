// Durations on the command line: a whole number and a unit, e.g. 500ms, 30s, 15m, 2h, 7d.
#pragma once

#include <string_view>

#include "idem/clock.hpp"

namespace idem::cli {

inline constexpr std::string_view duration_forms =
    "a whole number followed by ms, s, m, h or d (e.g. 500ms, 30s, 15m, 2h, 7d)";

// std::invalid_argument for anything else, saying what is wrong with `text`
// (and naming `flag`, when given) and which forms are accepted.
[[nodiscard]] duration parse_duration(std::string_view text, std::string_view flag = {});

// "2d 3h", "15m 0s", "42.5s": for people reading, never parsed back.
[[nodiscard]] std::string describe(duration d);

}  // namespace idem::cli
