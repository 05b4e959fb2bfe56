#include "redis_arg.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace idem::cli {
namespace {

[[noreturn]] void refuse(std::string_view why) {
    throw std::invalid_argument(fmt::format("idem: --redis: {}; the form is {}", why, redis_url_form));
}

int number_in(std::string_view text, int low, int high, std::string_view what) {
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < low || value > high)
        refuse(fmt::format("the {} must be a number from {} to {}", what, low, high));
    return value;
}

std::string unescaped(std::string_view text, std::string_view what) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        unsigned value = 0;
        const char* from = text.data() + i + 1;
        const auto [end, error] = std::from_chars(from, text.data() + std::min(text.size(), i + 3), value, 16);
        if (error != std::errc() || end != from + 2) refuse(fmt::format("a bad %-escape in the {}", what));
        out += static_cast<char>(value);
        i += 2;
    }
    if (out.find('\0') != std::string::npos) refuse(fmt::format("the {} holds a NUL", what));
    return out;
}

}  // namespace

redis_options parse_redis_url(std::string_view text) {
    constexpr std::string_view scheme = "redis://";
    if (!text.starts_with(scheme)) refuse("not a redis:// URL");
    text.remove_prefix(scheme.size());
    if (text.find_first_of("?#") != std::string_view::npos) refuse("query and fragment parts are not taken");

    redis_options options;
    const std::size_t slash = text.find('/');
    std::string_view authority = text.substr(0, slash);
    if (slash != std::string_view::npos) {
        const std::string_view path = text.substr(slash + 1);
        if (!path.empty()) options.database = number_in(path, 0, 1 << 20, "database");
    }
    if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
        const std::string_view credentials = authority.substr(0, at);
        const std::size_t colon = credentials.find(':');
        if (colon == std::string_view::npos) refuse("the part before @ must be USER:PASSWORD or :PASSWORD");
        options.user = unescaped(credentials.substr(0, colon), "user");
        options.password = unescaped(credentials.substr(colon + 1), "password");
        if (options.password.empty()) refuse("the password is empty");
        authority.remove_prefix(at + 1);
    }
    std::string_view host = authority;
    if (authority.starts_with('[')) {
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos) refuse("an IPv6 host has no closing ]");
        host = authority.substr(1, close - 1);
        const std::string_view rest = authority.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') refuse("only :PORT may follow a bracketed host");
            options.port = number_in(rest.substr(1), 1, 65535, "port");
        }
    } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        options.port = number_in(authority.substr(colon + 1), 1, 65535, "port");
    }
    if (host.empty()) refuse("the host is empty");
    options.host = std::string(host);
    return options;
}

}  // namespace idem::cli
