// The retrying client against loopback servers that fail, hold the key, and go away.
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include "idem/http/client.hpp"
#include "idem/memory_store.hpp"
#include "loopback_server.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

// Every attempt a server saw: its key and body.
struct attempts_log {
    std::mutex mutex;
    std::vector<std::pair<std::string, std::string>> seen;
    void add(const httplib::Request& req) {
        std::lock_guard lock(mutex);
        seen.emplace_back(req.get_header_value("Idempotency-Key"), req.body);
    }
    std::size_t size() {
        std::lock_guard lock(mutex);
        return seen.size();
    }
    bool all_equal(const std::string& key, const std::string& body) {
        std::lock_guard lock(mutex);
        for (const auto& [k, b] : seen)
            if (k != key || b != body) return false;
        return true;
    }
};

const http::retry_policy fast{.first_backoff = 10ms, .max_backoff = 50ms, .max_retry_after = 2s, .budget = 10s};

// The 409 bodies of an idempotency layer (the first request still runs) and of a
// business rule (the same request conflicts every time), as servers send them.
const std::string in_flight_problem =
    R"({"type":"urn:idem:Idempotency.InFlight","title":"still being processed","status":409,)"
    R"("code":"Idempotency.InFlight"})";
const std::string exists_problem =
    R"({"type":"urn:payments:Payments.AccountExists","title":"the account exists","status":409,)"
    R"("code":"Payments.AccountExists"})";

}  // namespace

