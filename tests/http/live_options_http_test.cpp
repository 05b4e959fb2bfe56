// One options source drives executor, inbox and HTTP layer: replace() switches them
// together, with no restart, and every request answers in the mode it began in.
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "idem/inbox.hpp"
#include "idem/memory_store.hpp"
#include "loopback_server.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

thread_local std::string current_request;  // set by the server thread serving a request

// The decision each request was answered under, found by the request id the server thread serves.
class decisions_by_request final : public telemetry_sink {
public:
    void on_decision(const decision& d) noexcept override {
        std::lock_guard lock(mutex_);
        if (!current_request.empty()) seen_[current_request].push_back({d.mode, d.outcome});
    }
    std::vector<std::pair<mode, outcome>> of(const std::string& request) const {
        std::lock_guard lock(mutex_);
        auto it = seen_.find(request);
        return it == seen_.end() ? std::vector<std::pair<mode, outcome>>{} : it->second;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::vector<std::pair<mode, outcome>>> seen_;
};

struct shared_options_service {
    std::shared_ptr<options_source> source = std::make_shared<options_source>(executor_options{.mode = mode::off});
    std::shared_ptr<decisions_by_request> decisions = std::make_shared<decisions_by_request>();
    executor exec{{{"", std::make_shared<memory_store>()}}, source, decisions};
    http::idempotency_layer layer{exec, {.resolver = scopes::user()}};
    inbox box{exec};
    test::loopback_server http;
    std::mutex mutex;
    std::set<std::string> ran;  // request ids whose endpoint ran

    shared_options_service() {
        auto endpoint =
            http::idempotent(layer,
                             [this](const httplib::Request& req, httplib::Response& res) {
                                 {
                                     std::lock_guard lock(mutex);
                                     ran.insert(req.get_header_value("X-Request-Id"));
                                 }
                                 res.status = 201;
                                 res.set_content("ran " + req.get_header_value("X-Request-Id"), "text/plain");
                             },
                             {.claims_of = [](const httplib::Request&) {
                                 return claims{{"sub", "alice"}};
                             }});
        http.server.Post("/t", [endpoint](const httplib::Request& req, httplib::Response& res) {
            current_request = req.get_header_value("X-Request-Id");
            endpoint(req, res);
            current_request.clear();
        });
        http.start();
    }
    bool endpoint_ran(const std::string& id) {
        std::lock_guard lock(mutex);
        return ran.contains(id);
    }
    void set_mode(mode m) {
        executor_options o = *source->current();
        o.mode = m;
        source->replace(o);
    }
};

using clock_type = std::chrono::steady_clock;

struct sent {
    std::string id;
    std::string body;
    clock_type::time_point began, ended;
    int status;
    bool replayed;
    std::string response_body;
};

}  // namespace

TEST_CASE("live options: 8 threads of HTTP while the mode flips 50 times; each answer fits the mode it began in") {
    shared_options_service s;
    // Mode i was in force from flips[i].first (before its replace()) until flips[i+1].second (after the next).
    std::vector<std::tuple<clock_type::time_point, clock_type::time_point, mode>> flips;
    flips.emplace_back(clock_type::now(), clock_type::now(), mode::off);
    std::atomic<bool> flipping{true};
    std::vector<std::vector<sent>> per_thread(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            httplib::Client client = s.http.client();
            for (int i = 0; flipping; ++i) {
                const std::string key = "k-" + std::to_string(t) + "-" + std::to_string(i);
                // A first request, its retry, and the key reused for other content.
                for (const std::string& body : {std::string("same"), std::string("same"), std::string("other")}) {
                    sent r{key + "-" + std::to_string(per_thread[t].size()), body, clock_type::now(), {}, 0, false, {}};
                    auto res =
                        client.Post("/t", {{"Idempotency-Key", key}, {"X-Request-Id", r.id}}, body, "text/plain");
                    r.ended = clock_type::now();
                    CHECK(res);
                    if (!res) return;
                    r.status = res->status;
                    r.replayed = res->get_header_value("Idempotent-Replayed") == "true";
                    r.response_body = res->body;
                    per_thread[t].push_back(std::move(r));
                }
            }
        });
    }
    const mode cycle[] = {mode::observe, mode::enforce, mode::off, mode::enforce, mode::observe};
    for (int flip = 0; flip < 50; ++flip) {
        std::this_thread::sleep_for(15ms);
        const mode next = cycle[flip % 5];
        const auto before = clock_type::now();
        s.set_mode(next);
        flips.emplace_back(before, clock_type::now(), next);
    }
    std::this_thread::sleep_for(15ms);
    flipping = false;
    for (auto& t : threads) t.join();

    const auto modes_during = [&](clock_type::time_point began, clock_type::time_point ended) {
        std::set<mode> modes;
        for (std::size_t i = 0; i < flips.size(); ++i) {
            const auto from = std::get<0>(flips[i]);
            const auto until = i + 1 < flips.size() ? std::get<1>(flips[i + 1]) : clock_type::time_point::max();
            if (from <= ended && began <= until) modes.insert(std::get<2>(flips[i]));
        }
        return modes;
    };
    std::map<mode, int> answered_in;
    int replays = 0, reused = 0, checked = 0;
    for (const auto& requests : per_thread) {
        for (const sent& r : requests) {
            CAPTURE(r.id);
            const auto decided = s.decisions->of(r.id);
            REQUIRE(decided.size() <= 1);  // one decision per keyed request; none in Off
            const mode m = decided.empty() ? mode::off : decided.front().first;
            CHECK(modes_during(r.began, r.ended).contains(m));
            ++answered_in[m];
            ++checked;
            const bool ran = s.endpoint_ran(r.id);
            if (m != mode::enforce) {
                // Off and Observe: the endpoint ran and the client saw exactly its answer.
                CHECK(ran);
                CHECK(r.status == 201);
                CHECK_FALSE(r.replayed);
                CHECK(r.response_body == "ran " + r.id);
                continue;
            }
            switch (decided.front().second) {
                case outcome::executed:
                    CHECK(ran);
                    CHECK(r.status == 201);
                    CHECK_FALSE(r.replayed);
                    break;
                case outcome::replay:
                    ++replays;
                    CHECK_FALSE(ran);
                    CHECK(r.status == 201);
                    CHECK(r.replayed);
                    CHECK(r.body == "same");
                    break;
                case outcome::key_reused:
                    ++reused;
                    CHECK_FALSE(ran);
                    CHECK(r.status == 422);
                    CHECK(r.body == "other");
                    break;
                default: FAIL("an unexpected decision in enforce: ", to_string(decided.front().second));
            }
        }
    }
    MESSAGE(checked, " requests: ", answered_in[mode::off], " off, ", answered_in[mode::observe], " observe, ",
            answered_in[mode::enforce], " enforce (", replays, " replays, ", reused, " 422)");
    CHECK(answered_in[mode::off] > 0);
    CHECK(answered_in[mode::observe] > 0);
    CHECK(answered_in[mode::enforce] > 0);
    CHECK(replays > 0);
    CHECK(reused > 0);
}

