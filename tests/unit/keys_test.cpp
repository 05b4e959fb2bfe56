#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "idem/keys.hpp"

using namespace idem;

namespace {
const std::string bad_utf8[] = {
    std::string("\xC3"),              // truncated sequence
    std::string("\xC0\xAF"),          // overlong '/'
    std::string("\xED\xA0\x80"),      // UTF-16 surrogate half
    std::string("\xF4\x90\x80\x80"),  // above U+10FFFF
    std::string("\x80"),              // lone continuation byte
    std::string("ok\xFF"),
};
}  // namespace

TEST_CASE("derive frames each part by its byte length") {
    CHECK(keys::derive("a", {"bc"}) != keys::derive("ab", {"c"}));
    CHECK(keys::derive("refund", {"order-1", "r-2"}) == "6:refund|7:order-1|3:r-2");
    CHECK(keys::derive("op") == "2:op");
    CHECK(keys::derive("op", {""}) == "2:op|0:");
}

TEST_CASE("derive hashes what is not a valid key") {
    const std::string key = keys::derive("capture", {"café"});
    CHECK(key.rfind("h:", 0) == 0);
    CHECK(key.size() == 2 + 43);
    CHECK(keys::is_valid(key));
    CHECK(keys::derive("x", {std::string(300, 'a')}).size() == 45);
}

TEST_CASE("derive rejects an empty operation and invalid UTF-8 anywhere") {
    CHECK_THROWS_AS((void)keys::derive("", {"id"}), std::invalid_argument);
    for (const auto& bad : bad_utf8) {
        CHECK_THROWS_AS((void)keys::derive(bad, {"id"}), std::invalid_argument);
        CHECK_THROWS_AS((void)keys::derive("op", {"fine", bad}), std::invalid_argument);
        CHECK_THROWS_AS((void)keys::to_uuid_v5("op", {bad}), std::invalid_argument);
        CHECK_THROWS_AS((void)keys::from_message(bad, "consumer"), std::invalid_argument);
    }
}

TEST_CASE("from_message separates consumers") {
    CHECK(keys::from_message("m-1", "billing") == keys::derive("message", {"billing", "m-1"}));
    CHECK(keys::from_message("m-1", "billing") != keys::from_message("m-1", "shipping"));
}

TEST_CASE("to_uuid_v5 is a lowercase RFC 9562 version 5 UUID") {
    const std::string uuid = keys::to_uuid_v5("refund", {"order-1", "r-2"});
    CHECK(uuid == "33fa2b13-8f62-585e-acff-67bcbde9eae5");
    CHECK(uuid[14] == '5');
    CHECK(std::string("89ab").find(uuid[19]) != std::string::npos);
}

TEST_CASE("is_valid: 1 to 255 printable ASCII characters except quote and backslash") {
    CHECK(keys::is_valid("a"));
    CHECK(keys::is_valid(std::string(255, 'k')));
    CHECK_FALSE(keys::is_valid(std::string(256, 'k')));
    CHECK_FALSE(keys::is_valid(""));
    CHECK(keys::is_valid("!~"));
    for (const std::string& bad :
         std::vector<std::string>{" ", "\x7F", "\"", "\\", "\t", std::string(1, '\0'), "\xC3\xA9"})
        CHECK_FALSE(keys::is_valid("a" + bad));
}
