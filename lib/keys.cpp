#include "idem/keys.hpp"

#include <stdexcept>

#include "internal/crypto.hpp"
#include "internal/text.hpp"

namespace idem::keys {
namespace {

constexpr std::size_t max_key_length = 255;

std::string joined(std::string_view operation, std::span<const std::string_view> ids) {
    detail::require_non_empty_utf8(operation, "operation");
    std::string out;
    detail::append_length_prefixed(out, operation);
    for (std::string_view id : ids) {
        detail::require_utf8(id, "id");
        out += '|';
        detail::append_length_prefixed(out, id);
    }
    return out;
}

std::array<std::byte, 16> parse_uuid(std::string_view text) {
    std::array<std::byte, 16> out{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '-') continue;
        const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
        out[n / 2] |= std::byte(static_cast<unsigned char>(nibble(text[i]) << (n % 2 == 0 ? 4 : 0)));
        ++n;
    }
    return out;
}

}  // namespace

bool is_valid(std::string_view key) noexcept {
    if (key.empty() || key.size() > max_key_length) return false;
    for (char c : key) {
        if (c < 0x21 || c > 0x7E || c == '"' || c == '\\') return false;
    }
    return true;
}

std::string derive(std::string_view operation, std::span<const std::string_view> ids) {
    std::string key = joined(operation, ids);
    if (is_valid(key)) return key;
    const auto digest = detail::sha256(key);
    return "h:" + detail::base64url(digest);
}

std::string derive(std::string_view operation, std::initializer_list<std::string_view> ids) {
    return derive(operation, std::span<const std::string_view>(ids.begin(), ids.size()));
}

std::string from_message(std::string_view message_id, std::string_view consumer) {
    return derive("message", {consumer, message_id});
}

std::string to_uuid_v5(std::string_view operation, std::span<const std::string_view> ids) {
    static const auto namespace_bytes = parse_uuid(uuid_namespace);
    const std::string name = derive(operation, ids);
    std::string input(reinterpret_cast<const char*>(namespace_bytes.data()), namespace_bytes.size());
    input += name;
    auto hash = detail::sha1(std::as_bytes(std::span(input.data(), input.size())));
    hash[6] = (hash[6] & std::byte{0x0F}) | std::byte{0x50};  // version 5
    hash[8] = (hash[8] & std::byte{0x3F}) | std::byte{0x80};  // RFC 9562 variant
    const std::string hex = detail::hex(std::span(hash.data(), 16));
    return hex.substr(0, 8) + '-' + hex.substr(8, 4) + '-' + hex.substr(12, 4) + '-' + hex.substr(16, 4) + '-' +
           hex.substr(20, 12);
}

std::string to_uuid_v5(std::string_view operation, std::initializer_list<std::string_view> ids) {
    return to_uuid_v5(operation, std::span<const std::string_view>(ids.begin(), ids.size()));
}

}  // namespace idem::keys
