// Text rules shared by keys, scopes, record keys and the HTTP fingerprint.
#pragma once

#include <string>
#include <string_view>

namespace idem::detail {

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
[[nodiscard]] bool is_valid_utf8(std::string_view text) noexcept;
// Throws std::invalid_argument naming `what` (never the text itself).
void require_utf8(std::string_view text, std::string_view what);
void require_non_empty_utf8(std::string_view text, std::string_view what);

// Appends "{byte length}:{part}": the framing that keeps ("a","bc") and ("ab","c") apart.
void append_length_prefixed(std::string& out, std::string_view part);

}  // namespace idem::detail
