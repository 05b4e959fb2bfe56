#include <doctest/doctest.h>

#include "idem/keys.hpp"
#include "idem/webhook.hpp"

using namespace idem;

TEST_CASE("webhook: HMAC-SHA256 matches RFC 4231 test case 2") {
    CHECK(webhook::hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("webhook: only the exact signature over the exact bytes verifies") {
    const std::string body = R"({"id":"evt_1","amount":100})";
    const std::string sig = webhook::hmac_sha256_hex("secret", body);
    CHECK(webhook::signature_matches("secret", body, sig));
    std::string upper = sig;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(webhook::signature_matches("secret", body, upper));
    CHECK_FALSE(webhook::signature_matches("other", body, sig));
    CHECK_FALSE(webhook::signature_matches("secret", body + " ", sig));
    CHECK_FALSE(webhook::signature_matches("secret", body, sig.substr(1)));
    CHECK_FALSE(webhook::signature_matches("secret", body, ""));
    std::string flipped = sig;
    flipped[10] = flipped[10] == 'a' ? 'b' : 'a';
    CHECK_FALSE(webhook::signature_matches("secret", body, flipped));
    CHECK_FALSE(webhook::signature_matches("secret", body, std::string(64, 'z')));
}

TEST_CASE("webhook: the event key is per provider, from the event id") {
    const auto key = webhook::event_key("stripe", "evt_1", scope::custom("account", "A-1"));
    CHECK(key.name_space() == "webhook:stripe");
    CHECK(key.key() == keys::from_message("evt_1", "stripe"));
    CHECK(key != webhook::event_key("adyen", "evt_1", scope::custom("account", "A-1")));
}
