// idem/http/key_header.hpp: parse the Idempotency-Key header field.
//
// The IETF draft's field is an RFC 8941 sf-string ("abc"); a bare key (abc), as
// Stripe's clients send it, is taken only where no RFC 8941 reader would read
// the field as something else. Exactly one field line; anything else is 400
// Idempotency.KeyInvalid:
//
//   auto parsed = idem::http::parse_key_header(values);
//   if (parsed.state == idem::http::key_state::valid) use(parsed.key);
//   headers.emplace("Idempotency-Key", idem::http::key_header_value(key));  // sending one
//
// Each accepted and refused form, with why: docs/http.md.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem::http {

enum class key_state {
    missing,  // no field line
    valid,    // `key` holds the unquoted key
    invalid,  // several field lines, a shape refused above, or a key keys::is_valid rejects
};

struct IDEM_API parsed_key {
    key_state state;
    std::string key;
};

// `field_values`: every field line of the header, one entry each.
[[nodiscard]] IDEM_API parsed_key parse_key_header(std::span<const std::string_view> field_values);

// The field value that sends `key`: the key itself where parse_key_header takes
// it bare (UUIDs, derived keys), else its sf-string ("a;b"). std::invalid_argument
// for a key keys::is_valid rejects.
[[nodiscard]] IDEM_API std::string key_header_value(std::string_view key);

}  // namespace idem::http
