// Observe never changes an answer: over loopback HTTP, what a client sees in Observe
// equals what it sees in Off, case by case, while the decision counter shows what
// Enforce would have answered (checked against a run in Enforce).
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <map>

#include "../support/recording_sink.hpp"
#include "../support/switchable_store.hpp"
#include "idem/memory_store.hpp"
#include "loopback_server.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

// What a client sees of one response.
struct seen {
    int status;
    std::multimap<std::string, std::string> headers;
    std::string body;
    bool operator==(const seen&) const = default;
};

seen seen_of(const httplib::Result& r) {
    REQUIRE(r);
    return {r->status, {r->headers.begin(), r->headers.end()}, r->body};
}

// One layer in one mode, with an endpoint whose answers depend only on how often it ran.
struct service {
    std::shared_ptr<metrics_sink> metrics = std::make_shared<metrics_sink>();
    std::shared_ptr<test::recording_sink> logs = std::make_shared<test::recording_sink>();
    http::idempotency_layer layer;
    test::loopback_server http;
    std::atomic<int> runs{0};
    std::atomic<bool> hold_next{false};
    std::promise<void> entered;
    std::promise<void> release_promise;
    std::shared_future<void> release = release_promise.get_future().share();

    explicit service(mode m)
        : layer(std::make_shared<memory_store>(), {.mode = m, .http = {.require_key = true}},
                {.resolver = scopes::user()},
                std::make_shared<fanout_sink>(std::vector<std::shared_ptr<telemetry_sink>>{metrics, logs})) {
        const http::httplib_options options{.claims_of =
                                                [](const httplib::Request& req) {
                                                    claims c;
                                                    if (req.has_header("X-User"))
                                                        c.emplace("sub", req.get_header_value("X-User"));
                                                    return c;
                                                },
                                            .route = "/transfers"};
        http.server.Post("/transfers", http::idempotent(
                                           layer,
                                           [this](const httplib::Request& req, httplib::Response& res) {
                                               const int n = ++runs;
                                               if (hold_next.exchange(false)) {
                                                   entered.set_value();
                                                   release.wait();
                                               }
                                               res.status = 201;
                                               res.set_header("Location", "/transfers/" + std::to_string(n));
                                               res.set_content(
                                                   "{\"run\":" + std::to_string(n) + ",\"body\":\"" + req.body + "\"}",
                                                   "application/json");
                                           },
                                           options));
        http.start();
    }

    seen post(const std::string& body, httplib::Headers headers) {
        return seen_of(http.client().Post("/transfers", headers, body, "application/json"));
    }
    std::uint64_t count(outcome o, mode m) const { return metrics->count(entry_point::http, o, m); }
};

httplib::Headers keyed(std::string key, std::string user = "alice") {
    return {{"Idempotency-Key", std::move(key)}, {"X-User", std::move(user)}};
}

// Every case Enforce answers by itself, in order; returns what the client saw each time.
std::vector<seen> run_cases(service& s) {
    std::vector<seen> out;
    out.push_back(s.post("a", {{"X-User", "alice"}}));                                                    // KeyMissing
    out.push_back(s.post("b", keyed("has space")));                                                       // KeyInvalid
    out.push_back(s.post("c", {{"Idempotency-Key", "k1"}, {"Idempotency-Key", "k2"}, {"X-User", "a"}}));  // KeyInvalid
    out.push_back(s.post("d", {{"Idempotency-Key", "k-unscoped"}}));  // ScopeRequired
    out.push_back(s.post("e", keyed("k-replay")));                    // executed
    out.push_back(s.post("e", keyed("k-replay")));                    // replay
    out.push_back(s.post("f", keyed("k-replay")));                    // 422
    s.hold_next = true;                                               // 409:
    auto first = std::async(std::launch::async, [&] { return s.post("g", keyed("k-held")); });
    s.entered.get_future().wait();
    out.push_back(s.post("g", keyed("k-held")));
    s.release_promise.set_value();
    out.push_back(first.get());
    return out;
}

}  // namespace

