#include "internal/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace idem::detail {
namespace {

// Fetched once: OpenSSL 3 otherwise looks the algorithm up on every call.
const EVP_MD* fetched(const char* name) {
    EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
    if (md == nullptr) throw std::runtime_error("idem: OpenSSL has no digest");
    return md;
}

template <std::size_t N>
std::array<std::byte, N> digest(const EVP_MD* md, const void* data, std::size_t size) {
    std::array<std::byte, N> out{};
    unsigned int written = 0;
    if (EVP_Digest(data, size, reinterpret_cast<unsigned char*>(out.data()), &written, md, nullptr) != 1 ||
        written != N)
        throw std::runtime_error("idem: digest failed");
    return out;
}

}  // namespace

sha256_digest sha256(std::string_view data) {
    static const EVP_MD* const md = fetched("SHA256");
    return digest<32>(md, data.data(), data.size());
}

std::array<std::byte, 20> sha1(std::span<const std::byte> data) {
    static const EVP_MD* const md = fetched("SHA1");
    return digest<20>(md, data.data(), data.size());
}

sha256_digest hmac_sha256(std::string_view key, std::string_view data) {
    sha256_digest out{};
    unsigned int written = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(data.data()), data.size(),
             reinterpret_cast<unsigned char*>(out.data()), &written) == nullptr ||
        written != out.size())
        throw std::runtime_error("idem: HMAC failed");
    return out;
}

std::string base64url(std::span<const std::byte> data) {
    std::string out(4 * ((data.size() + 2) / 3), '\0');
    const int written =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                        reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
    out.resize(static_cast<std::size_t>(written));
    while (!out.empty() && out.back() == '=') out.pop_back();
    for (char& c : out) {
        if (c == '+')
            c = '-';
        else if (c == '/')
            c = '_';
    }
    return out;
}

std::string hex(std::span<const std::byte> data) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(data.size() * 2, '\0');
    char* next = out.data();
    for (std::byte b : data) {
        *next++ = digits[std::to_integer<unsigned>(b) >> 4];
        *next++ = digits[std::to_integer<unsigned>(b) & 0xF];
    }
    return out;
}

void random_bytes(std::span<std::byte> out) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) != 1)
        throw std::runtime_error("idem: the random generator failed");
}

std::string random_uuid() {
    std::array<std::byte, 16> bytes{};
    random_bytes(bytes);
    bytes[6] = (bytes[6] & std::byte{0x0F}) | std::byte{0x40};  // version 4
    bytes[8] = (bytes[8] & std::byte{0x3F}) | std::byte{0x80};  // RFC 9562 variant
    const std::string h = hex(bytes);
    return h.substr(0, 8) + '-' + h.substr(8, 4) + '-' + h.substr(12, 4) + '-' + h.substr(16, 4) + '-' + h.substr(20);
}

bool constant_time_equal(std::span<const std::byte> a, std::span<const std::byte> b) noexcept {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace idem::detail
