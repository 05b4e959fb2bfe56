// --key-hash: a record's 64-hex-character digest (the SHA-256 of its storage
// key), or the 32 characters of its first 16 bytes, the SQL tables' key_hash.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace idem::cli {

// std::invalid_argument for anything but 64 or 32 hex digits (either case); a
// 16-character key hash, the form logs print, gets its own explanation.
[[nodiscard]] std::vector<std::byte> parse_digest(std::string_view text);

}  // namespace idem::cli
