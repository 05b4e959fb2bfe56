// idem/record_key.hpp: the identity of one idempotency record.
//
// A record key is a namespace (the operation family, e.g. "payments.capture"),
// a scope (who owns it) and the key itself. All three are compared byte for
// byte: case and trailing spaces matter.
//
//   idem::record_key k{"payments.capture", idem::scope::tenant("acme"), "order-17"};
//   k.to_storage_key();  // "idem:v3:16:payments.capture|11:tenant:acme|8:order-17"
//   k.key_hash();        // 16 hex characters: the only name logs ever print
//
// Parts must be non-empty valid UTF-8 within the size limits, else std::invalid_argument.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "idem/export.hpp"
#include "idem/scope.hpp"

namespace idem {

class IDEM_API record_key {
public:
    static constexpr std::string_view default_prefix = "idem:v3:";
    static constexpr std::size_t max_namespace_bytes = 256;
    static constexpr std::size_t max_key_bytes = 1024;

    // A global key (scope::global()).
    record_key(std::string_view name_space, std::string_view key);
    record_key(std::string_view name_space, scope owner, std::string_view key);

    [[nodiscard]] const std::string& name_space() const noexcept { return namespace_; }
    [[nodiscard]] const idem::scope& owner() const noexcept { return scope_; }
    [[nodiscard]] const std::string& key() const noexcept { return key_; }

    // prefix + "{n}:{namespace}|{n}:{scope}|{n}:{key}", n the UTF-8 byte length of each part.
    [[nodiscard]] std::string to_storage_key(std::string_view prefix = default_prefix) const;
    // SHA-256 of to_storage_key(); SQL stores key their rows by its first 16 bytes.
    [[nodiscard]] const std::array<std::byte, 32>& digest() const noexcept { return digest_; }
    // First 16 lowercase hex characters of digest(): safe to log.
    [[nodiscard]] std::string key_hash() const;

    friend bool operator==(const record_key& a, const record_key& b) noexcept {
        return a.digest_ == b.digest_ && a.namespace_ == b.namespace_ && a.scope_ == b.scope_ && a.key_ == b.key_;
    }

private:
    std::string namespace_;
    idem::scope scope_;
    std::string key_;
    std::array<std::byte, 32> digest_;
};

// Lowercase hex of the first 8 bytes of a digest.
[[nodiscard]] IDEM_API std::string key_hash_of(const std::array<std::byte, 32>& digest);

}  // namespace idem
