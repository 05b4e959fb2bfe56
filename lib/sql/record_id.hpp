// The primary key of a record row in the SQL stores: the first 16 bytes of the
// record key's SHA-256 digest. Among n records the chance that two share it is
// below n^2 / 2^129 (under 2e-15 for 10^12 records), and half the width keeps
// the primary key's index twice as dense as the whole digest would.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "idem/record_key.hpp"
#include "idem/scope.hpp"
#include "idem/store_admin.hpp"
#include "internal/crypto.hpp"

namespace idem::detail {

inline constexpr std::size_t record_id_bytes = 16;
using record_id_type = std::array<std::byte, record_id_bytes>;

[[nodiscard]] inline std::span<const std::byte, record_id_bytes> record_id(
    const std::array<std::byte, 32>& digest) noexcept {
    return std::span<const std::byte, 32>(digest).first<record_id_bytes>();
}

// A row's scope id: the first 8 bytes of the SHA-256 of scope::text(), kept
// so that an operator can list one scope's records (store_admin::completed_since)
// while rows hold no scope text. Like the key hash it can be matched against a
// guessed scope, and cannot be read back.
inline constexpr std::size_t scope_id_bytes = 8;
using scope_id_type = std::array<std::byte, scope_id_bytes>;

[[nodiscard]] inline scope_id_type scope_id(const scope& owner) {
    const sha256_digest digest = sha256(owner.text());
    scope_id_type id;
    std::copy_n(digest.begin(), scope_id_bytes, id.begin());
    return id;
}

// What store_admin::inspect takes: a whole digest, or its first 16 bytes as
// the table shows them; std::invalid_argument for any other length.
[[nodiscard]] inline record_id_type record_id_of(std::span<const std::byte> digest_or_id) {
    if (digest_or_id.size() != 32 && digest_or_id.size() != record_id_bytes)
        throw std::invalid_argument("idem: a record is named by its 32-byte digest or the digest's first 16 bytes");
    record_id_type id;
    std::copy_n(digest_or_id.begin(), record_id_bytes, id.begin());
    return id;
}

// What store_admin::recent takes: std::invalid_argument for a limit outside 1 to
// max_recent_records, or a namespace no record_key could have.
inline void check_recent_arguments(std::string_view name_space, std::size_t limit) {
    if (limit == 0 || limit > max_recent_records)
        throw std::invalid_argument("idem: list 1 to " + std::to_string(max_recent_records) + " recent records, not " +
                                    std::to_string(limit));
    (void)record_key(name_space, "any");  // the namespace's own checks, with their messages
}

}  // namespace idem::detail
