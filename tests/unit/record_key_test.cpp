#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <vector>

#include "idem/record_key.hpp"

using namespace idem;

TEST_CASE("a record key without a scope is global") {
    CHECK(record_key("ns", "k") == record_key("ns", scope::global(), "k"));
    CHECK(record_key("ns", "k").to_storage_key() == "idem:v3:2:ns|6:global|1:k");
}

TEST_CASE("the storage key frames every part, so no two record keys share one") {
    const std::vector<record_key> keys{
        record_key("a|1:b", scope::global(), "c"),
        record_key("a", scope::global(), "b|1:c"),
        record_key("a", scope::tenant("x|1:y"), "z"),
        record_key("a", scope::tenant("x"), "y|1:z"),
    };
    std::set<std::string> storage;
    for (const auto& k : keys) storage.insert(k.to_storage_key());
    CHECK(storage.size() == keys.size());
    CHECK(record_key("ns", "k").to_storage_key("app:") == "app:2:ns|6:global|1:k");
}

TEST_CASE("the key hash is 16 lowercase hex characters of the storage key's SHA-256") {
    const record_key k("payments", scope::tenant("acme"), "order-17");
    const std::string hash = k.key_hash();
    CHECK(hash.size() == 16);
    CHECK(hash.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(hash != record_key("payments", scope::tenant("acme"), "order-18").key_hash());
    CHECK(key_hash_of(k.digest()) == hash);
}

TEST_CASE("record key parts must be non-empty, valid UTF-8 and within size limits") {
    CHECK_THROWS_AS(record_key("", "k"), std::invalid_argument);
    CHECK_THROWS_AS(record_key("ns", ""), std::invalid_argument);
    CHECK_THROWS_AS(record_key(std::string("\xFF"), "k"), std::invalid_argument);
    CHECK_THROWS_AS(record_key("ns", std::string("k\xC0\x80")), std::invalid_argument);
    CHECK_THROWS_AS(record_key("ns", std::string(record_key::max_key_bytes + 1, 'k')), std::invalid_argument);
    CHECK_THROWS_AS(record_key(std::string(record_key::max_namespace_bytes + 1, 'n'), "k"), std::invalid_argument);
    CHECK_NOTHROW(record_key("ns", std::string(record_key::max_key_bytes, 'k')));
}

TEST_CASE("errors about a record key never repeat the key") {
    const std::string secret = "secret-key-\xFF";
    try {
        record_key("ns", secret);
        FAIL("expected an error");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find("secret") == std::string::npos);
    }
}
