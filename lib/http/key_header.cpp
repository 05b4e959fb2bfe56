#include "idem/http/key_header.hpp"

#include <stdexcept>

#include "idem/keys.hpp"

namespace idem::http {
namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_lcalpha(char c) {
    return c >= 'a' && c <= 'z';
}
bool is_alpha(char c) {
    return is_lcalpha(c) || (c >= 'A' && c <= 'Z');
}
// RFC 9110 section 5.6.2.
bool is_tchar(char c) {
    return is_alpha(c) || is_digit(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// HTTP strips OWS (SP and HTAB) around a field value (RFC 9110 section 5.5) and
// RFC 8941 section 4.2 leading and trailing SP; an adapter may hand over either.
std::string_view trim_ows(std::string_view v) {
    const auto is_ows = [](char c) { return c == ' ' || c == '\t'; };
    while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
    while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
    return v;
}

// A cursor over the field value; every parser below consumes what it accepts
// and answers false, with the cursor anywhere, on anything RFC 8941 refuses.
struct input {
    std::string_view text;
    std::size_t at = 0;

    [[nodiscard]] bool done() const { return at == text.size(); }
    [[nodiscard]] char peek() const { return done() ? '\0' : text[at]; }
};

// RFC 8941 section 4.2.5: DQUOTE *(%x20-21 / %x23-5B / %x5D-7E / "\" (DQUOTE / "\")) DQUOTE.
bool parse_string(input& in, std::string* out) {
    if (in.peek() != '"') return false;
    ++in.at;
    while (!in.done()) {
        char c = in.text[in.at++];
        if (c == '"') return true;
        if (c == '\\') {
            if (in.done() || (in.peek() != '"' && in.peek() != '\\')) return false;
            c = in.text[in.at++];
        } else if (c < 0x20 || c > 0x7E) {
            return false;
        }
        if (out != nullptr) *out += c;
    }
    return false;  // no closing DQUOTE
}

// Section 4.2.4: an Integer (at most 15 digits) or a Decimal (at most 12 digits, a
// dot and 1 to 3 digits), with an optional leading minus.
bool parse_number(input& in) {
    if (in.peek() == '-') ++in.at;
    if (!is_digit(in.peek())) return false;
    std::size_t integer = 0, fraction = 0;
    bool decimal = false;
    while (is_digit(in.peek()) || (in.peek() == '.' && !decimal)) {
        if (in.text[in.at++] == '.') {
            if (integer > 12) return false;
            decimal = true;
        } else {
            ++(decimal ? fraction : integer);
        }
    }
    return decimal ? fraction >= 1 && fraction <= 3 : integer <= 15;
}

// Section 4.2.6: ( ALPHA / "*" ) *( tchar / ":" / "/" ).
bool parse_token(input& in) {
    if (!is_alpha(in.peek()) && in.peek() != '*') return false;
    ++in.at;
    while (is_tchar(in.peek()) || in.peek() == ':' || in.peek() == '/') ++in.at;
    return true;
}

// Section 4.2.7: ":" *(base64 alphabet and "=") ":".
bool parse_byte_sequence(input& in) {
    if (in.peek() != ':') return false;
    ++in.at;
    while (is_alpha(in.peek()) || is_digit(in.peek()) || in.peek() == '+' || in.peek() == '/' || in.peek() == '=')
        ++in.at;
    if (in.peek() != ':') return false;
    ++in.at;
    return true;
}

// Section 4.2.3.1: a parameter's value is any bare item.
bool parse_bare_item(input& in) {
    const char c = in.peek();
    if (c == '-' || is_digit(c)) return parse_number(in);
    if (c == '"') return parse_string(in, nullptr);
    if (c == ':') return parse_byte_sequence(in);
    if (c == '?') {
        ++in.at;
        if (in.peek() != '0' && in.peek() != '1') return false;
        ++in.at;
        return true;
    }
    return parse_token(in);
}

bool is_key_char(char c) {
    return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' || c == '.' || c == '*';
}

// Section 4.2.3.2: *( ";" *SP key [ "=" bare-item ] ), key = ( lcalpha / "*" )
// *( lcalpha / DIGIT / "_" / "-" / "." / "*" ).
bool parse_parameters(input& in) {
    while (in.peek() == ';') {
        ++in.at;
        while (in.peek() == ' ') ++in.at;
        if (!is_lcalpha(in.peek()) && in.peek() != '*') return false;
        ++in.at;
        while (is_key_char(in.peek())) ++in.at;
        if (in.peek() == '=') {
            ++in.at;
            if (!parse_bare_item(in)) return false;
        }
    }
    return true;
}

// The sf-string form: a String Item, its parameters well formed and ignored.
bool parse_string_item(std::string_view value, std::string& key) {
    input in{value};
    return parse_string(in, &key) && parse_parameters(in) && in.done();
}

// The bare form (a key sent unquoted, as Stripe's clients do) is not RFC 8941,
// so it is taken only where no RFC 8941 reading of the field gives it another
// meaning: not a Byte Sequence (":"), an Inner List ("(") or a Boolean ("?"),
// and holding no "," (a List, or field lines a proxy joined, RFC 9110 section
// 5.3) and no ";" (parameters to an RFC 8941 reader, part of the key to a bare one).
bool is_bare_key(std::string_view value) {
    if (value.empty() || value.front() == ':' || value.front() == '(' || value.front() == '?') return false;
    return value.find_first_of(",;") == std::string_view::npos;
}

}  // namespace

parsed_key parse_key_header(std::span<const std::string_view> field_values) {
    if (field_values.empty()) return {key_state::missing, {}};
    if (field_values.size() > 1) return {key_state::invalid, {}};
    const std::string_view value = trim_ows(field_values.front());
    std::string key;
    if (!value.empty() && value.front() == '"') {
        if (!parse_string_item(value, key)) return {key_state::invalid, {}};
    } else {
        if (!is_bare_key(value)) return {key_state::invalid, {}};
        key = value;
    }
    if (!keys::is_valid(key)) return {key_state::invalid, {}};
    return {key_state::valid, std::move(key)};
}

std::string key_header_value(std::string_view key) {
    if (!keys::is_valid(key)) throw std::invalid_argument("idem: not a valid idempotency key");
    // A valid key holds no DQUOTE or backslash, so its sf-string needs no escapes.
    if (is_bare_key(key)) return std::string(key);
    return '"' + std::string(key) + '"';
}

}  // namespace idem::http
