#include "idem/mode.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "idem/execution.hpp"

namespace idem {

std::string_view to_string(mode m) noexcept {
    switch (m) {
        case mode::off: return "off";
        case mode::observe: return "observe";
        case mode::enforce: return "enforce";
    }
    return "unknown";
}

mode parse_mode(std::string_view text) {
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
    for (mode m : {mode::off, mode::observe, mode::enforce}) {
        if (lower == to_string(m)) return m;
    }
    throw std::invalid_argument("idem: unknown mode; expected off, observe or enforce");
}

std::string_view to_string(execution_status s) noexcept {
    switch (s) {
        case execution_status::executed: return "executed";
        case execution_status::replayed: return "replayed";
        case execution_status::in_flight: return "in_flight";
        case execution_status::key_reused: return "key_reused";
        case execution_status::expired: return "expired";
    }
    return "unknown";
}

}  // namespace idem
