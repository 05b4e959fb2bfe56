// Which of Redis Cluster's 16384 slots a key lives in, as the cluster specification defines it.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem::redis_detail {

inline constexpr std::uint16_t slot_count = 16384;

// CRC16-XMODEM (polynomial 0x1021, initial value 0), as Redis uses.
[[nodiscard]] std::uint16_t crc16(std::string_view bytes) noexcept;

// The part of a key that is hashed: between the first '{' and the next '}' after it,
// when that is non-empty; otherwise the whole key. Keys with the same tag share a slot.
[[nodiscard]] std::string_view hash_tag(std::string_view key) noexcept;

// crc16(hash_tag(key)) modulo 16384.
[[nodiscard]] std::uint16_t hash_slot(std::string_view key) noexcept;

// A short tag (decimal digits) whose crc16 falls in `slot`: a key holding
// "{tag}" lives in that slot, beside the keys it belongs with.
[[nodiscard]] std::string_view tag_for_slot(std::uint16_t slot);

}  // namespace idem::redis_detail
