// The Idempotency-Key layer over real HTTP on loopback, its records in a real
// SQL store (a SQLite file and, when built, a throwaway PostgreSQL): the
// reconciliation route, HTTP settings per layer and per profile on one
// executor, and lease mode's release of a 5xx.
#include <doctest/doctest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <future>
#include <string>

#include "bank_places.hpp"
#include "idem/http/httplib.hpp"
#include "idem/http/problem.hpp"
#include "loopback_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test;
namespace http = idem::http;
using json = nlohmann::json;

// The caller is the client named in X-Client (none without it).
const http::httplib_options by_client{.claims_of = [](const httplib::Request& req) {
    idem::claims c;
    if (req.has_header("X-Client")) c.emplace("client_id", req.get_header_value("X-Client"));
    return c;
}};

httplib::Headers as(const std::string& client, const std::string& key = {},
                    const std::string& key_header = "Idempotency-Key") {
    httplib::Headers h;
    if (!client.empty()) h.emplace("X-Client", client);
    if (!key.empty()) h.emplace(key_header, key);
    return h;
}

// What the reconciliation route answered: its status and JSON body (null when not JSON).
struct looked_up {
    int status = 0;
    json body;
    std::string content_type;
    std::string cache_control;
    std::string retry_after;
};

looked_up reconcile(const loopback_server& server, const httplib::Headers& headers,
                    const std::string& path = "/idempotency") {
    httplib::Client client = server.client();
    const auto res = client.Get(path, headers);
    REQUIRE(res);
    return {res->status, json::parse(res->body, nullptr, false), res->get_header_value("Content-Type"),
            res->get_header_value("Cache-Control"), res->get_header_value("Retry-After")};
}

httplib::Result post(const loopback_server& server, const std::string& path, const httplib::Headers& headers,
                     const std::string& body = R"({"amount":10})") {
    httplib::Client client = server.client();
    return client.Post(path, headers, body, "application/json");
}

std::string problem_code(const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    return j.is_object() && j.contains("code") ? j["code"].get<std::string>() : std::string();
}

}  // namespace

TEST_CASE("HTTP reconciliation: absent, then completed with the stored status; another client's key is absent") {
    on_every_bank([&](idem::database& db) {
        http::idempotency_layer layer(db.executor(),
                                      {.resolver = idem::scopes::client(), .reconcile_path = "/idempotency"});
        std::atomic<int> runs{0};
        loopback_server server;
        server.server.Post("/transfers",
                           http::idempotent(
                               layer, db,
                               [&](idem::unit_of_work& uow, const httplib::Request&, httplib::Response& res) {
                                   move(uow, 10);
                                   res.status = 201;
                                   res.set_header("Location", "/transfers/" + std::to_string(++runs));
                                   res.set_content(R"({"id":"t1"})", "application/json");
                               },
                               by_client));
        http::serve_reconciliation(server.server, layer, by_client);
        server.start();

        const looked_up before = reconcile(server, as("c1", "k-1"));
        CHECK(before.status == 200);
        CHECK(before.body == json{{"state", "absent"}});
        CHECK(before.content_type == "application/json");
        CHECK(before.cache_control == "no-store");

        REQUIRE(post(server, "/transfers", as("c1", "k-1"))->status == 201);
        const looked_up after = reconcile(server, as("c1", "k-1"));
        CHECK(after.status == 200);
        CHECK(after.body["state"] == "completed");
        CHECK(after.body["status"] == 201);
        CHECK(after.body["expires_in"].get<long long>() > 23 * 3600);  // the 24 h retention
        CHECK(after.body["expires_in"].get<long long>() <= 24 * 3600);
        CHECK_FALSE(after.body.contains("body"));  // reconcile_body is off
        CHECK_FALSE(after.body.contains("headers"));
        // The sf-string form is the same key.
        CHECK(reconcile(server, as("c1", "\"k-1\"")).body["state"] == "completed");

        // Another client asking for c1's key: absent, as if it never was (no 403 telling it exists).
        const looked_up other = reconcile(server, as("c2", "k-1"));
        CHECK(other.status == 200);
        CHECK(other.body == json{{"state", "absent"}});
        CHECK(reconcile(server, as("c1", "k-2")).body == json{{"state", "absent"}});

        // The layer's typed errors for bad input, whatever require_key says.
        const looked_up no_key = reconcile(server, as("c1"));
        CHECK(no_key.status == 400);
        CHECK(no_key.body["code"] == "Idempotency.KeyMissing");
        httplib::Headers two_keys = as("c1", "k-1");
        two_keys.emplace("Idempotency-Key", "k-2");
        const looked_up several = reconcile(server, two_keys);
        CHECK(several.status == 400);
        CHECK(several.body["code"] == "Idempotency.KeyInvalid");
        CHECK(reconcile(server, as("c1", "(a b)")).body["code"] == "Idempotency.KeyInvalid");
        const looked_up unscoped = reconcile(server, as("", "k-1"));
        CHECK(unscoped.status == 400);
        CHECK(unscoped.body["code"] == "Idempotency.ScopeRequired");

        // Reading changed nothing: the retry still replays the one run.
        const auto retry = post(server, "/transfers", as("c1", "k-1"));
        CHECK(retry->status == 201);
        CHECK(retry->get_header_value("Idempotent-Replayed") == "true");
        CHECK(runs == 1);
        CHECK(balance(db, "bob") == 10);
    });
}

