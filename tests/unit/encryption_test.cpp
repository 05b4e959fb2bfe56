// The encryption keys' seal and open: AES-256-GCM bound to a record, the ring's
// rotation, and every way a payload can fail to open, each a typed error.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "idem/encryption.hpp"
#include "idem/error.hpp"

namespace {

std::string key_of(char fill) {
    return std::string(32, fill);
}

std::string hex_of(char fill) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < 32; ++i) {
        out += digits[static_cast<unsigned char>(fill) >> 4];
        out += digits[static_cast<unsigned char>(fill) & 0xF];
    }
    return out;
}

idem::payload_unreadable::reason why_open_fails(const idem::encryption_keys& keys, const std::string& stored,
                                                const std::string& context) {
    try {
        (void)keys.open(stored, context);
    } catch (const idem::payload_unreadable& e) {
        return e.why();
    }
    FAIL("it opened");
    return idem::payload_unreadable::reason::malformed;
}

}  // namespace

TEST_CASE("encryption keys: a sealed payload holds no plaintext, opens to the same bytes, only for its record") {
    const idem::encryption_keys keys({{.id = "k1", .bytes = key_of('a')}});
    const std::string plain = std::string("card 4111111111111111, token sk_live_marker \0\xff end", 48);
    const std::string sealed = keys.seal(plain, "record-1");
    CHECK(idem::encryption_keys::is_sealed(sealed));
    CHECK(idem::encryption_keys::sealed_with(sealed) == "k1");
    CHECK(sealed.find("4111111111111111") == std::string::npos);
    CHECK(sealed.find("sk_live_marker") == std::string::npos);
    CHECK(sealed.size() == 10 + 1 + 2 + 12 + plain.size() + 16);
    CHECK(keys.open(sealed, "record-1") == plain);
    // A fresh nonce each time: the same plaintext seals to other bytes.
    CHECK(keys.seal(plain, "record-1") != sealed);
    // Moved to another record, it does not open.
    CHECK(why_open_fails(keys, sealed, "record-2") == idem::payload_unreadable::reason::not_authentic);
    // Empty payloads seal too.
    CHECK(keys.open(keys.seal("", "r"), "r").empty());
    // What was stored before keys were set is not sealed, and opens as it is.
    CHECK(keys.open("plain stored result", "record-1") == "plain stored result");
}

TEST_CASE(
    "encryption keys: every byte of a sealed payload is covered; the wrong key or a missing one is a typed error") {
    const idem::encryption_keys keys({{.id = "k1", .bytes = key_of('a')}});
    const std::string sealed = keys.seal("the answer", "r");
    // Flip each byte after the magic: never opens, never garbage.
    for (std::size_t i = 10; i < sealed.size(); ++i) {
        CAPTURE(i);
        std::string changed = sealed;
        changed[i] = static_cast<char>(changed[i] ^ 0x01);
        idem::payload_unreadable::reason why{};
        try {
            (void)keys.open(changed, "r");
            FAIL("a changed payload opened");
        } catch (const idem::payload_unreadable& e) {
            why = e.why();
        }
        CHECK(why != idem::payload_unreadable::reason::malformed);  // the length byte may point elsewhere
    }
    CHECK(why_open_fails(keys, sealed.substr(0, 30), "r") == idem::payload_unreadable::reason::malformed);
    const idem::encryption_keys wrong({{.id = "k1", .bytes = key_of('b')}});
    CHECK(why_open_fails(wrong, sealed, "r") == idem::payload_unreadable::reason::not_authentic);
    const idem::encryption_keys other({{.id = "k2", .bytes = key_of('a')}});
    CHECK(why_open_fails(other, sealed, "r") == idem::payload_unreadable::reason::unknown_key);
    try {
        (void)other.open(sealed, "r");
    } catch (const idem::payload_unreadable& e) {
        CHECK(std::string(e.what()).find("\"k1\"") != std::string::npos);
        CHECK(e.category() == idem::error_category::store);
    }
}

TEST_CASE("encryption keys: the first key seals, every key opens; a ring in rotation") {
    const idem::encryption_keys old_ring({{.id = "k1", .bytes = key_of('a')}});
    const idem::encryption_keys rotated =
        idem::encryption_keys::parse("# newest first\nk2:" + hex_of('b') + "\n\n  k1:" + hex_of('a') + "  \r\n");
    CHECK(rotated.sealing_key_id() == "k2");
    const std::string before = old_ring.seal("sealed by k1", "r");
    CHECK(rotated.open(before, "r") == "sealed by k1");
    const std::string after = rotated.seal("sealed by k2", "r");
    CHECK(idem::encryption_keys::sealed_with(after) == "k2");
    CHECK(why_open_fails(old_ring, after, "r") == idem::payload_unreadable::reason::unknown_key);
}

TEST_CASE("encryption keys: a ring out of form is an options_error that never repeats a key") {
    const std::string secret = hex_of('c');
    auto problems_of = [](const std::string& text) {
        try {
            (void)idem::encryption_keys::parse(text);
        } catch (const idem::options_error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(problems_of("").find("at least one key") != std::string::npos);
    CHECK(problems_of("k1 " + secret).find("line 1: not in the form ID:HEX") != std::string::npos);
    CHECK(problems_of("k1 " + secret).find(secret) == std::string::npos);
    CHECK(problems_of("k1:" + secret.substr(2)).find("64 hex digits") != std::string::npos);
    CHECK(problems_of("k1:" + secret.substr(2) + "zz").find("64 hex digits") != std::string::npos);
    CHECK(problems_of("k1:" + secret + "\nk1:" + secret).find("given twice") != std::string::npos);
    CHECK(problems_of("bad id:" + secret).find("an id must be") != std::string::npos);
    CHECK_THROWS_AS(idem::encryption_keys(std::vector<idem::encryption_key>{{.id = "k", .bytes = "short"}}),
                    idem::options_error);
    CHECK_THROWS_AS(idem::encryption_keys::from_file("/nonexistent/keys"), idem::options_error);
    CHECK(problems_of("k1:" + secret) == "accepted");
}
