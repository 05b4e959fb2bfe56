#include "idem/scope.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "internal/text.hpp"

namespace idem {
namespace {

bool equals_ascii_case_insensitive(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
               return lower(x) == lower(y);
           });
}

void check_custom_kind(std::string_view kind) {
    detail::require_non_empty_utf8(kind, "scope kind");
    if (kind.find_first_of(":/") != std::string_view::npos)
        throw std::invalid_argument("idem: a custom scope kind cannot contain ':' or '/'");
    if (std::all_of(kind.begin(), kind.end(), [](char c) { return c >= '0' && c <= '9'; }))
        throw std::invalid_argument("idem: a custom scope kind cannot be all digits");
    static constexpr std::array<std::string_view, 4> reserved{"user", "tenant", "client", "global"};
    for (std::string_view name : reserved) {
        if (equals_ascii_case_insensitive(kind, name))
            throw std::invalid_argument("idem: the scope kind '" + std::string(name) +
                                        "' is reserved; use its own factory");
    }
}

std::string owner(std::string_view kind, std::string_view id, std::string_view what) {
    detail::require_non_empty_utf8(id, what);
    std::string text;
    text.reserve(kind.size() + 1 + id.size());
    text.append(kind).append(":").append(id);
    return text;
}

}  // namespace

scope scope::user(std::string_view id) {
    return scope(owner("user", id, "user id"));
}
scope scope::tenant(std::string_view id) {
    return scope(owner("tenant", id, "tenant id"));
}
scope scope::client(std::string_view id) {
    return scope(owner("client", id, "client id"));
}

scope scope::user_and_tenant(std::string_view user_id, std::string_view tenant_id) {
    const std::string tenant_part = owner("tenant", tenant_id, "tenant id");
    const std::string user_part = owner("user", user_id, "user id");
    std::string text;
    detail::append_length_prefixed(text, tenant_part);
    text += '/';
    text += user_part;
    return scope(std::move(text));
}

scope scope::custom(std::string_view kind, std::string_view value) {
    check_custom_kind(kind);
    return scope(owner(kind, value, "scope value"));
}

scope scope::global() {
    return scope("global");
}

}  // namespace idem
