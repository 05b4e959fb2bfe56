#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include "idem/keys.hpp"
#include "idem/memory_store.hpp"
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

// ---------------------------------------------------------------------------
// Signature schemes, from the providers' published formats. Expected HMACs were
// computed apart with `openssl dgst -sha256 -hmac`.

namespace {

using namespace std::chrono_literals;

const std::vector<std::string> stripe_secret{"whsec_test_secret"};
// The timestamp of Stripe's documented example header.
constexpr long long stripe_t = 1492774577;
const std::string stripe_body = R"({"id":"evt_1MqqbKLt4dXK03v5qaIbiNCC","object":"event","type":"charge.succeeded"})";
const std::string stripe_v1 = "1a431ef5acf445357d2b53e7a066e422772df599d06c17b461939c3f53e8587b";
const std::string stripe_v1_old_secret = "ceb2d7d2e7002c111522d8aa79414fe0d89741f289ff586f6dfac23fe8418a53";

time_point at(long long unix_seconds) {
    return time_point(std::chrono::seconds(unix_seconds));
}

webhook::verification stripe_verify(std::string_view header, time_point now,
                                    const std::vector<std::string>& secrets = stripe_secret,
                                    std::string_view body = stripe_body) {
    const webhook::delivery d{.body = body, .headers = {{"stripe-signature", header}}};
    return webhook::verify(webhook::timestamped_signature{}, secrets, d, now);
}

}  // namespace

TEST_CASE("webhook: GitHub's published test vector verifies (X-Hub-Signature-256: sha256=...)") {
    const std::string signature = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    CHECK(webhook::hmac_sha256_hex("It's a Secret to Everybody", "Hello, World!") == signature);
    const std::vector<std::string> secrets{"It's a Secret to Everybody"};
    const std::string header = "sha256=" + signature, sha1_header = "sha1=" + signature;  // views point here
    const webhook::delivery d{.body = "Hello, World!", .headers = {{"X-Hub-Signature-256", header}}};
    using enum webhook::verification;
    CHECK(webhook::verify(webhook::body_signature{}, secrets, d, {}) == valid);
    const webhook::delivery tampered{.body = "Hello, World?", .headers = d.headers};
    CHECK(webhook::verify(webhook::body_signature{}, secrets, tampered, {}) == mismatch);
    const webhook::delivery unprefixed{.body = d.body, .headers = {{"X-Hub-Signature-256", signature}}};
    CHECK(webhook::verify(webhook::body_signature{}, secrets, unprefixed, {}) == malformed);
    const webhook::delivery sha1_only{.body = d.body, .headers = {{"X-Hub-Signature", sha1_header}}};
    CHECK(webhook::verify(webhook::body_signature{}, secrets, sha1_only, {}) == missing);
    const std::vector<std::string> rotated{"new secret", "It's a Secret to Everybody"};
    CHECK(webhook::verify(webhook::body_signature{}, rotated, d, {}) == valid);
    const std::vector<std::string> wrong{"new secret"};
    CHECK(webhook::verify(webhook::body_signature{}, wrong, d, {}) == mismatch);
}

TEST_CASE("webhook: Stripe's timestamped scheme (t=...,v1=...) verifies within the tolerance only") {
    using enum webhook::verification;
    const std::string header = "t=" + std::to_string(stripe_t) + ",v1=" + stripe_v1 +
                               ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39";
    CHECK(webhook::hmac_sha256_hex(stripe_secret[0], std::to_string(stripe_t) + "." + stripe_body) == stripe_v1);
    CHECK(stripe_verify(header, at(stripe_t + 10)) == valid);
    CHECK(stripe_verify(header, at(stripe_t + 300)) == valid);
    // A captured delivery replayed after the window is refused, whatever its signature.
    CHECK(stripe_verify(header, at(stripe_t + 301)) == outside_tolerance);
    CHECK(stripe_verify(header, at(stripe_t - 301)) == outside_tolerance);
    // The timestamp is signed: moving it forward breaks the signature.
    CHECK(stripe_verify("t=" + std::to_string(stripe_t + 400) + ",v1=" + stripe_v1, at(stripe_t + 400)) == mismatch);
    CHECK(stripe_verify(header, at(stripe_t), stripe_secret, stripe_body + " ") == mismatch);
    // Several v1 (Stripe sends one per active secret) and several secrets of ours.
    CHECK(stripe_verify("t=" + std::to_string(stripe_t) + ",v1=" + std::string(64, '0') + ",v1=" + stripe_v1,
                        at(stripe_t)) == valid);
    const std::string old_only = "t=" + std::to_string(stripe_t) + ",v1=" + stripe_v1_old_secret;
    CHECK(stripe_verify(old_only, at(stripe_t)) == mismatch);
    CHECK(stripe_verify(old_only, at(stripe_t), {"whsec_test_secret", "whsec_old_secret"}) == valid);
    // Shapes that are not the scheme's.
    CHECK(stripe_verify("", at(stripe_t)) == missing);
    CHECK(stripe_verify("v1=" + stripe_v1, at(stripe_t)) == malformed);
    CHECK(stripe_verify("t=" + std::to_string(stripe_t), at(stripe_t)) == malformed);
    CHECK(stripe_verify("t=abc,v1=" + stripe_v1, at(stripe_t)) == malformed);
    CHECK(stripe_verify("t=1,t=2,v1=" + stripe_v1, at(stripe_t)) == malformed);
    CHECK(stripe_verify(std::to_string(stripe_t) + "," + stripe_v1, at(stripe_t)) == malformed);
    CHECK(stripe_verify("t=" + std::to_string(stripe_t) + ",v0=" + stripe_v1, at(stripe_t)) == malformed);
}

