#include "idem/record_key.hpp"

#include <stdexcept>

#include "internal/crypto.hpp"
#include "internal/text.hpp"

namespace idem {
namespace {

std::string checked_part(std::string_view part, std::string_view what, std::size_t max_bytes) {
    detail::require_non_empty_utf8(part, what);
    if (part.size() > max_bytes)
        throw std::invalid_argument("idem: " + std::string(what) + " is longer than " + std::to_string(max_bytes) +
                                    " bytes");
    return std::string(part);
}

}  // namespace

record_key::record_key(std::string_view name_space, std::string_view key)
    : record_key(name_space, scope::global(), key) {}

record_key::record_key(std::string_view name_space, scope owner, std::string_view key)
    : namespace_(checked_part(name_space, "namespace", max_namespace_bytes)),
      scope_(std::move(owner)),
      key_(checked_part(key, "key", max_key_bytes)),
      digest_(detail::sha256(to_storage_key())) {}

std::string record_key::to_storage_key(std::string_view prefix) const {
    std::string out;
    out.reserve(prefix.size() + namespace_.size() + scope_.text().size() + key_.size() + 16);
    out += prefix;
    detail::append_length_prefixed(out, namespace_);
    out += '|';
    detail::append_length_prefixed(out, scope_.text());
    out += '|';
    detail::append_length_prefixed(out, key_);
    return out;
}

std::string record_key::key_hash() const {
    return key_hash_of(digest_);
}

std::string key_hash_of(const std::array<std::byte, 32>& digest) {
    return detail::hex(std::span(digest.data(), 8));
}

}  // namespace idem
