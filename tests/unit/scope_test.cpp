#include <doctest/doctest.h>

#include <stdexcept>

#include "idem/scope.hpp"
#include "idem/scope_resolvers.hpp"

using namespace idem;

TEST_CASE("scope factories write their kind first") {
    CHECK(scope::user("42").text() == "user:42");
    CHECK(scope::tenant("acme").text() == "tenant:acme");
    CHECK(scope::client("svc").text() == "client:svc");
    CHECK(scope::custom("account", "A-1").text() == "account:A-1");
    CHECK(scope::global().text() == "global");
    CHECK(scope::global().is_global());
    CHECK_FALSE(scope::tenant("global").is_global());
}

TEST_CASE("user_and_tenant prefixes the tenant part with its UTF-8 byte length") {
    CHECK(scope::user_and_tenant("42", "acme").text() == "11:tenant:acme/user:42");
    CHECK(scope::user_and_tenant("u", "é").text() == "9:tenant:é/user:u");
    // The length prefix keeps a '/' inside an id from shifting the boundary.
    CHECK(scope::user_and_tenant("b", "a/user:x").text() != scope::user_and_tenant("x/user:b", "a").text());
}

TEST_CASE("a tenant id that looks like another owner never matches that owner") {
    CHECK(scope::tenant("user:42") != scope::user("42"));
    CHECK(scope::custom("account", "global") != scope::global());
}

TEST_CASE("custom rejects empty, ':' or '/', all-digit and reserved kinds in any casing") {
    for (const char* kind : {"", "a:b", "a/b", ":", "/", "0", "123", "user", "USER", "User", "tenant", "TeNaNt",
                             "client", "CLIENT", "global", "Global", "gLoBaL"}) {
        CAPTURE(kind);
        CHECK_THROWS_AS((void)scope::custom(kind, "v"), std::invalid_argument);
    }
    CHECK_NOTHROW((void)scope::custom("users", "v"));
    CHECK_NOTHROW((void)scope::custom("1a", "v"));
    CHECK_NOTHROW((void)scope::custom("ünicode", "v"));
}

TEST_CASE("scope arguments must be non-empty valid UTF-8") {
    const std::string bad("\xC3\x28");
    CHECK_THROWS_AS((void)scope::user(""), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::tenant(""), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::client(""), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::custom("account", ""), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::user_and_tenant("", "t"), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::user_and_tenant("u", ""), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::user(bad), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::custom(bad, "v"), std::invalid_argument);
    CHECK_THROWS_AS((void)scope::custom("account", bad), std::invalid_argument);
}

TEST_CASE("the user resolver reads sub, then the name-identifier claim") {
    const auto resolve = scopes::user();
    CHECK(resolve({{"sub", "42"}, {std::string(claim_names::name_identifier), "7"}}) == scope::user("42"));
    CHECK(resolve({{std::string(claim_names::name_identifier), "7"}}) == scope::user("7"));
    CHECK_FALSE(resolve({}).has_value());
    CHECK_FALSE(resolve({{"sub", ""}}).has_value());
}

TEST_CASE("the client resolver reads client_id, then azp") {
    const auto resolve = scopes::client();
    CHECK(resolve({{"client_id", "svc"}, {"azp", "other"}}) == scope::client("svc"));
    CHECK(resolve({{"azp", "other"}}) == scope::client("other"));
    CHECK_FALSE(resolve({{"sub", "42"}}).has_value());
}

TEST_CASE("tenant, user_and_tenant and custom resolvers answer nothing when a claim is missing") {
    CHECK(scopes::tenant("tid")({{"tid", "acme"}}) == scope::tenant("acme"));
    CHECK_FALSE(scopes::tenant("tid")({{"sub", "42"}}).has_value());
    CHECK(scopes::user_and_tenant("tid")({{"sub", "42"}, {"tid", "acme"}}) == scope::user_and_tenant("42", "acme"));
    CHECK_FALSE(scopes::user_and_tenant("tid")({{"sub", "42"}}).has_value());
    CHECK_FALSE(scopes::user_and_tenant("tid")({{"tid", "acme"}}).has_value());
    const auto account = scopes::custom("account", [](const claims& c) -> std::optional<std::string> {
        if (auto it = c.find("acct"); it != c.end()) return it->second;
        return std::nullopt;
    });
    CHECK(account({{"acct", "A-1"}}) == scope::custom("account", "A-1"));
    CHECK_FALSE(account({}).has_value());
    CHECK_THROWS_AS(scopes::custom("user", [](const claims&) { return std::optional<std::string>("x"); }),
                    std::invalid_argument);
}

TEST_CASE("a claim with invalid UTF-8 resolves to no scope rather than throwing") {
    CHECK_FALSE(scopes::user()({{"sub", std::string("\xFF")}}).has_value());
}

TEST_CASE("global is an explicit resolver, never a fallback") {
    CHECK(scopes::global()({}) == scope::global());
    CHECK_FALSE(scopes::user()({}).has_value());
}
