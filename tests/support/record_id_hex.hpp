// The primary key of a record's row in the SQL stores (the digest's first 16
// bytes) as lowercase hex: what a test's own SQL names a row by, e.g.
// "WHERE key_hash = '\\x" + record_id_hex(key) + "'" on PostgreSQL,
// "WHERE key_hash = X'" + record_id_hex(key) + "'" on SQLite.
#pragma once

#include <cstddef>
#include <string>

#include "idem/record_key.hpp"

namespace idem::test {

[[nodiscard]] inline std::string record_id_hex(const record_key& key) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < 16; ++i) {
        const auto v = std::to_integer<unsigned>(key.digest()[i]);
        out += digits[v >> 4];
        out += digits[v & 15];
    }
    return out;
}

}  // namespace idem::test
