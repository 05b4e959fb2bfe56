// The Idempotency-Key layer through real HTTP on loopback (cpp-httplib server and client).
#include <doctest/doctest.h>

#include <httplib.h>

#include <atomic>
#include <future>
#include <thread>

#include "../support/loopback_server.hpp"
#include "../support/switchable_store.hpp"
#include "idem/encryption.hpp"
#include "idem/http/httplib.hpp"
#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

// A server on a free loopback port, with a few endpoints behind one layer.
struct service {
    std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();
    std::shared_ptr<test::switchable_store> store = std::make_shared<test::switchable_store>(clock);
    http::idempotency_layer layer;
    httplib::Server server;
    std::thread thread;
    int port = 0;
    std::atomic<int> runs{0};
    std::promise<void> entered;  // the held endpoint has started
    std::promise<void> release_promise;
    std::shared_future<void> release;  // lets the held endpoint finish

    explicit service(http::layer_options options, executor_options live = {})
        : layer(store, std::move(live), std::move(options)), release(release_promise.get_future().share()) {
        const auto with_claims = http::httplib_options{.claims_of = [](const httplib::Request& req) {
            claims c;
            if (req.has_header("X-User")) c.emplace("sub", req.get_header_value("X-User"));
            return c;
        }};
        server.Post("/transfers", http::idempotent(
                                      layer,
                                      [this](const httplib::Request& req, httplib::Response& res) {
                                          const int n = ++runs;
                                          res.status = 201;
                                          res.set_header("Location", "/transfers/" + std::to_string(n));
                                          res.set_header("Set-Cookie", "session=abc");
                                          res.set_header("X-Debug", "run " + std::to_string(n));
                                          res.set_content(std::string("{\"run\":") + std::to_string(n) +
                                                              ",\"body\":\"" + req.body + "\"}\0\xff",
                                                          "application/json");
                                      },
                                      with_claims));
        server.Post("/held", http::idempotent(
                                 layer,
                                 [this](const httplib::Request&, httplib::Response& res) {
                                     ++runs;
                                     entered.set_value();
                                     release.wait();
                                     res.set_content("held", "text/plain");
                                 },
                                 with_claims));
        server.Post("/status", http::idempotent(
                                   layer,
                                   [this](const httplib::Request& req, httplib::Response& res) {
                                       ++runs;
                                       res.status = std::stoi(req.get_header_value("X-Status"));
                                       res.set_content("status run " + std::to_string(runs.load()), "text/plain");
                                   },
                                   with_claims));
        server.Post("/throws", http::idempotent(
                                   layer,
                                   [this](const httplib::Request&, httplib::Response&) {
                                       ++runs;
                                       throw std::runtime_error("endpoint failed");
                                   },
                                   with_claims));
        server.Post("/large", http::idempotent(
                                  layer,
                                  [this](const httplib::Request&, httplib::Response& res) {
                                      ++runs;
                                      res.set_content(std::string(2 * 1024 * 1024, 'x'), "application/octet-stream");
                                  },
                                  with_claims));
        port = server.bind_to_any_port("127.0.0.1");
        REQUIRE(port > 0);
        thread = std::thread([this] { server.listen_after_bind(); });
        while (!server.is_running()) std::this_thread::sleep_for(1ms);
    }
    ~service() {
        server.stop();
        thread.join();
    }

    httplib::Result post(const std::string& path, const std::string& body, httplib::Headers headers = {}) {
        httplib::Client client("127.0.0.1", port);
        client.set_read_timeout(10s);
        return client.Post(path, headers, body, "application/json");
    }
};

httplib::Headers key(std::string value, std::string user = "alice") {
    return {{"Idempotency-Key", std::move(value)}, {"X-User", std::move(user)}};
}

http::layer_options user_scoped() {
    return {.resolver = scopes::user()};
}

}  // namespace

TEST_CASE("http: a retry gets the exact bytes and allow-listed headers, marked replayed") {
    service s(user_scoped());
    auto first = s.post("/transfers", "amount=10", key("k-1"));
    REQUIRE(first);
    CHECK(first->status == 201);
    CHECK_FALSE(first->has_header("Idempotent-Replayed"));
    auto retry = s.post("/transfers", "amount=10", key("\"k-1\""));  // the sf-string form is the same key
    REQUIRE(retry);
    CHECK(retry->status == 201);
    CHECK(retry->body == first->body);
    CHECK(retry->body.size() == first->body.size());
    CHECK(retry->get_header_value("Idempotent-Replayed") == "true");
    CHECK(retry->get_header_value("Location") == "/transfers/1");
    CHECK(retry->get_header_value("Content-Type") == "application/json");
    CHECK_FALSE(retry->has_header("Set-Cookie"));
    CHECK_FALSE(retry->has_header("X-Debug"));
    CHECK(s.runs == 1);
}

