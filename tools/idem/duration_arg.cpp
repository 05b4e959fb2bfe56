#include "duration_arg.hpp"

#include <algorithm>
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

struct unit_of_text {
    std::string_view name;
    std::chrono::milliseconds length;
};

constexpr unit_of_text units[] = {{"ms", 1ms}, {"s", 1s}, {"m", 1min}, {"h", 1h}, {"d", 24h}};

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// Short and without control bytes: fit to repeat in a message, on a terminal.
bool fit_to_show(std::string_view text) {
    return text.size() <= 64 && std::all_of(text.begin(), text.end(),
                                            [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

[[noreturn]] void reject(std::string_view text, std::string_view flag, std::string_view why) {
    const std::string value = fit_to_show(text) ? fmt::format("\"{}\"", text) : "the value";
    throw std::invalid_argument(fmt::format("idem: {}{}{} is no duration: {}; a duration is {}", flag,
                                            flag.empty() ? "" : " ", value, why, duration_forms));
}

}  // namespace

duration parse_duration(std::string_view text, std::string_view flag) {
    std::size_t digits_end = 0;
    while (digits_end < text.size() && is_digit(text[digits_end])) ++digits_end;
    const std::string_view digits = text.substr(0, digits_end), unit_text = text.substr(digits_end);
    if (digits.empty()) reject(text, flag, text.empty() ? "it is empty" : "it does not begin with a whole number");
    if (unit_text.empty()) reject(text, flag, "it has no unit");
    const unit_of_text* unit = nullptr;
    for (const unit_of_text& u : units)
        if (u.name == unit_text) unit = &u;
    if (unit == nullptr) {
        if (std::any_of(unit_text.begin(), unit_text.end(), [](char c) { return is_digit(c) || c == '.' || c == ','; }))
            reject(text, flag, "the number is not whole");
        reject(text, flag, fit_to_show(text) ? fmt::format("\"{}\" is no unit", unit_text) : "its unit is unknown");
    }
    std::uint64_t count = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    // duration counts nanoseconds in 64 bits: about 292 years.
    const auto limit = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(duration::max()).count() / unit->length.count());
    if (ec != std::errc() || count > limit) reject(text, flag, "it is too long (292 years at most)");
    return std::chrono::duration_cast<duration>(unit->length * static_cast<std::int64_t>(count));
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
