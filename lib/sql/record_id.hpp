// The primary key of a record row in the SQL stores: the first 16 bytes of the
// record key's SHA-256 digest. Among n records the chance that two share it is
// below n^2 / 2^129 (under 2e-15 for 10^12 records), and half the width keeps
// the primary key's index twice as dense as the whole digest would.
#pragma once

#include <array>
#include <cstddef>
#include <span>

namespace idem::detail {

inline constexpr std::size_t record_id_bytes = 16;

[[nodiscard]] inline std::span<const std::byte, record_id_bytes> record_id(
    const std::array<std::byte, 32>& digest) noexcept {
    return std::span<const std::byte, 32>(digest).first<record_id_bytes>();
}

}  // namespace idem::detail