TEST_CASE("http: the same key with another body is 422 KeyReused") {
    service s(user_scoped());
    REQUIRE(s.post("/transfers", "amount=10", key("k-1"))->status == 201);
    auto reused = s.post("/transfers", "amount=99", key("k-1"));
    CHECK(reused->status == 422);
    CHECK(reused->get_header_value("Content-Type") == "application/problem+json");
    CHECK(reused->get_header_value("Cache-Control") == "no-store");
    CHECK(reused->body.find("Idempotency.KeyReused") != std::string::npos);
    CHECK(s.runs == 1);
}

TEST_CASE("http: a retry while the first request is inside its handler is 409 with Retry-After") {
    service s(user_scoped());
    auto first = std::async(std::launch::async, [&] { return s.post("/held", "x", key("k-held")); });
    s.entered.get_future().wait();
    auto concurrent = s.post("/held", "x", key("k-held"));
    CHECK(concurrent->status == 409);
    CHECK(concurrent->get_header_value("Retry-After") == "1");
    CHECK(concurrent->body.find("Idempotency.InFlight") != std::string::npos);
    s.release_promise.set_value();
    CHECK(first.get()->status == 200);
    auto after = s.post("/held", "x", key("k-held"));
    CHECK(after->status == 200);
    CHECK(after->get_header_value("Idempotent-Replayed") == "true");
    CHECK(s.runs == 1);
}

