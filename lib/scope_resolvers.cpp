#include "idem/scope_resolvers.hpp"

#include <stdexcept>

namespace idem::scopes {
namespace {

// The first claim present with a non-empty value.
std::optional<std::string> first_of(const claims& who, std::initializer_list<std::string_view> names) {
    for (std::string_view name : names) {
        if (auto it = who.find(name); it != who.end() && !it->second.empty()) return it->second;
    }
    return std::nullopt;
}

std::optional<std::string> user_id(const claims& who) {
    return first_of(who, {claim_names::subject, claim_names::name_identifier});
}

// A claim that is present but cannot form a scope (invalid UTF-8) resolves to nothing.
template <class Make>
std::optional<scope> guarded(Make make) {
    try {
        return make();
    } catch (const std::invalid_argument&) {
        return std::nullopt;
    }
}

}  // namespace

scope_resolver user() {
    return [](const claims& who) -> std::optional<scope> {
        auto id = user_id(who);
        if (!id) return std::nullopt;
        return guarded([&] { return scope::user(*id); });
    };
}

scope_resolver client() {
    return [](const claims& who) -> std::optional<scope> {
        auto id = first_of(who, {claim_names::client_id, claim_names::authorized_party});
        if (!id) return std::nullopt;
        return guarded([&] { return scope::client(*id); });
    };
}

scope_resolver tenant(std::string claim) {
    return [claim = std::move(claim)](const claims& who) -> std::optional<scope> {
        auto id = first_of(who, {claim});
        if (!id) return std::nullopt;
        return guarded([&] { return scope::tenant(*id); });
    };
}

scope_resolver user_and_tenant(std::string tenant_claim) {
    return [tenant_claim = std::move(tenant_claim)](const claims& who) -> std::optional<scope> {
        auto user = user_id(who);
        auto tenant = first_of(who, {tenant_claim});
        if (!user || !tenant) return std::nullopt;
        return guarded([&] { return scope::user_and_tenant(*user, *tenant); });
    };
}

scope_resolver custom(std::string kind, std::function<std::optional<std::string>(const claims&)> value_of) {
    (void)scope::custom(kind, "probe");  // reject a bad kind when the resolver is built, not per request
    return [kind = std::move(kind), value_of = std::move(value_of)](const claims& who) -> std::optional<scope> {
        auto value = value_of(who);
        if (!value || value->empty()) return std::nullopt;
        return guarded([&] { return scope::custom(kind, *value); });
    };
}

scope_resolver global() {
    return [](const claims&) -> std::optional<scope> { return scope::global(); };
}

}  // namespace idem::scopes
