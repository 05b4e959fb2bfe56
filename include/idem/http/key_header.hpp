// idem/http/key_header.hpp: parse the Idempotency-Key header field.
//
// The value is an RFC 8941 sf-string ("abc") or a bare token (abc); unquoted,
// it must satisfy idem::keys::is_valid. Exactly one field line is allowed.
//
//   auto parsed = idem::http::parse_key_header(values);
//   if (parsed.state == idem::http::key_state::valid) use(parsed.key);
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem::http {

enum class key_state {
    missing,  // no field line
    valid,    // `key` holds the unquoted key
    invalid,  // several field lines, a malformed sf-string, or a key keys::is_valid rejects
};

struct IDEM_API parsed_key {
    key_state state;
    std::string key;
};

[[nodiscard]] IDEM_API parsed_key parse_key_header(std::span<const std::string_view> field_values);

}  // namespace idem::http