TEST_CASE("HTTP reconciliation: a request still running is in flight; reconcile_body returns the stored response") {
    on_every_bank([&](idem::database& db) {
        http::idempotency_layer layer(db.executor(), {.resolver = idem::scopes::client(),
                                                      .replayed_headers = {"Content-Type", "Location"},
                                                      .reconcile_path = "/v1.0/keys",
                                                      .reconcile_body = true});
        std::promise<void> entered;
        std::promise<void> let_go;
        std::shared_future<void> released = let_go.get_future().share();
        loopback_server server;
        // Lease mode: the record is written before the endpoint runs, on the store's own connection.
        server.server.Post("/payouts", http::idempotent(
                                           layer,
                                           [&](const httplib::Request& req, httplib::Response& res) {
                                               if (req.get_header_value("X-Hold") == "1") {
                                                   entered.set_value();
                                                   released.wait();
                                               }
                                               res.status = 202;
                                               res.set_header("Location", "/payouts/p1");
                                               res.set_header("X-Debug", "not stored");
                                               if (req.get_header_value("X-Binary") == "1")
                                                   res.set_content(std::string("\xff\x00\x01", 3),
                                                                   "application/octet-stream");
                                               else
                                                   res.set_content(R"({"payout":"p1"})", "application/json");
                                           },
                                           by_client));
        http::serve_reconciliation(server.server, layer, by_client);
        server.start();

        httplib::Headers held = as("c1", "k-held");
        held.emplace("X-Hold", "1");
        auto first = std::async(std::launch::async, [&] { return post(server, "/payouts", held); });
        entered.get_future().wait();
        const looked_up running = reconcile(server, as("c1", "k-held"), "/v1.0/keys");
        CHECK(running.status == 200);
        CHECK(running.body["state"] == "in_flight");
        CHECK(running.body["expires_in"].get<long long>() > 0);
        CHECK(running.body["expires_in"].get<long long>() <= 60);  // the 1 min lease
        CHECK(running.retry_after == "1");
        CHECK(reconcile(server, as("c2", "k-held"), "/v1.0/keys").body == json{{"state", "absent"}});
        // The path is matched as written, not as a pattern ("." is no wildcard).
        httplib::Client client = server.client();
        CHECK(client.Get("/v1x0/keys", as("c1", "k-held"))->status == 404);
        let_go.set_value();
        REQUIRE(first.get()->status == 202);

        const looked_up done = reconcile(server, as("c1", "k-held"), "/v1.0/keys");
        CHECK(done.body["state"] == "completed");
        CHECK(done.body["status"] == 202);
        CHECK(done.body["body"] == R"({"payout":"p1"})");
        CHECK(done.body["headers"] ==
              json::array({json::array({"Content-Type", "application/json"}),
                           json::array({"Location", "/payouts/p1"})}));  // the allow-listed ones only

        httplib::Headers binary = as("c1", "k-binary");
        binary.emplace("X-Binary", "1");
        REQUIRE(post(server, "/payouts", binary)->status == 202);
        const looked_up bytes = reconcile(server, as("c1", "k-binary"), "/v1.0/keys");
        CHECK(bytes.body["state"] == "completed");
        CHECK_FALSE(bytes.body.contains("body"));
        CHECK(bytes.body["body_base64url"] == "_wAB");  // 0xff 0x00 0x01
    });
}

