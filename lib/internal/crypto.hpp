// Hashing and randomness on OpenSSL's libcrypto, kept out of public headers.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem::detail {

using sha256_digest = std::array<std::byte, 32>;

[[nodiscard]] IDEM_API sha256_digest sha256(std::string_view data);
[[nodiscard]] IDEM_API std::array<std::byte, 20> sha1(std::span<const std::byte> data);
[[nodiscard]] sha256_digest hmac_sha256(std::string_view key, std::string_view data);
// Unpadded base64url (RFC 4648 section 5).
[[nodiscard]] std::string base64url(std::span<const std::byte> data);
[[nodiscard]] IDEM_API std::string hex(std::span<const std::byte> data);
IDEM_API void random_bytes(std::span<std::byte> out);
// A version 4 UUID (RFC 9562) from random_bytes, in lowercase canonical text.
[[nodiscard]] IDEM_API std::string random_uuid();
// Compares in time that depends only on the lengths.
[[nodiscard]] bool constant_time_equal(std::span<const std::byte> a, std::span<const std::byte> b) noexcept;

}  // namespace idem::detail