// ---------------------------------------------------------------------------
// The receiver: verify, identify, run once, answer.

namespace {

struct receiver_fixture {
    std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(at(stripe_t));
    std::shared_ptr<memory_store> store = std::make_shared<memory_store>(clock);
    executor exec{store};
    webhook::receiver stripe{exec,
                             {.provider = "stripe",
                              .scheme = webhook::timestamped_signature{},
                              .secrets = {"whsec_test_secret"},
                              .identify = webhook::id_from_json("id", scope::custom("account", "acct_1")),
                              .time = clock}};
    std::atomic<int> runs{0};

    // A delivery of `body`, signed now with the secret.
    [[nodiscard]] std::pair<std::string, std::string> signed_now(const std::string& body) const {
        const auto t = std::chrono::duration_cast<std::chrono::seconds>(clock->now().time_since_epoch()).count();
        return {body, "t=" + std::to_string(t) +
                          ",v1=" + webhook::hmac_sha256_hex("whsec_test_secret", std::to_string(t) + "." + body)};
    }
    webhook::answer deliver(const std::pair<std::string, std::string>& signed_delivery,
                            const std::function<webhook::handler_result()>& handler) {
        return stripe.handle({.body = signed_delivery.first, .headers = {{"Stripe-Signature", signed_delivery.second}}},
                             [&](const webhook::event&) {
                                 ++runs;
                                 return handler();
                             });
    }
};

const auto apply = [] { return webhook::handler_result::applied("credited 500"); };

}  // namespace

TEST_CASE("webhook receiver: an event is applied once; redeliveries are answered 200 as duplicates") {
    receiver_fixture f;
    const auto d = f.signed_now(R"({"id":"evt_1","amount":500})");
    std::string seen_id, seen_body;
    auto first =
        f.stripe.handle({.body = d.first, .headers = {{"Stripe-Signature", d.second}}}, [&](const webhook::event& e) {
            seen_id = e.id;
            seen_body = e.body;
            return webhook::handler_result::applied("credited 500");
        });
    CHECK(seen_id == "evt_1");
    CHECK(seen_body == d.first);
    CHECK(first.status == 200);
    CHECK(first.verdict == webhook::verdict::applied);
    CHECK_FALSE(first.redelivery_expected());
    CHECK(first.body == R"({"detail":"credited 500","event":"evt_1","result":"applied"})");
    f.clock->advance(1min);  // a redelivery, within the tolerance of its own (old) signature
    auto again = f.deliver(d, apply);
    CHECK(again.status == 200);
    CHECK(again.verdict == webhook::verdict::duplicate);
    CHECK(again.result == webhook::handler_result::applied("credited 500"));
    CHECK(again.body == R"({"detail":"credited 500","event":"evt_1","first":"applied","result":"duplicate"})");
    CHECK(f.runs == 0);  // the redelivery never reached its handler
}

TEST_CASE("webhook receiver: a permanent failure is stored and answered 200, so redeliveries stop") {
    receiver_fixture f;
    const auto d = f.signed_now(R"({"id":"evt_2","account":"nobody"})");
    auto first = f.deliver(d, [] { return webhook::handler_result::permanent_failure("unknown account"); });
    CHECK(first.status == 200);
    CHECK(first.verdict == webhook::verdict::permanent_failure);
    CHECK_FALSE(first.redelivery_expected());
    auto again = f.deliver(d, apply);
    CHECK(again.status == 200);
    CHECK(again.verdict == webhook::verdict::duplicate);
    CHECK(again.result == webhook::handler_result::permanent_failure("unknown account"));
    CHECK(f.runs == 1);
}

TEST_CASE("webhook receiver: a transient failure is answered 503 and frees the key for the redelivery") {
    receiver_fixture f;
    const auto d = f.signed_now(R"({"id":"evt_3"})");
    auto first = f.deliver(d, [] { return webhook::handler_result::transient_failure("ledger unavailable"); });
    CHECK(first.status == 503);
    CHECK(first.verdict == webhook::verdict::transient_failure);
    CHECK(first.redelivery_expected());
    auto again = f.deliver(d, apply);
    CHECK(again.status == 200);
    CHECK(again.verdict == webhook::verdict::applied);
    CHECK(f.runs == 2);
}