TEST_CASE("http: missing, invalid and repeated keys are 400 with their codes") {
    service s(user_scoped(), {.http = {.require_key = true}});
    auto missing = s.post("/transfers", "x", {{"X-User", "alice"}});
    CHECK(missing->status == 400);
    CHECK(missing->body.find("Idempotency.KeyMissing") != std::string::npos);
    auto invalid = s.post("/transfers", "x", key("has space"));
    CHECK(invalid->status == 400);
    CHECK(invalid->body.find("Idempotency.KeyInvalid") != std::string::npos);
    auto repeated =
        s.post("/transfers", "x", {{"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}, {"X-User", "alice"}});
    CHECK(repeated->status == 400);
    CHECK(repeated->body.find("Idempotency.KeyInvalid") != std::string::npos);
    // Shapes RFC 8941 reads as something other than a String: a Byte Sequence, a
    // List, a Token with parameters (idem/http/key_header.hpp says why).
    for (const char* shape : {":YWJj:", "a, b", "abc;p=1", "(abc)", "\"abc\" ;p=1"}) {
        CAPTURE(shape);
        auto refused = s.post("/transfers", "x", key(shape));
        CHECK(refused->status == 400);
        CHECK(refused->body.find("Idempotency.KeyInvalid") != std::string::npos);
    }
    CHECK(s.runs == 0);
    // An sf-string with a parameter is its String: a retry without the parameter replays it.
    auto first = s.post("/transfers", "x", key("\"k-params\";v=1"));
    CHECK(first->status == 201);
    auto again = s.post("/transfers", "x", key("k-params"));
    CHECK(again->get_header_value("Idempotent-Replayed") == "true");
    CHECK(s.runs == 1);
}

TEST_CASE("http: a key is optional unless required; without one the endpoint simply runs") {
    service s(user_scoped());
    CHECK(s.post("/transfers", "x", {{"X-User", "alice"}})->status == 201);
    CHECK(s.post("/transfers", "x", {{"X-User", "alice"}})->status == 201);
    CHECK(s.runs == 2);
}

TEST_CASE("http: two users with the same key do not share a response") {
    service s(user_scoped());
    auto alice = s.post("/transfers", "amount=10", key("shared", "alice"));
    auto bob = s.post("/transfers", "amount=10", key("shared", "bob"));
    CHECK(alice->status == 201);
    CHECK(bob->status == 201);
    CHECK_FALSE(bob->has_header("Idempotent-Replayed"));
    CHECK(alice->get_header_value("Location") != bob->get_header_value("Location"));
    CHECK(s.runs == 2);
}

TEST_CASE("http: a key without an identifiable caller is 400 ScopeRequired, or bypasses when configured") {
    {
        service s(user_scoped());
        auto r = s.post("/transfers", "x", {{"Idempotency-Key", "k"}});
        CHECK(r->status == 400);
        CHECK(r->body.find("Idempotency.ScopeRequired") != std::string::npos);
        CHECK(s.runs == 0);
    }
    {
        service s(user_scoped(), {.http = {.unscoped = http::unscoped_behavior::bypass}});
        CHECK(s.post("/transfers", "x", {{"Idempotency-Key", "k"}})->status == 201);
        CHECK(s.post("/transfers", "x", {{"Idempotency-Key", "k"}})->status == 201);
        CHECK(s.runs == 2);
    }
}

TEST_CASE("http: a body over the cap is sent but not stored, and the key is released") {
    service s(user_scoped());
    auto first = s.post("/large", "", key("big"));
    CHECK(first->status == 200);
    CHECK(first->body.size() == 2 * 1024 * 1024);
    auto second = s.post("/large", "", key("big"));
    CHECK(second->body.size() == 2 * 1024 * 1024);
    CHECK_FALSE(second->has_header("Idempotent-Replayed"));
    CHECK(s.runs == 2);
}

TEST_CASE("http: a 5xx after the handler ran is stored for the shorter failure retention") {
    service s(user_scoped(), {.failure_retention = 2min});
    auto failed = s.post("/status", "", {{"Idempotency-Key", "e"}, {"X-User", "a"}, {"X-Status", "500"}});
    CHECK(failed->status == 500);
    auto replay = s.post("/status", "", {{"Idempotency-Key", "e"}, {"X-User", "a"}, {"X-Status", "500"}});
    CHECK(replay->status == 500);
    CHECK(replay->get_header_value("Idempotent-Replayed") == "true");
    CHECK(s.runs == 1);
    s.clock->advance(3min);
    CHECK_FALSE(s.post("/status", "", {{"Idempotency-Key", "e"}, {"X-User", "a"}, {"X-Status", "500"}})
                    ->has_header("Idempotent-Replayed"));
    CHECK(s.runs == 2);
}

TEST_CASE("http: 503, 504 and an exception keep the key in flight until the lease ends") {
    service s(user_scoped());
    for (const char* code : {"503", "504"}) {
        const httplib::Headers h{{"Idempotency-Key", std::string("k-") + code}, {"X-User", "a"}, {"X-Status", code}};
        CHECK(s.post("/status", "", h)->status == std::stoi(code));
        CHECK(s.post("/status", "", h)->status == 409);
    }
    auto thrown = s.post("/throws", "", key("k-throw"));
    CHECK(thrown->status == 500);
    CHECK(s.post("/throws", "", key("k-throw"))->status == 409);
    CHECK(s.runs == 3);
    s.clock->advance(61s);
    CHECK(s.post("/throws", "", key("k-throw"))->status == 500);
    CHECK(s.runs == 4);
}

TEST_CASE("http: not-final 4xx answers release the key; final ones are replayed") {
    service s(user_scoped());
    const httplib::Headers limited{{"Idempotency-Key", "r"}, {"X-User", "a"}, {"X-Status", "429"}};
    CHECK(s.post("/status", "", limited)->status == 429);
    CHECK_FALSE(s.post("/status", "", limited)->has_header("Idempotent-Replayed"));
    const httplib::Headers missing{{"Idempotency-Key", "n"}, {"X-User", "a"}, {"X-Status", "404"}};
    CHECK(s.post("/status", "", missing)->status == 404);
    CHECK(s.post("/status", "", missing)->get_header_value("Idempotent-Replayed") == "true");
    CHECK(s.runs == 3);
}

TEST_CASE("http: a store that is down answers 503 StoreUnavailable and never runs the endpoint") {
    service s(user_scoped());
    s.store->failing = true;
    auto r = s.post("/transfers", "x", key("k"));
    CHECK(r->status == 503);
    CHECK(r->body.find("Idempotency.StoreUnavailable") != std::string::npos);
    CHECK(r->has_header("Retry-After"));
    CHECK(s.runs == 0);
    s.store->failing = false;
    CHECK(s.post("/transfers", "x", key("k"))->status == 201);
}

TEST_CASE("http: observe runs every request and records what enforce would do; off ignores keys") {
    {
        service s(user_scoped(), {.mode = mode::observe});
        CHECK(s.post("/transfers", "x", key("k"))->status == 201);
        auto second = s.post("/transfers", "x", key("k"));
        CHECK(second->status == 201);
        CHECK_FALSE(second->has_header("Idempotent-Replayed"));
        CHECK(s.runs == 2);
    }
    {
        service s(user_scoped(), {.mode = mode::off});
        (void)s.post("/transfers", "x", key("k"));
        (void)s.post("/transfers", "y", key("k"));
        CHECK(s.runs == 2);
    }
}

TEST_CASE("http: GET is not covered by default") {
    service s(user_scoped());
    s.server.Get("/read", http::idempotent(s.layer, [&](const httplib::Request&, httplib::Response& res) {
                     ++s.runs;
                     res.set_content("r", "text/plain");
                 }));
    httplib::Client client("127.0.0.1", s.port);
    CHECK(client.Get("/read", key("k"))->status == 200);
    CHECK(client.Get("/read", key("k"))->status == 200);
    CHECK(s.runs == 2);
}

TEST_CASE("http: invalid layer options name every invalid field") {
    try {
        http::idempotency_layer layer(std::make_shared<memory_store>(), {.lease = 20min, .failure_retention = 0s},
                                      {.methods = {}, .max_stored_body = 0});
        FAIL("expected options_error");
    } catch (const options_error& e) {
        const std::string what = e.what();
        CHECK(what.find("lease (20m) exceeds max_lease") != std::string::npos);
        CHECK(what.find("failure_retention must be positive") != std::string::npos);
        CHECK(what.find("methods is empty") != std::string::npos);
        CHECK(what.find("max_stored_body must be positive") != std::string::npos);
    }
}

TEST_CASE(
    "http: a retry after the retention, inside the profile's remembered window, is 410 Expired and does not run") {
    executor_options live;
    live.profiles["payments"] = {.retention = 1h, .remember = std::chrono::hours(24 * 30)};
    http::layer_options o = user_scoped();
    o.profile = "payments";
    service s(std::move(o), std::move(live));
    REQUIRE(s.post("/transfers", "amount=10", key("k-late"))->status == 201);
    s.clock->advance(2h);  // the response is no longer kept; the purge removes its record
    while (s.store->purge_expired(1000) > 0) {
    }
    auto late = s.post("/transfers", "amount=10", key("k-late"));
    REQUIRE(late);
    CHECK(late->status == 410);
    CHECK(late->get_header_value("Content-Type") == "application/problem+json");
    CHECK(late->get_header_value("Cache-Control") == "no-store");
    CHECK(late->body.find("Idempotency.Expired") != std::string::npos);
    CHECK_FALSE(late->has_header("Idempotent-Replayed"));
    CHECK(s.post("/transfers", "amount=99", key("k-late"))->status == 422);  // other content: reused
    CHECK(s.runs == 1);
    s.clock->advance(std::chrono::hours(24 * 30));  // the window ended: the key runs anew
    CHECK(s.post("/transfers", "amount=10", key("k-late"))->status == 201);
    CHECK(s.runs == 2);
}

TEST_CASE("http: the reconciliation route is off by default; on a store that cannot look a key up it is 501") {
    auto store = std::make_shared<test::switchable_store>();  // a record store, and no more
    http::idempotency_layer off(store, {}, user_scoped());
    http::idempotency_layer on(store, {}, {.resolver = scopes::user(), .reconcile_path = "/idempotency"});
    test::loopback_server without;
    http::serve_reconciliation(without.server, off);  // registers nothing: no reconcile_path
    without.start();
    httplib::Client plain = without.client();
    CHECK(plain.Get("/idempotency", key("k"))->status == 404);

    const auto claims_of = [](const httplib::Request& req) { return claims{{"sub", req.get_header_value("X-User")}}; };
    test::loopback_server with;
    with.server.Post("/t",
                     http::idempotent(on, [](const httplib::Request&, httplib::Response& res) { res.status = 201; },
                                      {.claims_of = claims_of}));
    http::serve_reconciliation(with.server, on, {.claims_of = claims_of});
    with.start();
    httplib::Client client = with.client();
    REQUIRE(client.Post("/t", key("k"), "x", "text/plain")->status == 201);
    const auto unsupported = client.Get("/idempotency", key("k"));
    CHECK(unsupported->status == 501);
    CHECK(unsupported->get_header_value("Content-Type") == "application/problem+json");
    CHECK(unsupported->body.find("Idempotency.LookupUnsupported") != std::string::npos);
    // Bad input is refused before the store is asked.
    CHECK(client.Get("/idempotency", {{"X-User", "alice"}})->body.find("Idempotency.KeyMissing") != std::string::npos);
    // The framework-neutral call answers the same.
    CHECK(on.reconcile({.key_headers = {"k"}, .caller = {{"sub", "alice"}}}).status == 501);
}

TEST_CASE("http: the reconciliation route on the memory store, its results sealed at rest") {
    const auto keys = std::make_shared<const encryption_keys>(encryption_keys::parse("k1:" + std::string(64, 'a')));
    http::idempotency_layer layer(std::make_shared<memory_store>(), {.encryption = keys},
                                  {.resolver = scopes::user(), .reconcile_path = "/idempotency"});
    const auto claims_of = [](const httplib::Request& req) { return claims{{"sub", req.get_header_value("X-User")}}; };
    test::loopback_server s;
    s.server.Post("/t", http::idempotent(layer,
                                         [](const httplib::Request&, httplib::Response& res) {
                                             res.status = 201;
                                             res.set_content("made", "text/plain");
                                         },
                                         {.claims_of = claims_of}));
    http::serve_reconciliation(s.server, layer, {.claims_of = claims_of});
    s.start();
    httplib::Client client = s.client();
    CHECK(client.Get("/idempotency", key("k"))->body == R"({"state":"absent"})");
    REQUIRE(client.Post("/t", key("k"), "x", "text/plain")->status == 201);
    const auto done = client.Get("/idempotency", key("k"));
    CHECK(done->status == 200);
    CHECK(done->body.find(R"("state":"completed")") != std::string::npos);
    CHECK(done->body.find(R"("status":201)") != std::string::npos);  // opened with the ring
    CHECK(client.Get("/idempotency", key("k", "bob"))->body == R"({"state":"absent"})");
}

TEST_CASE("http: a redact hook edits the stored copy only: the first answer is whole, replays and the store masked") {
    const std::string card = "4111111111111111";
    auto store = std::make_shared<memory_store>();
    http::idempotency_layer layer(
        store, {}, {.resolver = scopes::user(), .redact = [&](http::response& stored) {
                        const std::size_t at = stored.body.find(card);
                        if (at != std::string::npos) stored.body.replace(at, card.size(), "****");
                        stored.headers.erase(std::remove_if(stored.headers.begin(), stored.headers.end(),
                                                            [](const auto& h) { return h.first == "Location"; }),
                                             stored.headers.end());
                    }});
    const auto claims_of = [](const httplib::Request& req) { return claims{{"sub", req.get_header_value("X-User")}}; };
    test::loopback_server s;
    std::atomic<int> runs{0};
    s.server.Post("/cards", http::idempotent(layer,
                                             [&](const httplib::Request&, httplib::Response& res) {
                                                 ++runs;
                                                 res.status = 201;
                                                 res.set_header("Location", "/cards/1");
                                                 res.set_content("card " + card, "text/plain");
                                             },
                                             {.claims_of = claims_of}));
    s.start();
    httplib::Client client = s.client();
    const auto first = client.Post("/cards", key("c"), "x", "text/plain");
    REQUIRE(first);
    CHECK(first->status == 201);
    CHECK(first->body == "card " + card);
    CHECK(first->get_header_value("Location") == "/cards/1");
    const auto again = client.Post("/cards", key("c"), "x", "text/plain");
    REQUIRE(again);
    CHECK(again->status == 201);
    CHECK(again->get_header_value("Idempotent-Replayed") == "true");
    CHECK(again->body == "card ****");
    CHECK_FALSE(again->has_header("Location"));
    CHECK(runs == 1);
    const record_key stored_under = layer
                                        .admit(http::request{.method = "POST",
                                                             .target = "/cards",
                                                             .body = "x",
                                                             .key_headers = {"c"},
                                                             .caller = {{"sub", "alice"}},
                                                             .route = "/cards"})
                                        .key.value();
    const auto record = store->inspect(stored_under, true);
    REQUIRE(record.has_value());
    CHECK(record->payload.value().find(card) == std::string::npos);
    CHECK(record->payload.value().find("card ****") != std::string::npos);
}
