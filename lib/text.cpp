#include "internal/text.hpp"

#include <stdexcept>

namespace idem::detail {

bool is_valid_utf8(std::string_view text) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const auto* const end = p + text.size();
    while (p < end) {
        const unsigned char c = *p;
        if (c < 0x80) {
            ++p;
            continue;
        }
        std::size_t length = 0;
        char32_t code = 0;
        char32_t min = 0;
        if ((c & 0xE0) == 0xC0) {
            length = 2, code = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            length = 3, code = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            length = 4, code = c & 0x07, min = 0x10000;
        } else {
            return false;  // a continuation byte or 0xF8..0xFF where a sequence must start
        }
        if (static_cast<std::size_t>(end - p) < length) return false;
        for (std::size_t i = 1; i < length; ++i) {
            if ((p[i] & 0xC0) != 0x80) return false;
            code = (code << 6) | (p[i] & 0x3F);
        }
        if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
        p += length;
    }
    return true;
}

void require_utf8(std::string_view text, std::string_view what) {
    if (!is_valid_utf8(text)) throw std::invalid_argument("idem: " + std::string(what) + " is not valid UTF-8");
}

void require_non_empty_utf8(std::string_view text, std::string_view what) {
    if (text.empty()) throw std::invalid_argument("idem: " + std::string(what) + " is empty");
    require_utf8(text, what);
}

void append_length_prefixed(std::string& out, std::string_view part) {
    out += std::to_string(part.size());
    out += ':';
    out += part;
}

}  // namespace idem::detail
