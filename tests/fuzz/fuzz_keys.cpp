// Any message ids, consumers, operations and mode names: from_message gives a
// valid key unique to its (message, consumer) pair or refuses with
// std::invalid_argument; to_uuid_v5 gives a canonical version-5 UUID, the same
// for the same derived key; parse_mode accepts exactly off, observe and enforce
// in any ASCII casing.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "idem/keys.hpp"
#include "idem/mode.hpp"

namespace {

std::optional<std::string> message_key(std::string_view message_id, std::string_view consumer) {
    try {
        return idem::keys::from_message(message_id, consumer);
    } catch (const std::invalid_argument&) {
        return std::nullopt;
    }
}

bool is_canonical_v5(const std::string& uuid) {
    if (uuid.size() != 36) return false;
    for (std::size_t i = 0; i < uuid.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (uuid[i] == '-')) return false;
        if (!dash && std::string_view("0123456789abcdef").find(uuid[i]) == std::string_view::npos) return false;
    }
    return uuid[14] == '5' && std::string_view("89ab").find(uuid[19]) != std::string_view::npos;
}

std::optional<idem::mode> reference_mode(std::string_view text) {
    std::string lower(text);
    for (char& c : lower)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (lower == "off") return idem::mode::off;
    if (lower == "observe") return idem::mode::observe;
    if (lower == "enforce") return idem::mode::enforce;
    return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    const auto first = idem::fuzz::part(parts, 0), second = idem::fuzz::part(parts, 1);

    const auto key = message_key(first, second);
    if (key && (!idem::keys::is_valid(*key) || key != message_key(first, second)))
        throw std::logic_error("from_message gave an invalid or unstable key");
    if (key && first != second && key == message_key(second, first))
        throw std::logic_error("swapping message id and consumer kept the key");

    const std::vector<std::string_view> ids(parts.begin() + 1, parts.end());
    try {
        const std::string uuid = idem::keys::to_uuid_v5(first, ids);
        if (!is_canonical_v5(uuid) || uuid != idem::keys::to_uuid_v5(first, ids))
            throw std::logic_error("to_uuid_v5 gave a malformed or unstable UUID");
    } catch (const std::invalid_argument&) {
        // an empty operation or invalid UTF-8, as derive refuses
        bool derive_refuses = false;
        try {
            (void)idem::keys::derive(first, ids);
        } catch (const std::invalid_argument&) {
            derive_refuses = true;
        }
        if (!derive_refuses) throw std::logic_error("to_uuid_v5 refused what derive accepts");
    }

    const auto expected = reference_mode(first);
    try {
        if (idem::parse_mode(first) != expected) throw std::logic_error("parse_mode accepted the wrong mode");
    } catch (const std::invalid_argument&) {
        if (expected) throw std::logic_error("parse_mode refused a mode name");
    }
    return 0;
}
