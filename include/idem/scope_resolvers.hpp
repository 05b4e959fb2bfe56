// idem/scope_resolvers.hpp: turn the caller's identity claims into a scope.
//
// The application's auth layer supplies the claims (from a JWT, an mTLS
// certificate, a session); a resolver answers the scope, or nothing when it
// cannot tell who the caller is. Global is an explicit choice, never a fallback.
//
//   idem::claims who{{"sub", "42"}, {"tenant_id", "acme"}};
//   auto resolve = idem::scopes::user_and_tenant("tenant_id");
//   if (auto s = resolve(who)) use(*s);      // "11:tenant:acme/user:42"
//   else reject_unscoped();
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "idem/export.hpp"
#include "idem/scope.hpp"

namespace idem {

// Claim name to value, as the application's auth layer decoded them.
using claims = std::map<std::string, std::string, std::less<>>;

using scope_resolver = std::function<std::optional<scope>(const claims&)>;

namespace claim_names {
inline constexpr std::string_view subject = "sub";
inline constexpr std::string_view name_identifier =
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/nameidentifier";
inline constexpr std::string_view client_id = "client_id";
inline constexpr std::string_view authorized_party = "azp";
}  // namespace claim_names

namespace scopes {
// sub, then the name-identifier claim.
IDEM_API scope_resolver user();
// client_id, then azp: machine callers on client credentials.
IDEM_API scope_resolver client();
// The tenant id from the named claim.
IDEM_API scope_resolver tenant(std::string claim);
// The user (as user()) within the tenant from the named claim; both must resolve.
IDEM_API scope_resolver user_and_tenant(std::string tenant_claim);
// A custom kind whose value `value_of` extracts (nullopt or empty: unresolved).
IDEM_API scope_resolver custom(std::string kind, std::function<std::optional<std::string>(const claims&)> value_of);
// Every caller shares the key space: an explicit choice.
IDEM_API scope_resolver global();
}  // namespace scopes

}  // namespace idem
