// The framework-neutral pieces of the HTTP layer.
#include <doctest/doctest.h>

#include <vector>

#include "idem/http/fingerprint.hpp"
#include "idem/http/key_header.hpp"
#include "idem/http/problem.hpp"
#include "idem/http/response_codec.hpp"

using namespace idem::http;

namespace {
parsed_key parse(std::vector<std::string_view> values) {
    return parse_key_header(values);
}
}  // namespace

TEST_CASE("key header: a bare token or an sf-string, one field line, a valid key") {
    CHECK(parse({}).state == key_state::missing);
    CHECK(parse({"abc-123"}).key == "abc-123");
    CHECK(parse({"\"abc-123\""}).key == "abc-123");
    CHECK(parse({"  abc \t"}).key == "abc");
    CHECK(parse({"abc", "def"}).state == key_state::invalid);
    for (std::string_view bad : {"", "\"\"", "\"abc", "abc\"", "\"a b\"", "a b", "\"a\\\"b\"", "\"a\\\\b\"",
                                 "\"a\\xb\"", "\"abc\" x", "caf\xC3\xA9", "\"abc\",\"def\""}) {
        CAPTURE(bad);
        CHECK(parse({bad}).state == key_state::invalid);
    }
    CHECK(parse({std::string(255, 'k')}).state == key_state::valid);
    CHECK(parse({std::string(256, 'k')}).state == key_state::invalid);
}

TEST_CASE("fingerprint: method, target and body each count, framed so parts cannot shift") {
    const auto base = request_fingerprint("POST", "/t", "{}");
    CHECK(base.size() == 64);
    CHECK(base == request_fingerprint("POST", "/t", "{}"));
    CHECK(base != request_fingerprint("PATCH", "/t", "{}"));
    CHECK(base != request_fingerprint("POST", "/t?x=1", "{}"));
    CHECK(base != request_fingerprint("POST", "/t", "{ }"));
    CHECK(request_fingerprint("POST", "/ab", "c") != request_fingerprint("POST", "/a", "bc"));
}

TEST_CASE("problem: problem+json with the stable code and no-store") {
    const response r = problem(codes::key_reused);
    CHECK(r.status == 422);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.header("Cache-Control") == "no-store");
    CHECK(r.body.find("\"code\":\"Idempotency.KeyReused\"") != std::string::npos);
    CHECK(r.body.find("\"status\":422") != std::string::npos);
}

TEST_CASE("response codec: exact bytes and allow-listed headers, never Set-Cookie") {
    layer_options options;
    response_codec codec(options);
    response r{.status = 201,
               .headers = {{"Content-Type", "application/json"},
                           {"Set-Cookie", "session=1"},
                           {"location", "/t/1"},
                           {"X-Internal", "secret"}},
               .body = std::string("{\"id\":1}\0\xff", 10)};
    const response back = codec.deserialize(codec.serialize(r));
    CHECK(back.status == 201);
    CHECK(back.body == r.body);
    CHECK(back.header("Content-Type") == "application/json");
    CHECK(back.header("Location") == "/t/1");
    CHECK(back.header("Set-Cookie").empty());
    CHECK(back.header("X-Internal").empty());
    options.replayed_headers.push_back("Set-Cookie");
    CHECK(codec.deserialize(codec.serialize(r)).header("Set-Cookie").empty());
}

TEST_CASE("response codec: classification by status, size and streaming") {
    layer_options options;
    options.max_stored_body = 8;
    response_codec codec(options);
    using idem::classification;
    CHECK(codec.classify({.status = 200}) == classification::store);
    CHECK(codec.classify({.status = 404}) == classification::store);
    CHECK(codec.classify({.status = 500}) == classification::store_as_failure);
    CHECK(codec.classify({.status = 503}) == classification::keep_in_flight);
    CHECK(codec.classify({.status = 504}) == classification::keep_in_flight);
    CHECK(codec.classify({.status = 429}) == classification::release);
    CHECK(codec.classify({.status = 200, .body = "123456789"}) == classification::release);
    CHECK(codec.classify({.status = 200, .streamed = true}) == classification::release);
}

TEST_CASE("response codec: what the stored form cannot hold is released and refused, never truncated") {
    layer_options options;
    options.replayed_headers = {"X-Part"};
    response_codec codec(options);
    using idem::classification;
    response many{.status = 200, .headers = {{"X-Other", "not replayed, not counted"}}};
    for (int i = 0; i < 65536; ++i) many.headers.emplace_back("X-Part", std::to_string(i));
    CHECK(codec.classify(many) == classification::release);
    CHECK_THROWS_AS((void)codec.serialize(many), std::invalid_argument);

    many.headers.pop_back();  // 65535 replayed headers: the most the count holds, stored whole
    CHECK(codec.classify(many) == classification::store);
    const response back = codec.deserialize(codec.serialize(many));
    REQUIRE(back.headers.size() == 65535);
    CHECK(back.headers.back() == std::pair<std::string, std::string>("X-Part", "65534"));

    for (int status : {0, 99, 1000, 65536 + 200}) {
        CAPTURE(status);
        CHECK(codec.classify({.status = status}) == classification::release);
        CHECK_THROWS_AS((void)codec.serialize({.status = status}), std::invalid_argument);
    }
}

TEST_CASE("response codec: bytes it did not write are rejected") {
    response_codec codec(layer_options{});
    using namespace std::string_view_literals;
    for (std::string_view bad : {""sv, "IDR1"sv, "IDR1\x00"sv, "XXXX\x00\xc8\x00\x00"sv, "IDR1\x00\x05\x00\x00"sv,
                                 "IDR1\x00\xc8\x00\x01\x00\x00\x00\x09"
                                 "ab"sv}) {
        CAPTURE(bad);
        CHECK_THROWS_AS((void)codec.deserialize(bad), std::runtime_error);
    }
    const std::string truncated =
        codec.serialize({.status = 200, .headers = {{"Content-Type", "text/plain"}}}).substr(0, 12);
    CHECK_THROWS_AS((void)codec.deserialize(truncated), std::runtime_error);
}
