// AES-256-GCM on OpenSSL's EVP interface. A sealed payload is
//   magic (10 bytes) | key id length (1) | key id | nonce (12) | ciphertext | tag (16)
// and everything before the ciphertext, then the record's context, is the
// additional authenticated data: neither the key id nor the record can be
// swapped without the tag failing. A random 96-bit nonce per payload: with one
// key, 2^32 payloads keep the chance of a repeated nonce under 2^-32 (NIST SP
// 800-38D), far past what a key seals between rotations.
#include "idem/encryption.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>

#include "idem/options.hpp"
#include "internal/crypto.hpp"

namespace idem {
namespace {

constexpr std::string_view magic{"\0idem-gcm1", 10};
constexpr std::size_t nonce_bytes = 12, tag_bytes = 16, key_bytes = 32;

using cipher_context = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* bytes_of(std::string_view s) {
    return reinterpret_cast<const unsigned char*>(s.data());
}

unsigned char* bytes_of(std::string& s) {
    return reinterpret_cast<unsigned char*>(s.data());
}

void check(int ok) {
    if (ok != 1) throw std::runtime_error("idem: AES-256-GCM failed in OpenSSL");
}

// Fetched once: OpenSSL 3 looks EVP_aes_256_gcm() up in its providers at every init otherwise.
const EVP_CIPHER* aes_256_gcm() {
    static const std::unique_ptr<EVP_CIPHER, decltype(&EVP_CIPHER_free)> cipher(
        EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr), &EVP_CIPHER_free);
    if (!cipher) throw std::runtime_error("idem: OpenSSL has no AES-256-GCM");
    return cipher.get();
}

// A thread's context for one direction, kept with the key schedule of the
// last key it was given: a ring seals under one key and mostly opens what
// that key sealed, so most payloads only set a new nonce. Allocating a context
// and expanding the key for every payload cost more than sealing it.
class keyed_context {
public:
    keyed_context() : ctx_(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free) {
        if (!ctx_) throw std::runtime_error("idem: OpenSSL could not make a cipher context");
    }
    ~keyed_context() { OPENSSL_cleanse(key_.data(), key_.size()); }
    keyed_context(const keyed_context&) = delete;
    keyed_context& operator=(const keyed_context&) = delete;

    // Ready to seal (or open) with `key` and `nonce`.
    EVP_CIPHER_CTX* begin(bool seal, std::string_view key, const unsigned char* nonce) {
        const auto init = seal ? &EVP_EncryptInit_ex2 : &EVP_DecryptInit_ex2;
        const bool same_key = key == key_;
        OPENSSL_cleanse(key_.data(), key_.size());
        key_.clear();  // until this init succeeds
        if (same_key)
            check(init(ctx_.get(), nullptr, nullptr, nonce, nullptr));
        else
            check(init(ctx_.get(), aes_256_gcm(), bytes_of(key), nonce, nullptr));
        key_.assign(key);
        return ctx_.get();
    }

private:
    cipher_context ctx_;
    std::string key_;  // the key whose schedule ctx_ holds
};

EVP_CIPHER_CTX* begin_sealing(std::string_view key, const unsigned char* nonce) {
    thread_local keyed_context sealing;
    return sealing.begin(true, key, nonce);
}

EVP_CIPHER_CTX* begin_opening(std::string_view key, const unsigned char* nonce) {
    thread_local keyed_context opening;
    return opening.begin(false, key, nonce);
}

bool valid_id(std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    for (const char c : id)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return false;
    return true;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The parts of a sealed payload, as views into it.
struct sealed_parts {
    std::string_view header;  // magic, id length, id, nonce: authenticated
    std::string_view id;
    std::string_view nonce;
    std::string_view ciphertext;
    std::string_view tag;
};

sealed_parts split(std::string_view stored) {
    const auto malformed = [] {
        return payload_unreadable(payload_unreadable::reason::malformed,
                                  "idem: a stored payload is marked sealed but is too short to be one");
    };
    if (stored.size() < magic.size() + 1) throw malformed();
    const std::size_t id_length = static_cast<unsigned char>(stored[magic.size()]);
    const std::size_t header = magic.size() + 1 + id_length + nonce_bytes;
    if (stored.size() < header + tag_bytes) throw malformed();
    return {.header = stored.substr(0, header),
            .id = stored.substr(magic.size() + 1, id_length),
            .nonce = stored.substr(magic.size() + 1 + id_length, nonce_bytes),
            .ciphertext = stored.substr(header, stored.size() - header - tag_bytes),
            .tag = stored.substr(stored.size() - tag_bytes)};
}

}  // namespace

payload_unreadable::payload_unreadable(reason why, const std::string& message)
    : error(error_category::store, message), why_(why) {}

encryption_keys::encryption_keys(std::vector<encryption_key> keys) : keys_(std::move(keys)) {
    std::vector<std::string> problems;
    if (keys_.empty()) problems.emplace_back("encryption keys: at least one key is needed");
    std::set<std::string, std::less<>> ids;
    for (const encryption_key& k : keys_) {
        if (!valid_id(k.id))
            problems.push_back("encryption keys: an id must be 1 to 64 of A-Z a-z 0-9 . _ - (\"" +
                               (k.id.size() <= 64 ? k.id : k.id.substr(0, 64) + "...") + "\")");
        else if (!ids.insert(k.id).second)
            problems.push_back("encryption keys: the id \"" + k.id + "\" is given twice");
        if (k.bytes.size() != key_bytes)
            problems.push_back("encryption keys: the key \"" + k.id + "\" has " + std::to_string(k.bytes.size()) +
                               " bytes, not 32");
    }
    if (!problems.empty()) throw options_error(std::move(problems));
}

encryption_keys encryption_keys::parse(std::string_view text) {
    std::vector<encryption_key> keys;
    std::vector<std::string> problems;
    int line_number = 0;
    while (!text.empty()) {
        const std::size_t end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        ++line_number;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
            line.remove_suffix(1);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
        if (line.empty() || line.front() == '#') continue;
        const std::size_t colon = line.find(':');
        const std::string where = "encryption keys, line " + std::to_string(line_number);
        if (colon == std::string_view::npos) {
            problems.push_back(where + ": not in the form ID:HEX");  // never the line: it may be a key
            continue;
        }
        encryption_key k{.id = std::string(line.substr(0, colon)), .bytes = {}};
        const std::string_view hex = line.substr(colon + 1);
        bool ok = hex.size() == 2 * key_bytes;
        for (std::size_t i = 0; ok && i < hex.size(); i += 2) {
            const int high = hex_value(hex[i]), low = hex_value(hex[i + 1]);
            ok = high >= 0 && low >= 0;
            k.bytes.push_back(static_cast<char>(high * 16 + low));
        }
        if (!ok) {
            problems.push_back(where + ": the key must be 64 hex digits (32 bytes)");
            continue;
        }
        keys.push_back(std::move(k));
    }
    if (!problems.empty()) throw options_error(std::move(problems));
    return encryption_keys(std::move(keys));
}

encryption_keys encryption_keys::from_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw options_error({"encryption keys: cannot read " + path});
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    return parse(text);
}

