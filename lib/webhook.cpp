#include "idem/webhook.hpp"

#include <array>

#include "idem/keys.hpp"
#include "internal/crypto.hpp"

namespace idem::webhook {
namespace {

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string hmac_sha256_hex(std::string_view secret, std::string_view body) {
    return detail::hex(detail::hmac_sha256(secret, body));
}

bool signature_matches(std::string_view secret, std::string_view body, std::string_view signature_hex) noexcept {
    std::array<std::byte, 32> given{};
    if (signature_hex.size() != given.size() * 2) return false;
    for (std::size_t i = 0; i < given.size(); ++i) {
        const int high = hex_value(signature_hex[2 * i]), low = hex_value(signature_hex[2 * i + 1]);
        if (high < 0 || low < 0) return false;
        given[i] = std::byte(static_cast<unsigned char>(high * 16 + low));
    }
    try {
        return detail::constant_time_equal(detail::hmac_sha256(secret, body), given);
    } catch (...) {
        return false;  // the HMAC itself failed: nothing verified
    }
}

record_key event_key(std::string_view provider, std::string_view event_id, const scope& owner) {
    return record_key("webhook:" + std::string(provider), owner, keys::from_message(event_id, provider));
}

}  // namespace idem::webhook
