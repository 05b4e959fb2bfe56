#include "idem/http/key_header.hpp"

#include "idem/keys.hpp"

namespace idem::http {
namespace {

std::string_view trim_ows(std::string_view v) {
    const auto is_ows = [](char c) { return c == ' ' || c == '\t'; };
    while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
    while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
    return v;
}

// RFC 8941 section 4.2.5: DQUOTE *(unescaped / "\" ( DQUOTE / "\" )) DQUOTE, nothing after it.
bool unquote_sf_string(std::string_view v, std::string& out) {
    if (v.size() < 2 || v.front() != '"' || v.back() != '"') return false;
    for (std::size_t i = 1; i + 1 < v.size(); ++i) {
        char c = v[i];
        if (c == '\\') {
            if (i + 2 >= v.size() || (v[i + 1] != '"' && v[i + 1] != '\\')) return false;
            c = v[++i];
        } else if (c == '"' || c < 0x20 || c > 0x7E) {
            return false;
        }
        out += c;
    }
    return true;
}

}  // namespace

parsed_key parse_key_header(std::span<const std::string_view> field_values) {
    if (field_values.empty()) return {key_state::missing, {}};
    if (field_values.size() > 1) return {key_state::invalid, {}};
    const std::string_view value = trim_ows(field_values.front());
    std::string key;
    if (!value.empty() && value.front() == '"') {
        if (!unquote_sf_string(value, key)) return {key_state::invalid, {}};
    } else {
        key = value;
    }
    if (!keys::is_valid(key)) return {key_state::invalid, {}};
    return {key_state::valid, std::move(key)};
}

}  // namespace idem::http