TEST_CASE("HTTP settings per layer and per profile: layers on one executor differ; the global form still holds") {
    idem::executor_options live;  // global http: the defaults (no key required, unscoped rejected)
    live.profiles["webhooks"] = {.http = {.require_key = true}};
    on_every_bank({.executor = live}, [&](idem::database& db) {
        // Its own header name, unscoped callers bypass, and one more header replayed.
        http::idempotency_layer payments(
            db.executor(), {.resolver = idem::scopes::client(),
                            .name_space = "payments",
                            .replayed_headers = {"Content-Type", "X-Trace"},
                            .http = {.header_name = "X-Payment-Key", .unscoped = idem::unscoped_behavior::bypass}});
        // require_key from its profile, the rest global.
        http::idempotency_layer webhooks(
            db.executor(), {.resolver = idem::scopes::client(), .name_space = "hooks", .profile = "webhooks"});
        // The old form: the executor's settings alone.
        http::idempotency_layer plain(db.executor(), {.resolver = idem::scopes::client(), .name_space = "plain"});

        std::atomic<int> runs{0};
        const auto endpoint = [&](idem::unit_of_work&, const httplib::Request&, httplib::Response& res) {
            res.status = 201;
            res.set_header("X-Trace", "trace-" + std::to_string(++runs));
            res.set_content("run " + std::to_string(runs.load()), "text/plain");
        };
        loopback_server server;
        server.server.Post("/payments", http::idempotent(payments, db, endpoint, by_client));
        server.server.Post("/webhooks", http::idempotent(webhooks, db, endpoint, by_client));
        server.server.Post("/plain", http::idempotent(plain, db, endpoint, by_client));
        server.start();

        CHECK(payments.settings().http.header_name == "X-Payment-Key");
        CHECK_FALSE(payments.settings().http.require_key);
        CHECK(webhooks.settings().http.require_key);
        CHECK(webhooks.settings().http.header_name == "Idempotency-Key");
        CHECK(plain.settings().http.unscoped == idem::unscoped_behavior::reject);

        // No key: only the webhooks layer requires one.
        CHECK(post(server, "/payments", as("c1"))->status == 201);
        CHECK(post(server, "/plain", as("c1"))->status == 201);
        const auto missing = post(server, "/webhooks", as("c1"));
        CHECK(missing->status == 400);
        CHECK(problem_code(missing->body) == "Idempotency.KeyMissing");
        CHECK(runs == 2);

        // A key but no caller: the payments layer bypasses, the others refuse.
        runs = 0;
        CHECK(post(server, "/payments", as("", "k-1", "X-Payment-Key"))->status == 201);
        CHECK(post(server, "/payments", as("", "k-1", "X-Payment-Key"))->status == 201);
        CHECK(runs == 2);  // no idempotency without a scope: both ran
        for (const std::string path : {"/webhooks", "/plain"}) {
            const auto refused = post(server, path, as("", "k-1"));
            CHECK(refused->status == 400);
            CHECK(problem_code(refused->body) == "Idempotency.ScopeRequired");
        }
        CHECK(runs == 2);

        // The payments layer reads its own header (Idempotency-Key means nothing to it) and
        // replays the headers it lists; the webhooks layer replays its default list.
        runs = 0;
        REQUIRE(post(server, "/payments", as("c1", "k-2", "X-Payment-Key"))->status == 201);
        const auto paid_again = post(server, "/payments", as("c1", "k-2", "X-Payment-Key"));
        CHECK(paid_again->get_header_value("Idempotent-Replayed") == "true");
        CHECK(paid_again->get_header_value("X-Trace") == "trace-1");
        CHECK(post(server, "/payments", as("c1", "k-2"))->get_header_value("Idempotent-Replayed").empty());
        REQUIRE(post(server, "/webhooks", as("c1", "k-2"))->status == 201);
        const auto hooked_again = post(server, "/webhooks", as("c1", "k-2"));
        CHECK(hooked_again->get_header_value("Idempotent-Replayed") == "true");
        CHECK_FALSE(hooked_again->has_header("X-Trace"));
        CHECK(runs == 3);

        // What neither the layer nor its profile sets stays live: a replace() that requires a
        // key globally reaches `plain` and `payments` (which set other fields), not the
        // webhooks layer, whose profile now says no.
        idem::executor_options next = *db.executor().options().current();
        next.profiles["webhooks"].http.require_key = false;
        next.http.require_key = true;
        db.executor().options().replace(next);
        CHECK(post(server, "/webhooks", as("c1"))->status == 201);
        CHECK(problem_code(post(server, "/plain", as("c1"))->body) == "Idempotency.KeyMissing");
        CHECK(problem_code(post(server, "/payments", as("c1"))->body) == "Idempotency.KeyMissing");
        CHECK(payments.settings().http.header_name == "X-Payment-Key");  // its own, still

        // An invalid setting of a layer is refused when it is built, with every problem named.
        try {
            http::idempotency_layer bad(db.executor(),
                                        {.http = {.header_name = "Bad Header"}, .reconcile_path = "idempotency"});
            FAIL("an invalid layer was built");
        } catch (const idem::options_error& e) {
            REQUIRE(e.problems().size() == 2);
            CHECK(e.problems()[0] == "http.header_name must be a non-empty HTTP token");
            CHECK(e.problems()[1] == "reconcile_path must be empty or start with /");
        }
    });
}