std::string encryption_keys::seal(std::string_view plaintext, std::string_view context) const {
    const encryption_key& k = keys_.front();
    std::string out;
    out.reserve(magic.size() + 1 + k.id.size() + nonce_bytes + plaintext.size() + tag_bytes);
    out += magic;
    out += static_cast<char>(k.id.size());
    out += k.id;
    std::array<std::byte, nonce_bytes> nonce{};
    detail::random_bytes(nonce);
    out.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
    const std::size_t header = out.size();
    out.resize(header + plaintext.size() + tag_bytes);
    EVP_CIPHER_CTX* ctx = begin_sealing(k.bytes, reinterpret_cast<const unsigned char*>(nonce.data()));
    int written = 0;
    check(EVP_EncryptUpdate(ctx, nullptr, &written, bytes_of(std::string_view(out).substr(0, header)),
                            static_cast<int>(header)));
    check(EVP_EncryptUpdate(ctx, nullptr, &written, bytes_of(context), static_cast<int>(context.size())));
    check(EVP_EncryptUpdate(ctx, bytes_of(out) + header, &written, bytes_of(plaintext),
                            static_cast<int>(plaintext.size())));
    int last = 0;
    check(EVP_EncryptFinal_ex(ctx, bytes_of(out) + header + written, &last));
    check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_bytes),
                              bytes_of(out) + header + plaintext.size()));
    return out;
}

std::string encryption_keys::open(std::string_view stored, std::string_view context) const {
    if (!is_sealed(stored)) return std::string(stored);
    const sealed_parts p = split(stored);
    const encryption_key* key = nullptr;
    for (const encryption_key& k : keys_)
        if (k.id == p.id) key = &k;
    if (key == nullptr)
        throw payload_unreadable(payload_unreadable::reason::unknown_key,
                                 "idem: a stored payload is sealed under the key \"" + std::string(p.id) +
                                     "\", which the encryption keys do not have");
    std::string plain(p.ciphertext.size(), '\0');
    EVP_CIPHER_CTX* ctx = begin_opening(key->bytes, bytes_of(p.nonce));
    int written = 0;
    check(EVP_DecryptUpdate(ctx, nullptr, &written, bytes_of(p.header), static_cast<int>(p.header.size())));
    check(EVP_DecryptUpdate(ctx, nullptr, &written, bytes_of(context), static_cast<int>(context.size())));
    check(EVP_DecryptUpdate(ctx, bytes_of(plain), &written, bytes_of(p.ciphertext),
                            static_cast<int>(p.ciphertext.size())));
    std::string tag(p.tag);
    check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_bytes), bytes_of(tag)));
    int last = 0;
    if (EVP_DecryptFinal_ex(ctx, bytes_of(plain) + written, &last) != 1)
        throw payload_unreadable(payload_unreadable::reason::not_authentic,
                                 "idem: a stored payload sealed under the key \"" + std::string(p.id) +
                                     "\" does not authenticate: the wrong key under that id, or changed bytes");
    return plain;
}

bool encryption_keys::is_sealed(std::string_view stored) noexcept {
    return stored.starts_with(magic);
}

std::string encryption_keys::sealed_with(std::string_view stored) {
    return is_sealed(stored) ? std::string(split(stored).id) : std::string();
}

}  // namespace idem
