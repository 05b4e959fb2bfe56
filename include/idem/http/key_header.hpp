// idem/http/key_header.hpp: parse the Idempotency-Key header field.
//
// The IETF draft makes the field an RFC 8941 Item whose value is a String
// ("abc"); idem also takes a bare key (abc), as Stripe's clients send it.
// Either way the key must satisfy idem::keys::is_valid, and exactly one field
// line is allowed.
//
//   auto parsed = idem::http::parse_key_header(values);
//   if (parsed.state == idem::http::key_state::valid) use(parsed.key);
//   headers.emplace("Idempotency-Key", idem::http::key_header_value(key));  // sending one
//
// What is accepted, and why. SP and HTAB around the value are dropped: HTTP
// strips them from every field value, and RFC 8941 strips leading and trailing
// SP.
//
// An sf-string (RFC 8941 section 3.3.3) is printable ASCII between DQUOTEs,
// with \" and \\ the only escapes. Its parameters ("abc";v=1) are parsed
// strictly and ignored: RFC 8941 allows them on every Item, the draft defines
// none, and RFC 8941 (section 2) discourages fields from making an unknown
// parameter an error; "abc" and "abc";v=1 name the same key. SP before ";" or
// after the item, or a malformed parameter, fails the whole field, as RFC 8941
// parsing does.
//
// A bare key is taken only where no RFC 8941 reading of the field means
// something else: never a Byte Sequence (:YWJj: is three bytes to an RFC 8941
// reader, another key to a bare one), an Inner List ("(a b)"), a List or field
// lines a proxy joined ("a, b"), a Boolean (?1) or a value holding ";"
// (parameters, to an RFC 8941 reader). Tokens, digits first or not (UUIDs,
// derived keys), are taken as they are.
//
// Everything else is invalid (400 Idempotency.KeyInvalid): several field
// lines, any other shape, a key keys::is_valid rejects.
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
