// --key-hash: a record's 64-hex-character digest (the SHA-256 of its storage key).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace idem::cli {

// std::invalid_argument for anything but 64 hex digits (either case); a
// 16-character key hash, the form logs print, gets its own explanation.
[[nodiscard]] std::array<std::byte, 32> parse_digest(std::string_view text);

}  // namespace idem::cli