TEST_CASE("webhook receiver: a bad signature or an old delivery is refused before the event is claimed") {
    receiver_fixture f;
    auto d = f.signed_now(R"({"id":"evt_4"})");
    auto forged = f.deliver({d.first, "t=1,v1=" + std::string(64, 'a')}, apply);
    CHECK(forged.status == 401);
    CHECK(forged.verdict == webhook::verdict::unauthenticated);
    CHECK(forged.body == R"({"detail":"mismatch","result":"unauthenticated"})");
    CHECK(forged.redelivery_expected());
    CHECK(f.deliver({d.first, ""}, apply).body == R"({"detail":"missing","result":"unauthenticated"})");
    f.clock->advance(6min);  // the captured delivery, replayed after the window
    auto replayed = f.deliver(d, apply);
    CHECK(replayed.status == 401);
    CHECK(replayed.body == R"({"detail":"outside_tolerance","result":"unauthenticated"})");
    CHECK(f.runs == 0);
    // None of these claimed the id: the provider's own delivery runs.
    CHECK(f.deliver(f.signed_now(d.first), apply).verdict == webhook::verdict::applied);
    CHECK(f.runs == 1);
}

TEST_CASE("webhook receiver: a verified delivery without an event id is answered 400") {
    receiver_fixture f;
    for (const std::string body : {R"({"type":"ping"})", R"({"id":17})", R"({"id":""})", "not json", "[1]"}) {
        auto a = f.deliver(f.signed_now(body), apply);
        CHECK(a.status == 400);
        CHECK(a.verdict == webhook::verdict::unidentified);
    }
    CHECK(f.runs == 0);
}

TEST_CASE("webhook receiver: a delivery that arrives while the first is being handled gets 409") {
    receiver_fixture f;
    const auto d = f.signed_now(R"({"id":"evt_5"})");
    std::promise<void> started, finish;
    std::jthread first([&] {
        auto a = f.deliver(d, [&] {
            started.set_value();
            finish.get_future().wait();
            return webhook::handler_result::applied();
        });
        CHECK(a.verdict == webhook::verdict::applied);
    });
    started.get_future().wait();
    auto concurrent = f.deliver(d, apply);
    finish.set_value();
    first.join();
    CHECK(concurrent.status == 409);
    CHECK(concurrent.verdict == webhook::verdict::in_flight);
    CHECK(concurrent.redelivery_expected());
    CHECK(f.runs == 1);
}

TEST_CASE("webhook receiver: GitHub deliveries are identified by X-GitHub-Delivery") {
    auto store = std::make_shared<memory_store>();
    executor exec{store};
    webhook::receiver github{exec,
                             {.provider = "github",
                              .scheme = webhook::body_signature{},
                              .secrets = {"It's a Secret to Everybody"},
                              .identify = webhook::id_from_header("X-GitHub-Delivery", scope::client("repo-1"))}};
    int runs = 0;
    const webhook::delivery d{.body = "Hello, World!",
                              .headers = {{"x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
                                          {"x-hub-signature-256",
                                           "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}};
    const auto handler = [&](const webhook::event& e) {
        ++runs;
        CHECK(e.id == "72d3162e-cc78-11e3-81ab-4c9367dc0958");
        return webhook::handler_result::applied();
    };
    CHECK(github.handle(d, handler).verdict == webhook::verdict::applied);
    CHECK(github.handle(d, handler).verdict == webhook::verdict::duplicate);
    CHECK(runs == 1);
    const auto key = webhook::event_key("github", "72d3162e-cc78-11e3-81ab-4c9367dc0958", scope::client("repo-1"));
    CHECK(store->try_reserve(key, webhook::fingerprint, 1min).status == reservation_status::completed);
}

TEST_CASE("webhook receiver: bad options are refused") {
    auto store = std::make_shared<memory_store>();
    executor exec{store};
    const auto id = webhook::id_from_json("id", scope::global());
    CHECK_THROWS_AS(webhook::receiver(exec, {.provider = "", .scheme = {}, .secrets = {"s"}, .identify = id}),
                    options_error);
    CHECK_THROWS_AS(webhook::receiver(exec, {.provider = "p", .scheme = {}, .secrets = {}, .identify = id}),
                    options_error);
    CHECK_THROWS_AS(webhook::receiver(exec, {.provider = "p", .scheme = {}, .secrets = {"s", ""}, .identify = id}),
                    options_error);
    CHECK_THROWS_AS(webhook::receiver(exec, {.provider = "p", .scheme = {}, .secrets = {"s"}, .identify = {}}),
                    options_error);
    const webhook::timestamped_signature no_window{.tolerance = std::chrono::seconds(0)};
    CHECK_THROWS_AS(webhook::receiver(exec, {.provider = "p", .scheme = no_window, .secrets = {"s"}, .identify = id}),
                    options_error);
}
