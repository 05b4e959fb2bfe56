// The payments example as a real service: started as a child process, driven
// over loopback HTTP, on SQLite or (built with IDEM_PAYMENTS_POSTGRESQL or
// IDEM_PAYMENTS_MARIADB) on PostgreSQL or MariaDB.
#include <doctest/doctest.h>

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "idem/webhook.hpp"
#include "payments_service.hpp"

using namespace std::chrono_literals;
using idem::test::payments_service;

namespace {

std::string unique(const std::string& prefix) {
    return prefix + std::to_string(std::rand());
}

}  // namespace

TEST_CASE("payments: 50 concurrent identical transfers move the money once; the duplicates get its replay") {
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
    int replayed = 0;
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < clients; ++i) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                // A client whose connection failed cannot know whether the transfer ran: it
                // retries with the same key, which is what the key is for.
                auto r = svc.post("/transfers", body, {{"Idempotency-Key", "same-" + suffix}});
                for (int attempt = 1; attempt < 50 && !r; ++attempt) {
                    std::this_thread::sleep_for(20ms);
                    r = svc.post("/transfers", body, {{"Idempotency-Key", "same-" + suffix}});
                }
                std::lock_guard lock(mutex);
                ++statuses[r ? r->status : -1];
                if (r && r->status == 201) ++bodies[r->body];
                if (r && r->get_header_value("Idempotent-Replayed") == "true") ++replayed;
            });
        }
    }
    for (const auto& [status, n] : statuses) MESSAGE("status " << status << ": " << n);
    // Each duplicate waited for the first transaction and got its answer: no 409.
    CHECK(statuses[201] == clients);
    CHECK(replayed == clients - 1);
    CHECK(bodies.size() == 1);  // every 201 carries the same transfer
    CHECK(svc.balance(alice) == 100000 - 1234);
    CHECK(svc.balance(bob) == 1234);
}

TEST_CASE("payments: one idem record and one transfer row per transfer, one record per webhook event") {
    payments_service svc;
    const std::string a = unique("a-"), b = unique("b-");
    svc.open(a, 100000);
    svc.open(b, 0);
    const long long http_before = svc.records("http");
    const long long rows_before = svc.count("SELECT COUNT(*) FROM transfers");
    for (int i = 0; i < 5; ++i) {
        const std::string key = unique("rows-");
        for (int retry = 0; retry < 2; ++retry)
            CHECK(svc.post("/transfers", svc.transfer_body(a, b, 10), {{"Idempotency-Key", key}})->status == 201);
    }
    CHECK(svc.records("http") == http_before + 5);
    CHECK(svc.count("SELECT COUNT(*) FROM transfers") == rows_before + 5);
    CHECK(svc.records("payments.transfer") == 0);  // no second record inside the first

    const long long events_before = svc.records("webhook:provider");
    const std::string event = svc.deposit_event(unique("evt-rows-"), b, 7);
    for (int redelivery = 0; redelivery < 3; ++redelivery) CHECK(svc.deliver(event)->status == 200);
    CHECK(svc.records("webhook:provider") == events_before + 1);
    CHECK(svc.balance(b) == 57);
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

TEST_CASE("payments: a refused transfer leaves nothing behind, whichever account it wrote first") {
    payments_service svc;
    // Rows are locked in id order, so with "z" paying "a" the credit is written before
    // the debit finds the funds short: the refusal must roll the credit back.
    const std::string poor = "z-" + unique(""), rich = "a-" + unique("");
    svc.open(poor, 10);
    svc.open(rich, 0);
    auto r = svc.post("/transfers", svc.transfer_body(poor, rich, 11), {{"Idempotency-Key", unique("short-")}});
    CHECK(r->status == 422);
    CHECK(svc.balance(poor) == 10);
    CHECK(svc.balance(rich) == 0);
}

TEST_CASE("payments: a body that is not JSON is 415 on every write route, before idempotency is involved") {
    payments_service svc;
    const std::string a = unique("a-"), b = unique("b-");
    svc.open(a, 1000);
    svc.open(b, 0);
    const std::string key = unique("type-"), body = svc.transfer_body(a, b, 10);
    httplib::Headers h{{"Idempotency-Key", key}, {"Authorization", "Bearer test-client"}};
    for (const char* path : {"/transfers", "/accounts", "/webhooks/provider"}) {
        CAPTURE(path);
        auto r = svc.client().Post(path, h, body, "text/plain");
        REQUIRE(r);
        CHECK(r->status == 415);
        CHECK(r->get_header_value("Content-Type") == "application/problem+json");
    }
    CHECK(svc.balance(a) == 1000);
    // The client fixes its header and retries with the same key: it runs.
    auto fixed = svc.client().Post("/transfers", h, body, "application/json; charset=utf-8");
    CHECK(fixed->status == 201);
    CHECK(svc.balance(b) == 10);
}

TEST_CASE("payments: a forged, missing, stale or rotated webhook signature; nothing claimed by a refused one") {
    payments_service svc({.extra = {"--webhook-secret", "whsec-next"}});
    const std::string suffix = std::to_string(std::rand());
    const std::string acct = "w-" + suffix;
    svc.open(acct, 0);
    const std::string event = svc.deposit_event("evt-" + suffix, acct, 700);
    auto c = svc.client();
    CHECK(c.Post("/webhooks/provider", {{"Provider-Signature", "t=1,v1=" + std::string(64, '0')}}, event,
                 "application/json")
              ->status == 401);
    CHECK(c.Post("/webhooks/provider", {}, event, "application/json")->status == 401);
    CHECK(svc.deliver(event, {"wrong"})->status == 401);
    CHECK(svc.deliver(event, {}, std::chrono::system_clock::now() - 10min)->status == 401);  // outside the tolerance
    CHECK(svc.balance(acct) == 0);

    // The real delivery still applies: the refused ones claimed nothing. Signed with the
    // next secret (the provider rotated): either verifies.
    auto first = svc.deliver(event, {"whsec-next"});
    CHECK(first->status == 200);
    CHECK(first->body.find("\"applied\"") != std::string::npos);
    CHECK(svc.balance(acct) == 700);
}

TEST_CASE("payments: a redelivered webhook is applied once, even when deliveries race") {
    payments_service svc;
    const std::string suffix = std::to_string(std::rand());
    const std::string acct = "r-" + suffix;
    svc.open(acct, 0);
    const std::string event = svc.deposit_event("evt-r-" + suffix, acct, 300);
    std::atomic<int> applied{0}, replayed{0};
    {
        std::barrier start(10);
        std::vector<std::jthread> threads;
        for (int i = 0; i < 10; ++i) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                auto r = svc.deliver(event);
                if (r && r->status == 200)
                    ++(r->get_header_value("Idempotent-Replayed") == "true" ? replayed : applied);
            });
        }
    }
    CHECK(applied == 1);
    CHECK(replayed == 9);
    CHECK(svc.balance(acct) == 300);
}

