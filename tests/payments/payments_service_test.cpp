// The payments example as a real service: started as a child process, driven
// over loopback HTTP, on SQLite or (built with IDEM_PAYMENTS_POSTGRESQL) on PostgreSQL.
#include <doctest/doctest.h>

#include <httplib.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "idem/webhook.hpp"
#include "payments_service.hpp"

using namespace std::chrono_literals;
using idem::test::payments_service;

TEST_CASE("payments: 50 concurrent identical transfers move the money exactly once") {
    payments_service svc({.processing_delay_ms = 200});
    const std::string suffix = std::to_string(std::rand());
    const std::string alice = "alice-" + suffix, bob = "bob-" + suffix;
    svc.open(alice, 100000);
    svc.open(bob, 0);
    const std::string body = "{\"from\":\"" + alice + "\",\"to\":\"" + bob + "\",\"amount\":1234}";

    constexpr int clients = 50;
    std::barrier start(clients);
    std::mutex mutex;
    std::map<int, int> statuses;
    std::map<std::string, int> bodies;
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < clients; ++i) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                // A client whose connection failed cannot know whether the transfer ran: it
                // retries with the same key, which is what the key is for. (The server's
                // listen backlog is small, so some of 50 simultaneous connections fail.)
                auto r = svc.post("/transfers", body, {{"Idempotency-Key", "same-" + suffix}});
                for (int attempt = 1; attempt < 50 && !r; ++attempt) {
                    std::this_thread::sleep_for(20ms);
                    r = svc.post("/transfers", body, {{"Idempotency-Key", "same-" + suffix}});
                }
                std::lock_guard lock(mutex);
                ++statuses[r ? r->status : -1];
                if (r && r->status == 201) ++bodies[r->body];
            });
        }
    }
    for (const auto& [status, n] : statuses) MESSAGE("status " << status << ": " << n);
    CHECK(statuses[201] + statuses[409] == clients);
    CHECK(statuses[201] >= 1);
    CHECK(bodies.size() == 1);  // every 201 carries the same transfer
    CHECK(svc.balance(alice) == 100000 - 1234);
    CHECK(svc.balance(bob) == 1234);

    // Everyone who got 409 retries after Retry-After: replayed, still once.
    auto retry = svc.post("/transfers", body, {{"Idempotency-Key", "same-" + suffix}});
    CHECK(retry->status == 201);
    CHECK(retry->get_header_value("Idempotent-Replayed") == "true");
    CHECK(svc.balance(alice) == 100000 - 1234);
}

TEST_CASE("payments: a reused key with another body is 422; insufficient funds is final and replayed") {
    payments_service svc;
    const std::string suffix = std::to_string(std::rand());
    const std::string a = "a-" + suffix, b = "b-" + suffix;
    svc.open(a, 1000);
    svc.open(b, 0);
    const auto transfer = [&](const std::string& key, long long amount) {
        return svc.post("/transfers",
                        "{\"from\":\"" + a + "\",\"to\":\"" + b + "\",\"amount\":" + std::to_string(amount) + "}",
                        {{"Idempotency-Key", key}});
    };
    CHECK(transfer("k1", 400)->status == 201);
    CHECK(transfer("k1", 500)->status == 422);
    CHECK(transfer("k2", 5000)->status == 422);  // insufficient funds
    auto again = transfer("k2", 5000);
    CHECK(again->status == 422);
    CHECK(again->get_header_value("Idempotent-Replayed") == "true");
    CHECK(svc.balance(a) == 600);
    CHECK(svc.balance(b) == 400);
    CHECK(svc.post("/transfers", "{}", {})->status == 400);  // no key: Idempotency.KeyMissing
}

TEST_CASE("payments: a forged or missing webhook signature is refused and never claims the event id") {
    payments_service svc;
    const std::string suffix = std::to_string(std::rand());
    const std::string acct = "w-" + suffix;
    svc.open(acct, 0);
    const std::string event = "{\"id\":\"evt-" + suffix + "\",\"account\":\"" + acct + "\",\"amount\":700}";
    auto c = svc.client();
    CHECK(c.Post("/webhooks/provider", {{"X-Signature", std::string(64, '0')}}, event, "application/json")->status ==
          401);
    CHECK(c.Post("/webhooks/provider", {}, event, "application/json")->status == 401);
    CHECK(c.Post("/webhooks/provider", {{"X-Signature", idem::webhook::hmac_sha256_hex("wrong", event)}}, event,
                 "application/json")
              ->status == 401);
    CHECK(svc.balance(acct) == 0);

    // The real delivery still applies: the forged ones claimed nothing.
    const httplib::Headers signed_headers{{"X-Signature", idem::webhook::hmac_sha256_hex(svc.secret, event)}};
    auto first = c.Post("/webhooks/provider", signed_headers, event, "application/json");
    CHECK(first->status == 200);
    CHECK(first->get_header_value("Idempotent-Replayed") == "false");
    CHECK(svc.balance(acct) == 700);
}

TEST_CASE("payments: a redelivered webhook is applied once, even when deliveries race") {
    payments_service svc;
    const std::string suffix = std::to_string(std::rand());
    const std::string acct = "r-" + suffix;
    svc.open(acct, 0);
    const std::string event = "{\"id\":\"evt-r-" + suffix + "\",\"account\":\"" + acct + "\",\"amount\":300}";
    const httplib::Headers h{{"X-Signature", idem::webhook::hmac_sha256_hex(svc.secret, event)}};
    std::atomic<int> applied{0}, replayed{0};
    {
        std::barrier start(10);
        std::vector<std::jthread> threads;
        for (int i = 0; i < 10; ++i) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                auto r = svc.client().Post("/webhooks/provider", h, event, "application/json");
                if (r && r->status == 200)
                    ++(r->get_header_value("Idempotent-Replayed") == "true" ? replayed : applied);
            });
        }
    }
    CHECK(applied == 1);
    CHECK(replayed == 9);
    CHECK(svc.balance(acct) == 300);
}
