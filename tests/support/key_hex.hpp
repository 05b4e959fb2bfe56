// A record key's digest as lowercase hex, whole (what `idem key` and the first
// schema's tables hold) or its first 16 bytes (the primary key of the SQL
// stores' rows): what a test's own SQL names a row by, e.g.
// "WHERE key_hash = '\\x" + record_id_hex(key) + "'" on PostgreSQL,
// "WHERE key_hash = X'" + record_id_hex(key) + "'" on SQLite.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "idem/record_key.hpp"

namespace idem::test {

[[nodiscard]] inline std::string hex_of(std::span<const std::byte> bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (const std::byte b : bytes) {
        out += digits[std::to_integer<unsigned>(b) >> 4];
        out += digits[std::to_integer<unsigned>(b) & 15];
    }
    return out;
}

[[nodiscard]] inline std::string digest_hex(const record_key& key) {
    return hex_of(key.digest());
}

[[nodiscard]] inline std::string record_id_hex(const record_key& key) {
    return hex_of(std::span(key.digest()).first(16));
}

}  // namespace idem::test