TEST_CASE("payments: a deposit for an account not opened yet is redelivered until it applies, once") {
    payments_service svc;
    const std::string acct = unique("later-");
    const std::string event = svc.deposit_event(unique("evt-early-"), acct, 900);
    for (int early = 0; early < 2; ++early) {
        auto r = svc.deliver(event);
        REQUIRE(r);
        CHECK(r->status == 503);  // providers redeliver what they do not get a 2xx for
        CHECK_FALSE(r->get_header_value("Retry-After").empty());
        CHECK(r->body.find("unknown account") != std::string::npos);
    }
    svc.open(acct, 0);
    auto applied = svc.deliver(event);
    CHECK(applied->status == 200);
    CHECK(applied->get_header_value("Idempotent-Replayed") != "true");
    auto redelivered = svc.deliver(event);
    CHECK(redelivered->status == 200);
    CHECK(redelivered->get_header_value("Idempotent-Replayed") == "true");
    CHECK(svc.balance(acct) == 900);
    // A deposit past an account's limit can never apply: stored and answered 200, so it stops.
    const std::string full = unique("full-");
    svc.open(full, 1'000'000'000'000'000);
    const std::string too_much = svc.deposit_event(unique("evt-limit-"), full, 1);
    auto refused = svc.deliver(too_much);
    CHECK(refused->status == 200);
    CHECK(refused->body.find("permanent_failure") != std::string::npos);
    CHECK(svc.deliver(too_much)->get_header_value("Idempotent-Replayed") == "true");
    CHECK(svc.balance(full) == 1'000'000'000'000'000);
}

TEST_CASE("payments: in observe and off every route answers as with no idempotency") {
    for (const std::string mode : {"observe", "off"}) {
        CAPTURE(mode);
        payments_service svc({.extra = {"--mode", mode}});
        const long long records_before = svc.count("SELECT COUNT(*) FROM idem_records");
        const std::string a = unique("a-"), b = unique("b-");
        svc.open(a, 100000);
        svc.open(b, 0);
        const std::string body = svc.transfer_body(a, b, 10);
        auto c = svc.client();
        int sent = 0;
        // No key, an invalid key, an unscoped caller (no Authorization), a repeated key.
        const std::vector<httplib::Headers> requests = {
            {{"Authorization", "Bearer test-client"}},
            {{"Authorization", "Bearer test-client"}, {"Idempotency-Key", "\"two\", \"keys\""}},
            {{"Idempotency-Key", unique("anon-")}},
            {{"Authorization", "Bearer test-client"}, {"Idempotency-Key", "again"}},
            {{"Authorization", "Bearer test-client"}, {"Idempotency-Key", "again"}},
        };
        for (const auto& h : requests) {
            auto r = c.Post("/transfers", h, body, "application/json");
            REQUIRE(r);
            CHECK_MESSAGE(r->status == 201, r->body);
            CHECK(r->get_header_value("Idempotent-Replayed").empty());
            ++sent;
        }
        CHECK(svc.balance(b) == 10 * sent);
        for (const auto& h : requests) {
            auto r = c.Post("/accounts", h, "{\"id\":\"" + unique("acct-") + "\"}", "application/json");
            REQUIRE(r);
            CHECK_MESSAGE(r->status == 201, r->body);
        }
        // A redelivered event is applied once (the deposit row dedupes it) and answered 200.
        const std::string event = svc.deposit_event(unique("evt-mode-"), b, 5);
        CHECK(svc.deliver(event)->status == 200);
        CHECK(svc.deliver(event)->status == 200);
        CHECK(svc.balance(b) == 10 * sent + 5);
        if (mode == "off") CHECK(svc.count("SELECT COUNT(*) FROM idem_records") == records_before);
    }
}

TEST_CASE("payments: bad input is problem+json in every mode and changes nothing") {
    for (const std::string mode : {"enforce", "observe", "off"}) {
        CAPTURE(mode);
        payments_service svc({.extra = {"--mode", mode}});
        const std::string a = unique("a-"), b = unique("b-");
        svc.open(a, 1000);
        svc.open(b, 0);
        const long long records = svc.count("SELECT COUNT(*) FROM idem_records");
        const long long transfers = svc.count("SELECT COUNT(*) FROM transfers");
        const std::vector<std::pair<std::string, std::string>> bad = {
            {"/transfers", "not json"},
            {"/transfers", "{\"from\":\"" + a + "\",\"to\":\"" + b + "\",\"amount\":\"10\"}"},
            {"/transfers", "{\"from\":\"" + a + "\",\"to\":\"" + a + "\",\"amount\":10}"},
            {"/transfers", "{\"from\":\"" + a + "\",\"to\":\"" + b + "\",\"amount\":0}"},
            {"/transfers", "{\"from\":\"" + a + "\",\"to\":\"nobody-" + b + "\",\"amount\":10}"},
            {"/accounts", "{\"id\":\"" + a + "\"}"},
            {"/accounts", "{\"id\":\"x y\"}"},
        };
        for (const auto& [path, body] : bad) {
            CAPTURE(body);
            auto r = svc.post(path, body, {{"Idempotency-Key", unique("bad-")}});
            REQUIRE(r);
            CHECK(r->status >= 400);
            CHECK(r->status < 500);
            CHECK(r->get_header_value("Content-Type") == "application/problem+json");
        }
        CHECK(svc.balance(a) == 1000);
        CHECK(svc.balance(b) == 0);
        CHECK(svc.count("SELECT COUNT(*) FROM transfers") == transfers);
        // Only final refusals are recorded (Enforce and Observe), each under its own key.
        if (mode == "off") CHECK(svc.count("SELECT COUNT(*) FROM idem_records") == records);
        auto hook = svc.deliver("{\"id\":\"" + unique("evt-bad-") + "\",\"account\":\"" + b + "\",\"amount\":-5}");
        CHECK(hook->status == 200);  // refused for good: the provider stops
        CHECK(hook->body.find("permanent_failure") != std::string::npos);
        CHECK(svc.balance(b) == 0);
    }
}

TEST_CASE(
    "payments: --encryption-keys seals every stored response: an account id a response carries is nowhere in the "
    "record table (and is, without keys), and a replay is byte-identical") {
    idem::test::temp_dir keys_dir{"payments-keys"};
    const std::string keys = (keys_dir.path() / "idem.keys").string();
    std::ofstream(keys) << "# the sealing key first\nk2:" << std::string(64, 'b') << "\nk1:" << std::string(64, 'a')
                        << "\n";
    for (const bool sealed : {true, false}) {
        CAPTURE(sealed);
        payments_service svc(sealed ? idem::test::service_config{.extra = {"--encryption-keys", keys}}
                                    : idem::test::service_config{});
        // Unique to this run: the PostgreSQL database is shared by the tests.
        const std::string marker = std::string("SECRET") + (sealed ? "S" : "P") + std::to_string(::getpid());
        svc.open(marker, 10000);
        svc.open(marker + "b", 0);
        const auto first =
            svc.post("/transfers", svc.transfer_body(marker, marker + "b", 700), {{"Idempotency-Key", marker}});
        REQUIRE(first);
        CHECK(first->status == 201);
        CHECK(first->body.find(marker) != std::string::npos);
        const auto again =
            svc.post("/transfers", svc.transfer_body(marker, marker + "b", 700), {{"Idempotency-Key", marker}});
        REQUIRE(again);
        CHECK(again->status == 201);
        CHECK(again->get_header_value("Idempotent-Replayed") == "true");
        CHECK(again->body == first->body);
        CHECK(svc.balance(marker) == 9300);
#if defined(IDEM_PAYMENTS_POSTGRESQL)
        const std::string holding =
            "SELECT COUNT(*) FROM idem_records WHERE position(convert_to('" + marker + "', 'UTF8') in payload) > 0";
#elif defined(IDEM_PAYMENTS_MARIADB)
        const std::string holding = "SELECT COUNT(*) FROM idem_records WHERE LOCATE('" + marker + "', payload) > 0";
#else
        const std::string holding =
            "SELECT COUNT(*) FROM idem_records WHERE instr(payload, CAST('" + marker + "' AS BLOB)) > 0";
#endif
        // Three responses carry it: the two accounts opened and the transfer.
        CHECK(svc.count(holding) == (sealed ? 0 : 3));
    }
}
