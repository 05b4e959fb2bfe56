// idem/scope.hpp: who owns a record key.
//
// A scope is part of the record key, so the same key from two owners is two
// records. Scopes come only from these factories, so a raw id such as
// "user:42" can never pose as another owner:
//
//   auto s = idem::scope::tenant("acme");              // "tenant:acme"
//   auto p = idem::scope::user_and_tenant("42", "acme"); // "11:tenant:acme/user:42"
//   auto a = idem::scope::custom("account", "A-1");    // "account:A-1"
//   auto g = idem::scope::global();                    // shared by every caller, on purpose
//
// Every argument must be non-empty valid UTF-8, else std::invalid_argument.
#pragma once

#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem {

class IDEM_API scope {
public:
    static scope user(std::string_view id);
    static scope tenant(std::string_view id);
    static scope client(std::string_view id);
    static scope user_and_tenant(std::string_view user_id, std::string_view tenant_id);
    // kind: non-empty, no ':' or '/', not all ASCII digits, and not user, tenant,
    // client or global in any ASCII casing (those have their own factories).
    static scope custom(std::string_view kind, std::string_view value);
    static scope global();

    [[nodiscard]] const std::string& text() const noexcept { return text_; }
    [[nodiscard]] bool is_global() const noexcept { return text_ == "global"; }

    friend bool operator==(const scope&, const scope&) = default;

private:
    explicit scope(std::string text) : text_(std::move(text)) {}
    std::string text_;
};

}  // namespace idem