TEST_CASE("client: a key is a fresh UUIDv4 per logical request") {
    const std::string a = http::new_key(), b = http::new_key();
    CHECK(a != b);
    CHECK(std::regex_match(a, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
    CHECK(http::outgoing_request{}.key != http::outgoing_request{}.key);
}

TEST_CASE("client: 5xx and an in-flight 409 are retried with the same key and body until the answer") {
    test::loopback_server server;
    attempts_log log;
    std::atomic<int> calls{0};
    server.server.Post("/flaky", [&](const httplib::Request& req, httplib::Response& res) {
        log.add(req);
        const int n = ++calls;
        res.status = n == 1 ? 503 : n == 2 ? 500 : n == 3 ? 409 : 201;
        if (n == 3)
            res.set_content(in_flight_problem, "application/problem+json");
        else
            res.set_content("attempt " + std::to_string(n), "text/plain");
    });
    server.start();
    httplib::Client client = server.client();
    const http::outgoing_request request{.path = "/flaky", .body = R"({"amount":5})"};
    const http::call_result r = http::send(client, request, fast);
    CHECK(r.status == http::call_status::answered);
    CHECK(r.attempts == 4);
    REQUIRE(r.answer);
    CHECK(r.answer->status == 201);
    CHECK(r.answer->body == "attempt 4");
    CHECK(r.key == request.key);
    CHECK(log.size() == 4);
    CHECK(log.all_equal(request.key, request.body));
}

TEST_CASE("client: final answers are not retried: 2xx, 4xx, a replayed 5xx") {
    test::loopback_server server;
    std::atomic<int> calls{0};
    server.server.Post(R"(/status/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
        ++calls;
        res.status = std::stoi(req.matches[1]);
        if (req.has_header("X-Replayed")) res.set_header("Idempotent-Replayed", "true");
    });
    server.start();
    httplib::Client client = server.client();
    for (int status : {200, 201, 400, 404, 422}) {
        const auto r = http::send(client, {.path = "/status/" + std::to_string(status)}, fast);
        CHECK(r.status == http::call_status::answered);
        CHECK(r.attempts == 1);
        CHECK(r.answer->status == status);
    }
    const auto replayed = http::send(client, {.path = "/status/500", .headers = {{"X-Replayed", "1"}}}, fast);
    CHECK(replayed.attempts == 1);
    CHECK(replayed.answer->status == 500);
    CHECK(calls == 6);
}

TEST_CASE("client: a business 409 is the answer; a 409 saying the first request still runs is waited out") {
    test::loopback_server server;
    std::map<std::string, int> calls;
    std::mutex mutex;
    // /conflict/NAME answers the 409 NAME describes to its first attempt, 201 to the next.
    server.server.Post(R"(/conflict/([\w-]+))", [&](const httplib::Request& req, httplib::Response& res) {
        const std::string kind = req.matches[1];
        int n = 0;
        {
            std::lock_guard lock(mutex);
            n = ++calls[kind];
        }
        if (n > 1) {
            res.status = 201;
            res.set_content("created", "text/plain");
            return;
        }
        res.status = 409;
        if (kind == "business") res.set_content(exists_problem, "application/problem+json");
        if (kind == "business-plain") res.set_content("the account exists", "text/plain");
        // The code counts only in a problem document: a JSON body of the application's own is its business.
        if (kind == "code-in-plain-json") res.set_content(in_flight_problem, "application/json");
        if (kind == "in-flight") res.set_content(in_flight_problem, "application/problem+json");
        if (kind == "in-flight-charset") res.set_content(in_flight_problem, "Application/Problem+JSON; charset=utf-8");
        if (kind == "retry-after") {
            res.set_header("Retry-After", "0");
            res.set_content("busy", "text/plain");
        }
        if (kind == "retry-after-business") {  // a server that says "later" is believed
            res.set_header("Retry-After", "0");
            res.set_content(exists_problem, "application/problem+json");
        }
        if (kind == "bad-json") res.set_content(R"({"code":"Idempotency.InFlight")", "application/problem+json");
    });
    server.start();
    httplib::Client client = server.client();

    for (const char* kind : {"business", "business-plain", "code-in-plain-json", "bad-json"}) {
        CAPTURE(kind);
        const auto r = http::send(client, {.path = std::string("/conflict/") + kind}, fast);
        CHECK(r.status == http::call_status::answered);
        CHECK(r.attempts == 1);
        REQUIRE(r.answer);
        CHECK(r.answer->status == 409);
    }
    for (const char* kind : {"in-flight", "in-flight-charset", "retry-after", "retry-after-business"}) {
        CAPTURE(kind);
        const auto r = http::send(client, {.path = std::string("/conflict/") + kind}, fast);
        CHECK(r.status == http::call_status::answered);
        CHECK(r.attempts == 2);
        REQUIRE(r.answer);
        CHECK(r.answer->status == 201);
    }
    std::lock_guard lock(mutex);
    CHECK(calls["business"] == 1);
    CHECK(calls["in-flight"] == 2);
}

TEST_CASE("client: a duplicate of a request still running in a lease-mode layer waits out its 409 to the replay") {
    auto store = std::make_shared<memory_store>();
    http::idempotency_layer layer(store);
    std::atomic<int> runs{0};
    test::loopback_server server;
    server.server.Post("/slow", http::idempotent(layer, [&](const httplib::Request&, httplib::Response& res) {
                           ++runs;
                           std::this_thread::sleep_for(800ms);
                           res.status = 201;
                           res.set_content("created once", "text/plain");
                       }));
    server.start();
    const http::outgoing_request request{.path = "/slow", .body = "{}"};
    std::optional<http::call_result> first;
    std::thread original([&] {
        httplib::Client own = server.client();
        first = http::send(own, request, fast);
    });
    while (runs == 0) std::this_thread::sleep_for(5ms);
    httplib::Client client = server.client();
    const http::call_result duplicate = http::send(client, request, fast);
    original.join();
    REQUIRE(first);
    CHECK(first->answer->status == 201);
    CHECK(duplicate.status == http::call_status::answered);
    CHECK(duplicate.attempts >= 2);  // the layer's 409 Idempotency.InFlight with Retry-After, then the replay
    REQUIRE(duplicate.answer);
    CHECK(duplicate.answer->status == 201);
    CHECK(duplicate.answer->header("Idempotent-Replayed") == "true");
    CHECK(duplicate.answer->body == "created once");
    CHECK(runs == 1);
}

TEST_CASE("client: 408, 425 and 429 are retried; a replayed 409 or 503 is the answer") {
    test::loopback_server server;
    std::map<std::string, int> calls;
    std::mutex mutex;
    server.server.Post(R"(/once/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
        const std::string status = req.matches[1];
        int n = 0;
        {
            std::lock_guard lock(mutex);
            n = ++calls[status + req.get_header_value("X-Replayed")];
        }
        res.status = n == 1 ? std::stoi(status) : 200;
        if (req.has_header("X-Replayed")) {
            res.status = std::stoi(status);
            res.set_header("Idempotent-Replayed", "true");
            res.set_content(in_flight_problem, "application/problem+json");
        }
    });
    server.start();
    httplib::Client client = server.client();
    for (int status : {408, 425, 429}) {
        CAPTURE(status);
        const auto r = http::send(client, {.path = "/once/" + std::to_string(status)}, fast);
        CHECK(r.status == http::call_status::answered);
        CHECK(r.attempts == 2);
        CHECK(r.answer->status == 200);
    }
    for (int status : {409, 503}) {
        CAPTURE(status);
        const auto r =
            http::send(client, {.path = "/once/" + std::to_string(status), .headers = {{"X-Replayed", "1"}}}, fast);
        CHECK(r.status == http::call_status::answered);
        CHECK(r.attempts == 1);
        CHECK(r.answer->status == status);
    }
}

TEST_CASE("client: Retry-After is honoured up to the cap") {
    test::loopback_server server;
    std::atomic<int> calls{0};
    server.server.Post("/held", [&](const httplib::Request& req, httplib::Response& res) {
        const int n = ++calls;
        res.status = n == 1 ? 409 : 201;
        if (n == 1) res.set_header("Retry-After", req.get_header_value("X-After"));
    });
    server.start();
    httplib::Client client = server.client();

    auto began = steady::now();
    auto r = http::send(client, {.path = "/held", .headers = {{"X-After", "1"}}}, fast);
    CHECK(r.attempts == 2);
    CHECK(steady::now() - began >= 1s);

    calls = 0;
    http::retry_policy capped = fast;
    capped.max_retry_after = 200ms;
    began = steady::now();
    r = http::send(client, {.path = "/held", .headers = {{"X-After", "3600"}}}, capped);
    CHECK(r.attempts == 2);
    CHECK(steady::now() - began < 1s);
}

