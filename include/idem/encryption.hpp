// idem/encryption.hpp: stored results encrypted at rest with AES-256-GCM.
//
// A result the executor stores (a record's payload: an HTTP response, a
// db.once result, an inbox's or a webhook's answer) may hold a token, an
// account number or card data, and it stays in the record table for its
// retention. With keys configured, the executor seals every payload it stores
// and opens it again for a replay: the table holds the key's id, a random
// nonce, the ciphertext and its tag, never the plaintext. The newest key (the
// first) seals; any key of the ring opens what it sealed, so a key is added in
// front, and dropped once nothing sealed with it is left (after the longest
// retention of what it sealed).
//
//   auto keys = std::make_shared<idem::encryption_keys>(idem::encryption_keys::parse(
//       "k2:" + new_key_hex + "\nk1:" + old_key_hex));  // k2 seals, k1 and k2 open
//   idem::database db = idem::database::open(url, {.executor = {.encryption = keys}});
//
// A payload sealed under a key the ring lacks, or that does not authenticate
// (the wrong key under that id, a changed byte, a payload moved to another
// record), throws payload_unreadable: never garbage, never a rerun. A
// payload stored before keys were configured (no seal) replays as it is.
// See docs/encryption.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.hpp"
#include "idem/export.hpp"

namespace idem {

struct encryption_key {
    std::string id;     // 1 to 64 bytes of [A-Za-z0-9._-], stored beside each payload it seals
    std::string bytes;  // 32 bytes (AES-256)
};

// A stored payload could not be opened. Nothing was replayed, nothing ran.
class IDEM_API payload_unreadable : public error {
public:
    enum class reason {
        unknown_key,    // sealed under a key id the ring does not have
        not_authentic,  // the tag does not verify: the wrong key, or changed bytes
        malformed,      // too short to be a sealed payload
    };
    payload_unreadable(reason why, const std::string& message);
    [[nodiscard]] reason why() const noexcept { return why_; }

private:
    reason why_;
};

// The ring: immutable once made, shared by every thread.
class IDEM_API encryption_keys {
public:
    // options_error for an empty ring, a key that is not 32 bytes, an id out of
    // form or given twice. The first key seals.
    explicit encryption_keys(std::vector<encryption_key> keys);

    // "ID:HEX" lines (64 hex digits each), the sealing key first; blank lines
    // and lines starting with '#' are skipped. The form of a keys file.
    [[nodiscard]] static encryption_keys parse(std::string_view text);
    // The same, read from a file (options_error when it cannot be read).
    [[nodiscard]] static encryption_keys from_file(const std::string& path);

    // `plaintext` sealed under the first key, bound to `context` (the record's
    // key hash: a payload copied to another record does not open there).
    [[nodiscard]] std::string seal(std::string_view plaintext, std::string_view context) const;
    // The plaintext of a payload seal() made with any key of the ring; a
    // payload that is not sealed is returned as it is.
    [[nodiscard]] std::string open(std::string_view stored, std::string_view context) const;

    // Whether `stored` was sealed, and under which key id ("" when not sealed).
    [[nodiscard]] static bool is_sealed(std::string_view stored) noexcept;
    [[nodiscard]] static std::string sealed_with(std::string_view stored);
    [[nodiscard]] const std::string& sealing_key_id() const noexcept { return keys_.front().id; }

private:
    std::vector<encryption_key> keys_;
};

}  // namespace idem
