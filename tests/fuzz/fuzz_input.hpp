// Cutting one fuzz input into the several arguments a target needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace idem::fuzz {

// The input's parts between separators (0x1f, the ASCII unit separator, by
// default); always at least one, possibly empty, part.
inline std::vector<std::string_view> split(std::string_view input, char separator = '\x1f') {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= input.size(); ++i) {
        if (i == input.size() || input[i] == separator) {
            parts.push_back(input.substr(start, i - start));
            start = i + 1;
        }
    }
    return parts;
}

// Part `i`, or empty when the input has fewer.
inline std::string_view part(const std::vector<std::string_view>& parts, std::size_t i) {
    return i < parts.size() ? parts[i] : std::string_view{};
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace idem::fuzz
