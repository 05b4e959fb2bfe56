#include "idem/http/message.hpp"

#include <algorithm>

namespace idem::http {

bool header_name_equals(std::string_view a, std::string_view b) noexcept {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

std::string_view response::header(std::string_view name) const {
    for (const auto& [n, v] : headers)
        if (header_name_equals(n, name)) return v;
    return {};
}

void response::set_header(std::string_view name, std::string_view value) {
    std::erase_if(headers, [&](const auto& h) { return header_name_equals(h.first, name); });
    headers.emplace_back(name, value);
}

}  // namespace idem::http