TEST_CASE("HTTP lease mode: release_server_errors frees the key after a 5xx; without it the 5xx is replayed") {
    on_every_bank([&](idem::database& db) {
        http::idempotency_layer keeping(
            db.executor(),
            {.resolver = idem::scopes::client(), .name_space = "keeping", .reconcile_path = "/keeping/idempotency"});
        http::idempotency_layer releasing(db.executor(), {.resolver = idem::scopes::client(),
                                                          .name_space = "releasing",
                                                          .release_server_errors = true,
                                                          .reconcile_path = "/releasing/idempotency"});
        std::atomic<int> runs{0};
        // Answers the status in X-Status.
        const auto endpoint = [&](const httplib::Request& req, httplib::Response& res) {
            res.status = std::stoi(req.get_header_value("X-Status"));
            res.set_content("run " + std::to_string(++runs), "text/plain");
        };
        loopback_server server;
        server.server.Post("/keeping", http::idempotent(keeping, endpoint, by_client));
        server.server.Post("/releasing", http::idempotent(releasing, endpoint, by_client));
        http::serve_reconciliation(server.server, keeping, by_client);
        http::serve_reconciliation(server.server, releasing, by_client);
        server.start();
        const auto with_status = [](int status, const std::string& key) {
            httplib::Headers h = as("c1", key);
            h.emplace("X-Status", std::to_string(status));
            return h;
        };

        {
            // A 500, by default: the 500 is kept for failure_retention and replayed.
            REQUIRE(post(server, "/keeping", with_status(500, "k-1"))->status == 500);
            const auto replayed = post(server, "/keeping", with_status(201, "k-1"));
            CHECK(replayed->status == 500);
            CHECK(replayed->body == "run 1");
            CHECK(replayed->get_header_value("Idempotent-Replayed") == "true");
            const looked_up kept = reconcile(server, as("c1", "k-1"), "/keeping/idempotency");
            CHECK(kept.body["state"] == "completed");
            CHECK(kept.body["status"] == 500);
            CHECK(kept.body["expires_in"].get<long long>() <= 600);  // failure_retention, 10 min
            CHECK(runs == 1);

            // With the option: nothing is kept, and the retry runs again.
            REQUIRE(post(server, "/releasing", with_status(500, "k-1"))->status == 500);
            CHECK(reconcile(server, as("c1", "k-1"), "/releasing/idempotency").body == json{{"state", "absent"}});
            const auto ran_again = post(server, "/releasing", with_status(201, "k-1"));
            CHECK(ran_again->status == 201);
            CHECK(ran_again->body == "run 3");
            CHECK(ran_again->get_header_value("Idempotent-Replayed").empty());
            CHECK(runs == 3);
            // What succeeded is kept as ever.
            const auto replay = post(server, "/releasing", with_status(201, "k-1"));
            CHECK(replay->get_header_value("Idempotent-Replayed") == "true");
            CHECK(runs == 3);
        }
        {
            // A 503 keeps its key in flight with the option too: its effects are unknown.
            REQUIRE(post(server, "/releasing", with_status(503, "k-2"))->status == 503);
            const auto retry = post(server, "/releasing", with_status(201, "k-2"));
            CHECK(retry->status == 409);
            CHECK(problem_code(retry->body) == "Idempotency.InFlight");
            CHECK(reconcile(server, as("c1", "k-2"), "/releasing/idempotency").body["state"] == "in_flight");
            CHECK(runs == 4);
        }
    });
}
