#include "hash_slot.hpp"

#include <array>
#include <string>
#include <vector>

namespace idem::redis_detail {
namespace {

constexpr std::array<std::uint16_t, 256> crc16_table = [] {
    std::array<std::uint16_t, 256> table{};
    for (unsigned byte = 0; byte < 256; ++byte) {
        auto crc = static_cast<std::uint16_t>(byte << 8);
        for (int bit = 0; bit < 8; ++bit)
            crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
        table[byte] = crc;
    }
    return table;
}();

}  // namespace

std::uint16_t crc16(std::string_view bytes) noexcept {
    std::uint16_t crc = 0;
    for (const char c : bytes)
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
    return crc;
}

std::string_view hash_tag(std::string_view key) noexcept {
    const auto open = key.find('{');
    if (open == std::string_view::npos) return key;
    const auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

std::uint16_t hash_slot(std::string_view key) noexcept {
    return crc16(hash_tag(key)) % slot_count;
}

std::string_view tag_for_slot(std::uint16_t slot) {
    // The first decimal number landing in each slot: about 160,000 numbers
    // cover all 16384 (a millisecond's work, done once).
    static const std::vector<std::string> tags = [] {
        std::vector<std::string> found(slot_count);
        std::size_t missing = slot_count;
        for (unsigned long n = 0; missing > 0; ++n) {
            std::string tag = std::to_string(n);
            std::string& at = found[crc16(tag) % slot_count];
            if (!at.empty()) continue;
            at = std::move(tag);
            --missing;
        }
        return found;
    }();
    return tags[slot % slot_count];
}

}  // namespace idem::redis_detail
