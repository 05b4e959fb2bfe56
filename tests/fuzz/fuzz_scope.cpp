// Any ids and claims: a scope factory either refuses an argument with
// std::invalid_argument or builds a scope no other factory call can build from
// other arguments (a raw id never poses as another owner); every resolver
// answers exactly its factory's scope for the claims, or nothing, and never throws.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_input.hpp"
#include "idem/scope_resolvers.hpp"

namespace {

using idem::scope;

std::optional<scope> made(const std::function<scope()>& make) {
    try {
        return make();
    } catch (const std::invalid_argument&) {
        return std::nullopt;
    }
}

// The first claim of `names` present with a non-empty value.
std::optional<std::string> first_of(const idem::claims& who, std::initializer_list<std::string_view> names) {
    for (const auto name : names)
        if (auto it = who.find(name); it != who.end() && !it->second.empty()) return it->second;
    return std::nullopt;
}

void expect(const idem::scope_resolver& resolve, const idem::claims& who, const std::optional<scope>& expected) {
    if (resolve(who) != expected) throw std::logic_error("a resolver did not answer its factory's scope");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    const std::string a(idem::fuzz::part(parts, 0)), b(idem::fuzz::part(parts, 1));

    // Each successful call, named by its factory and arguments.
    std::vector<std::pair<std::string, scope>> built;
    const auto add = [&](std::string call, const std::function<scope()>& make) {
        if (auto s = made(make)) {
            if (s->text().empty() || s->is_global() != (call == "global")) throw std::logic_error("bad scope text");
            built.emplace_back(std::move(call), std::move(*s));
        }
    };
    add("global", [] { return scope::global(); });
    for (const auto& ids : {std::pair{a, b}, std::pair{b, a}}) {
        const std::string &x = ids.first, &y = ids.second;  // named, as lambdas cannot capture structured bindings
        add("user " + x, [&] { return scope::user(x); });
        add("tenant " + x, [&] { return scope::tenant(x); });
        add("client " + x, [&] { return scope::client(x); });
        add("user_and_tenant " + x + '\x1f' + y, [&] { return scope::user_and_tenant(x, y); });
        add("custom " + x + '\x1f' + y, [&] { return scope::custom(x, y); });
    }
    for (std::size_t i = 0; i < built.size(); ++i)
        for (std::size_t j = i + 1; j < built.size(); ++j)
            if (built[i].second == built[j].second && built[i].first != built[j].first)
                throw std::logic_error("two different factory calls built the same scope");

    // Claims: the remaining parts as name=value.
    idem::claims who;
    for (std::size_t i = 2; i < parts.size(); ++i) {
        const auto equals = parts[i].find('=');
        if (equals != std::string_view::npos) who.emplace(parts[i].substr(0, equals), parts[i].substr(equals + 1));
    }
    const auto user = first_of(who, {idem::claim_names::subject, idem::claim_names::name_identifier});
    const auto client = first_of(who, {idem::claim_names::client_id, idem::claim_names::authorized_party});
    const auto tenant = first_of(who, {"tenant_id"});
    expect(idem::scopes::user(), who, user ? made([&] { return scope::user(*user); }) : std::nullopt);
    expect(idem::scopes::client(), who, client ? made([&] { return scope::client(*client); }) : std::nullopt);
    expect(idem::scopes::tenant("tenant_id"), who,
           tenant ? made([&] { return scope::tenant(*tenant); }) : std::nullopt);
    expect(idem::scopes::user_and_tenant("tenant_id"), who,
           user && tenant ? made([&] { return scope::user_and_tenant(*user, *tenant); }) : std::nullopt);
    expect(idem::scopes::global(), who, scope::global());
    if (auto custom = made([&] { return scope::custom(a, "probe"); })) {
        const auto value = first_of(who, {b});
        expect(idem::scopes::custom(a, [&](const idem::claims& c) { return first_of(c, {b}); }), who,
               value ? made([&] { return scope::custom(a, *value); }) : std::nullopt);
    } else {
        bool refused = false;
        try {
            (void)idem::scopes::custom(a, [](const idem::claims&) { return std::nullopt; });
        } catch (const std::invalid_argument&) {
            refused = true;
        }
        if (!refused) throw std::logic_error("a custom resolver accepted a kind the factory refuses");
    }
    return 0;
}
