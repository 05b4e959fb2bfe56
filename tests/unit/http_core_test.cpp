// The framework-neutral pieces of the HTTP layer.
#include <doctest/doctest.h>

#include <stdexcept>
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

// One field line as received, and the key it names (empty: 400 Idempotency.KeyInvalid).
struct header_case {
    std::string_view field;
    std::string_view key;
    std::string_view why;
};

TEST_CASE("key header: the shapes RFC 8941 and the draft allow, and the ones they refuse") {
    const header_case cases[] = {
        // sf-strings (RFC 8941 section 3.3.3)
        {R"("abc")", "abc", "a String"},
        {R"("8e03978e-40d5-43e8-bc93-6894a57f9324")", "8e03978e-40d5-43e8-bc93-6894a57f9324", "a UUID as a String"},
        {R"("a,b")", "a,b", "a comma inside a String is the String's"},
        {R"("a;b")", "a;b", "so is a semicolon"},
        {R"(":YWJj:")", ":YWJj:", "colons inside a String are text"},
        {R"("a\"b")", "", "escapes are parsed, but DQUOTE is no key character"},
        {R"("a\\b")", "", "nor is backslash"},
        {R"("a\nb")", "", "an escape other than \\\" and \\\\ is malformed"},
        {"\"a\tb\"", "", "HTAB is not printable ASCII"},
        {"\"a\177b\"", "", "nor is DEL"},
        {"\"caf\xC3\xA9\"", "", "nor is UTF-8 (a Display String would be RFC 9651's %\"...\")"},
        {R"("abc)", "", "no closing DQUOTE"},
        {R"("abc"")", "", "a stray DQUOTE after the String"},
        {R"("")", "", "an empty String is no key"},
        // parameters (RFC 8941 section 3.1.2): well formed and ignored
        {R"("abc";p=1)", "abc", "an Integer parameter"},
        {R"("abc";p)", "abc", "a parameter without a value is true"},
        {R"("abc"; p=1;q="x";r=?0;s=:YWJj:;t=tok/en:x;*u=-1.5)", "abc", "every bare-item type, SP after ;"},
        {R"("abc";p=1;p=2)", "abc", "a repeated parameter: the last counts, none is used"},
        {R"("abc" ;p=1)", "", "SP before ; is not allowed"},
        {R"("abc";P=1)", "", "parameter keys are lower case"},
        {R"("abc";1p=1)", "", "and start with a letter or *"},
        {R"("abc";p=)", "", "= needs a value"},
        {R"("abc";p=1.2345)", "", "a Decimal has at most three fractional digits"},
        {R"("abc";p=1234567890123456)", "", "an Integer at most 15 digits"},
        {R"("abc";p=1.)", "", "a Decimal needs a fractional digit"},
        {R"("abc";p=?2)", "", "a Boolean is ?0 or ?1"},
        {R"("abc";p=:YWJj)", "", "an unterminated Byte Sequence"},
        {R"("abc";p="x)", "", "an unterminated String"},
        {R"("abc";)", "", "; needs a key"},
        {R"("abc";p=1 )", "abc", "trailing SP is stripped first"},
        // whitespace (RFC 8941 section 4.2, RFC 9110 section 5.5)
        {R"(   "abc"   )", "abc", "leading and trailing SP"},
        {"\t\"abc\"\t", "abc", "HTTP's OWS includes HTAB"},
        {"  abc  ", "abc", "around a bare key too"},
        {R"("abc" x)", "", "anything after the Item"},
        // bare keys: taken where no RFC 8941 reading means something else
        {"abc", "abc", "a Token"},
        {"*abc", "*abc", "a Token may start with *"},
        {"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", "a bare UUID (Stripe's way)"},
        {"12345", "12345", "digits: an Integer reads as the same text"},
        {"6:refund|7:order-1|3:r-2", "6:refund|7:order-1|3:r-2", "a derived key"},
        {"h:Xm0Zq3ry", "h:Xm0Zq3ry", "a hashed derived key"},
        {"a=b", "a=b", "= outside parameters is a key character"},
        {":YWJj:", "", "a Byte Sequence: the bytes 'abc' to an RFC 8941 reader"},
        {":abc", "", "the start of a malformed Byte Sequence"},
        {"(a b)", "", "an Inner List"},
        {"(abc)", "", "an Inner List of one"},
        {"a, b", "", "a List, or two field lines a proxy joined (RFC 9110 section 5.3)"},
        {"a,b", "", "the same without SP"},
        {R"("a", "b")", "", "two Strings"},
        {"abc;p=1", "", "a Token with a parameter: the key is abc to one reader, abc;p=1 to another"},
        {"a;b", "", "the same ambiguity"},
        {"?1", "", "a Boolean"},
        {"a b", "", "SP inside"},
    };
    for (const header_case& c : cases) {
        CAPTURE(c.field);
        CAPTURE(c.why);
        const parsed_key parsed = parse({c.field});
        CHECK(parsed.state == (c.key.empty() ? key_state::invalid : key_state::valid));
        CHECK(parsed.key == c.key);
    }
}

TEST_CASE("key header: several field lines are refused, even equal ones") {
    CHECK(parse({"abc", "abc"}).state == key_state::invalid);
    CHECK(parse({"\"abc\"", "\"abc\""}).state == key_state::invalid);
    CHECK(parse({"abc", ""}).state == key_state::invalid);
}

TEST_CASE("key header: the value a client sends is read back as the same key") {
    for (std::string_view key : {"abc", "8e03978e-40d5-43e8-bc93-6894a57f9324", "6:refund|7:order-1|3:r-2",
                                 ":YWJj:", "(a)", "a,b", "a;b", "?1", "k=v", "*"}) {
        CAPTURE(key);
        const std::string value = key_header_value(key);
        const parsed_key parsed = parse({value});
        CHECK(parsed.state == key_state::valid);
        CHECK(parsed.key == key);
    }
    CHECK(key_header_value("abc") == "abc");  // bare where that is unambiguous, as most servers expect
    CHECK(key_header_value("a;b") == "\"a;b\"");
    CHECK(key_header_value(":YWJj:") == "\":YWJj:\"");
    for (std::string_view bad : {"", "a b", "a\"b", "caf\xC3\xA9"})
        CHECK_THROWS_AS((void)key_header_value(bad), std::invalid_argument);
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
