#include "duration_arg.hpp"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace idem::cli {
namespace {

using namespace std::chrono_literals;

[[noreturn]] void reject(std::string_view why) {
    throw std::invalid_argument(fmt::format("idem: {}; a duration is {}", why, duration_forms));
}

}  // namespace

duration parse_duration(std::string_view text) {
    if (text.size() < 2) reject("duration too short");
    std::chrono::seconds unit{};
    switch (text.back()) {
        case 's': unit = 1s; break;
        case 'm': unit = 1min; break;
        case 'h': unit = 1h; break;
        case 'd': unit = 24h; break;
        default: reject("unknown duration unit");
    }
    const std::string_view digits = text.substr(0, text.size() - 1);
    std::uint64_t count = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (ec == std::errc::result_out_of_range) reject("duration too long");
    if (ec != std::errc() || end != digits.data() + digits.size()) reject("not a duration");
    // duration counts nanoseconds in 64 bits: about 292 years.
    const auto limit = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(duration::max()).count() / unit.count());
    if (count > limit) reject("duration too long");
    return std::chrono::duration_cast<duration>(unit * static_cast<std::int64_t>(count));
}

std::string describe(duration d) {
    using std::chrono::duration_cast;
    const char* sign = d < duration::zero() ? "-" : "";
    if (d < duration::zero()) d = -d;
    if (d < 1min) return fmt::format("{}{:.3f}s", sign, std::chrono::duration<double>(d).count());
    const auto s = duration_cast<std::chrono::seconds>(d).count();
    if (d < 1h) return fmt::format("{}{}m {}s", sign, s / 60, s % 60);
    if (d < 24h) return fmt::format("{}{}h {}m", sign, s / 3600, s % 3600 / 60);
    return fmt::format("{}{}d {}h", sign, s / 86400, s % 86400 / 3600);
}

}  // namespace idem::cli