TEST_CASE("client: it gives up after its budget or attempts, keeping the last answer") {
    test::loopback_server server;
    std::atomic<int> calls{0};
    server.server.Post("/down", [&](const httplib::Request&, httplib::Response& res) {
        ++calls;
        res.status = 503;
    });
    server.start();
    httplib::Client client = server.client();

    http::retry_policy short_budget = fast;
    short_budget.budget = 300ms;
    const auto began = steady::now();
    const auto r = http::send(client, {.path = "/down"}, short_budget);
    CHECK(r.status == http::call_status::gave_up);
    CHECK(steady::now() - began < 600ms);
    CHECK(r.attempts > 2);
    CHECK(r.answer->status == 503);

    calls = 0;
    http::retry_policy three = fast;
    three.max_attempts = 3;
    const auto limited = http::send(client, {.path = "/down"}, three);
    CHECK(limited.status == http::call_status::gave_up);
    CHECK(limited.attempts == 3);
    CHECK(calls == 3);

    CHECK_THROWS_AS((void)http::send(client, {.path = "/down", .key = "has space"}, fast), std::invalid_argument);
    CHECK_THROWS_AS(
        (void)http::send(client, {.path = "/down", .headers = {{"Authorization", std::string("a\0b", 3)}}}, fast),
        std::invalid_argument);
    CHECK_THROWS_AS((void)http::send(client, {.path = "/down", .headers = {{"X-A", "a\r\nX-B: b"}}}, fast),
                    std::invalid_argument);
    CHECK(calls == 3);
}

TEST_CASE("client: through a server that stops and comes back, one key, applied once") {
    // The idempotency records outlive the server, as a database does a process.
    auto store = std::make_shared<memory_store>();
    std::atomic<int> applied{0};
    attempts_log log;
    const auto serve = [&](test::loopback_server& server, int port) {
        auto layer = std::make_shared<http::idempotency_layer>(store);
        server.server.Post("/transfers",
                           http::idempotent(*layer, [&, layer](const httplib::Request& req, httplib::Response& res) {
                               log.add(req);
                               std::this_thread::sleep_for(300ms);  // longer than the client waits for its first answer
                               res.status = 201;
                               res.set_content("transfer " + std::to_string(++applied), "text/plain");
                           }));
        server.start(port);
    };
    auto first = std::make_unique<test::loopback_server>();
    serve(*first, 0);
    const int port = first->port();
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(150ms);
    client.set_connection_timeout(200ms);

    const http::outgoing_request transfer{.path = "/transfers", .body = R"({"from":"a","to":"b","amount":7})"};
    std::optional<http::call_result> r;
    std::thread caller([&] { r = http::send(client, transfer, {.first_backoff = 100ms, .budget = 20s}); });
    // The first attempt times out inside the endpoint; then the server goes away for a while.
    while (applied == 0) std::this_thread::sleep_for(5ms);
    first.reset();
    std::this_thread::sleep_for(500ms);
    test::loopback_server second;
    serve(second, port);
    caller.join();

    REQUIRE(r);
    CHECK(r->status == http::call_status::answered);
    REQUIRE(r->answer);
    CHECK(r->answer->status == 201);
    CHECK(r->answer->body == "transfer 1");
    CHECK(r->answer->header("Idempotent-Replayed") == "true");
    CHECK(applied == 1);
    CHECK(r->attempts >= 3);
    CHECK(log.all_equal(transfer.key, transfer.body));
}

TEST_CASE("client: the example of docs/http.md") {
    test::loopback_server server;
    server.server.Post("/transfers", [](const httplib::Request& req, httplib::Response& res) {
        res.status = req.get_header_value("Authorization") == "Bearer c1" ? 201 : 401;
        res.set_content(req.body, "application/json");
    });
    server.start();
    const int port = server.port();
    int status = 0;
    std::string body;
    const auto use = [&](int s, const std::string& b) { status = s, body = b; };

    httplib::Client api("127.0.0.1", port);
    api.set_read_timeout(std::chrono::seconds(5));
    const idem::http::outgoing_request transfer{.path = "/transfers",
                                                .body = R"({"from":"alice","to":"bob","amount":500})",
                                                .headers = {{"Authorization", "Bearer c1"}}};
    const idem::http::call_result r = idem::http::send(api, transfer, {.budget = std::chrono::seconds(90)});
    if (r.status == idem::http::call_status::gave_up) throw std::runtime_error("payments unreachable: " + r.error);
    use(r.answer->status, r.answer->body);  // the one true answer, perhaps a replay

    CHECK(status == 201);
    CHECK(body == transfer.body);
}