TEST_CASE("observe: every answer equals Off's; the counter shows what Enforce answered") {
    service off(mode::off);
    service observe(mode::observe);
    service enforce(mode::enforce);
    const std::vector<seen> in_off = run_cases(off);
    const std::vector<seen> in_observe = run_cases(observe);
    const std::vector<seen> in_enforce = run_cases(enforce);

    REQUIRE(in_observe.size() == in_off.size());
    for (std::size_t i = 0; i < in_off.size(); ++i) {
        CAPTURE(i);
        CHECK(in_observe[i].status == in_off[i].status);
        CHECK(in_observe[i].body == in_off[i].body);
        CHECK(in_observe[i].headers == in_off[i].headers);
        CHECK(in_observe[i].status == 201);
        CHECK(in_observe[i].headers.count("Idempotent-Replayed") == 0);
    }
    CHECK(off.runs == 9);
    CHECK(observe.runs == 9);

    // Enforce answered each case itself...
    const std::vector<int> enforce_statuses = {400, 400, 400, 400, 201, 201, 422, 409, 201};
    for (std::size_t i = 0; i < enforce_statuses.size(); ++i) {
        CAPTURE(i);
        CHECK(in_enforce[i].status == enforce_statuses[i]);
    }
    CHECK(in_enforce[5].headers.find("Idempotent-Replayed")->second == "true");
    CHECK(enforce.runs == 2);

    // ...and Observe counted exactly those answers, under its own mode.
    for (outcome o : {outcome::key_missing, outcome::key_invalid, outcome::unscoped, outcome::executed, outcome::replay,
                      outcome::key_reused, outcome::in_flight}) {
        CAPTURE(to_string(o));
        CHECK(observe.count(o, mode::observe) == enforce.count(o, mode::enforce));
        CHECK(observe.count(o, mode::observe) > 0);
        CHECK(off.count(o, mode::off) == 0);
    }
    CHECK(observe.count(outcome::key_invalid, mode::observe) == 2);

    // Logged too, naming the operation and never the key.
    for (const char* event :
         {"idem.http.key_missing", "idem.http.key_invalid", "idem.http.unscoped", "idem.observe.would_answer"})
        CHECK(observe.logs->logged(event));
    const std::string logged = observe.logs->all_text();
    CHECK(logged.find("409 Idempotency.InFlight") != std::string::npos);
    CHECK(logged.find("422 Idempotency.KeyReused") != std::string::npos);
    for (const char* key : {"k-replay", "k-held", "k-unscoped", "has space"})
        CHECK(logged.find(key) == std::string::npos);
    CHECK(off.logs->logs().empty());
}

TEST_CASE("observe: log events carry entry point, namespace, profile, method and route") {
    struct capture final : telemetry_sink {
        std::mutex mutex;
        // By event name: the entry point, then namespace|profile|method|route.
        std::map<std::string, std::pair<entry_point, std::string>> events;
        void on_log(const log_event& e) noexcept override {
            std::lock_guard lock(mutex);
            const operation_info& op = e.operation;
            events[std::string(e.name)] = {op.entry, std::string(op.name_space) + "|" + std::string(op.profile) + "|" +
                                                         std::string(op.method) + "|" + std::string(op.route)};
        }
    };
    auto sink = std::make_shared<capture>();
    auto source = std::make_shared<options_source>(executor_options{.mode = mode::observe, .profiles = {{"api", {}}}});
    executor exec({{"", std::make_shared<memory_store>()}}, source, sink);
    http::idempotency_layer layer(exec, {.resolver = scopes::user(), .name_space = "payments.http", .profile = "api"});
    test::loopback_server http;
    const auto alice = [](const httplib::Request& req) {
        return req.has_header("X-User") ? claims{{"sub", req.get_header_value("X-User")}} : claims{};
    };
    http.server.Post(
        R"(/accounts/(\w+))",
        http::idempotent(layer, [](const httplib::Request&, httplib::Response&) { throw std::runtime_error("down"); },
                         {.claims_of = alice, .route = "/accounts/{id}"}));
    http::protect(http.server);
    http.start();
    // Unscoped (logged by the layer), then a failing endpoint (logged by the executor).
    CHECK(http.client().Post("/accounts/alice", {{"Idempotency-Key", "k"}}, "x", "text/plain")->status == 500);
    CHECK(
        http.client().Post("/accounts/alice", {{"Idempotency-Key", "k"}, {"X-User", "u"}}, "x", "text/plain")->status ==
        500);

    std::lock_guard lock(sink->mutex);
    for (const char* event : {"idem.http.unscoped", "idem.operation.failed"}) {
        CAPTURE(event);
        REQUIRE(sink->events.contains(event));
        CHECK(sink->events[event].first == entry_point::http);
        CHECK(sink->events[event].second == "payments.http|api|POST|/accounts/{id}");
    }
}

TEST_CASE("observe: a record store that is down changes no answer either (Enforce would answer 503)") {
    auto store = std::make_shared<test::switchable_store>();
    store->failing = true;
    auto metrics = std::make_shared<metrics_sink>();
    std::map<mode, seen> answers;
    for (mode m : {mode::off, mode::observe, mode::enforce}) {
        http::idempotency_layer layer(store, {.mode = m}, {}, metrics);
        test::loopback_server http;
        http.server.Post("/t", http::idempotent(layer, [](const httplib::Request&, httplib::Response& res) {
                             res.status = 201;
                             res.set_content("ran", "text/plain");
                         }));
        http.start();
        answers[m] = seen_of(http.client().Post("/t", {{"Idempotency-Key", "k"}}, "x", "text/plain"));
    }
    CHECK(answers[mode::observe] == answers[mode::off]);
    CHECK(answers[mode::observe].status == 201);
    CHECK(answers[mode::enforce].status == 503);
    CHECK(metrics->count(entry_point::http, outcome::reserve_failed, mode::observe) == 1);
}
