// Every case of tests/vectors/keys.json: the pinned key formats.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "idem/keys.hpp"
#include "idem/record_key.hpp"

namespace {

nlohmann::json load_vectors() {
    std::ifstream in(IDEM_KEY_VECTORS);
    REQUIRE_MESSAGE(in.good(), "cannot open " IDEM_KEY_VECTORS);
    return nlohmann::json::parse(in);
}

std::vector<std::string_view> views(const std::vector<std::string>& ids) {
    return {ids.begin(), ids.end()};
}

idem::scope scope_of(const nlohmann::json& c) {
    const auto kind = c.at("scope_kind").get<std::string>();
    const auto args = c.at("scope_args").get<std::vector<std::string>>();
    if (kind == "user") return idem::scope::user(args.at(0));
    if (kind == "tenant") return idem::scope::tenant(args.at(0));
    if (kind == "client") return idem::scope::client(args.at(0));
    if (kind == "user_and_tenant") return idem::scope::user_and_tenant(args.at(0), args.at(1));
    if (kind == "custom") return idem::scope::custom(args.at(0), args.at(1));
    if (kind == "global") return idem::scope::global();
    FAIL("unknown scope kind " << kind);
    return idem::scope::global();
}

}  // namespace

TEST_CASE("keys.json: every case passes") {
    const auto vectors = load_vectors();
    std::map<std::string, int> checked;
    for (const auto& c : vectors.at("cases")) {
        const auto kind = c.at("kind").get<std::string>();
        CAPTURE(c.dump());
        if (kind == "derive") {
            const auto ids = c.at("ids").get<std::vector<std::string>>();
            const auto op = c.at("operation").get<std::string>();
            CHECK(idem::keys::derive(op, views(ids)) == c.at("key").get<std::string>());
            CHECK(idem::keys::to_uuid_v5(op, views(ids)) == c.at("uuid_v5").get<std::string>());
            CHECK(idem::keys::is_valid(idem::keys::derive(op, views(ids))));
        } else if (kind == "from_message") {
            CHECK(idem::keys::from_message(c.at("message_id").get<std::string>(),
                                           c.at("consumer").get<std::string>()) == c.at("key").get<std::string>());
        } else if (kind == "is_valid") {
            CHECK(idem::keys::is_valid(c.at("key").get<std::string>()) == c.at("valid").get<bool>());
        } else if (kind == "storage_key") {
            const idem::scope owner = scope_of(c);
            CHECK(owner.text() == c.at("scope").get<std::string>());
            const idem::record_key key(c.at("namespace").get<std::string>(), owner, c.at("key").get<std::string>());
            CHECK(key.to_storage_key() == c.at("storage_key").get<std::string>());
            CHECK(key.key_hash() == c.at("key_hash").get<std::string>());
        } else {
            FAIL("unknown case kind " << kind);
        }
        ++checked[kind];
    }
    CHECK(checked["derive"] == 64);
    CHECK(checked["is_valid"] == 30);
    CHECK(checked["storage_key"] == 30);
    CHECK(checked["from_message"] == 15);
}