TEST_CASE("live options: one replace() moves executor, inbox and HTTP layer from Observe to Enforce") {
    shared_options_service s;
    s.set_mode(mode::observe);
    httplib::Client client = s.http.client();
    int handled = 0;
    const auto post = [&](const std::string& id) {
        return client.Post("/t", {{"Idempotency-Key", "k"}, {"X-Request-Id", id}}, "x", "text/plain");
    };
    CHECK(post("r1")->status == 201);
    CHECK(s.box.process("billing", "m-1", scope::global(), [&] { ++handled; }) == execution_status::executed);
    CHECK(s.exec.resolve_mode() == mode::observe);
    // Observe: duplicates run.
    CHECK_FALSE(post("r2")->has_header("Idempotent-Replayed"));
    CHECK(s.box.process("billing", "m-1", scope::global(), [&] { ++handled; }) == execution_status::executed);
    CHECK(handled == 2);

    s.set_mode(mode::enforce);
    CHECK(s.exec.resolve_mode() == mode::enforce);
    CHECK(post("r3")->get_header_value("Idempotent-Replayed") == "true");
    CHECK_FALSE(s.endpoint_ran("r3"));
    CHECK(s.box.process("billing", "m-1", scope::global(), [&] { ++handled; }) == execution_status::replayed);
    CHECK(handled == 2);
}

TEST_CASE("live options: the header name and the unscoped policy are read per request") {
    shared_options_service s;
    executor_options o;
    o.http.header_name = "X-Request-Key";
    s.source->replace(o);
    httplib::Client client = s.http.client();
    CHECK(client.Post("/t", {{"X-Request-Key", "k"}, {"X-Request-Id", "a"}}, "x", "text/plain")->status == 201);
    auto again = client.Post("/t", {{"X-Request-Key", "k"}, {"X-Request-Id", "b"}}, "x", "text/plain");
    CHECK(again->get_header_value("Idempotent-Replayed") == "true");
    // The old header name is just another header now.
    CHECK_FALSE(client.Post("/t", {{"Idempotency-Key", "k"}, {"X-Request-Id", "c"}}, "x", "text/plain")
                    ->has_header("Idempotent-Replayed"));
    CHECK(s.endpoint_ran("c"));

    // Unscoped: a layer whose resolver finds nobody rejects, then lets through after replace().
    http::idempotency_layer anonymous(s.exec, {.resolver = scopes::user()});
    http::request req{.method = "POST", .target = "/t", .body = "x", .key_headers = {"k"}};
    CHECK(anonymous.handle(req, [] { return http::response{.status = 201}; }).status == 400);
    o.http.unscoped = unscoped_behavior::bypass;
    s.source->replace(o);
    CHECK(anonymous.handle(req, [] { return http::response{.status = 201}; }).status == 201);
}

TEST_CASE("live options: an invalid header name is named by the options check") {
    executor_options o;
    o.http.header_name = "Bad Header";
    CHECK(o.problems() == std::vector<std::string>{"http.header_name must be a non-empty HTTP token"});
    CHECK_THROWS_AS(http::idempotency_layer(std::make_shared<memory_store>(), {.http = {.header_name = ""}}),
                    options_error);
}
