// The webhook receiver inside a transaction of a SQL store: the event's record
// commits with the handler's writes, and a transient failure rolls both back.
// Linked into each SQL store's executor tests, as the placement scenarios are.
#include <doctest/doctest.h>

#include "executor_fixture.hpp"
#include "idem/webhook.hpp"

namespace idem::test {
namespace {

struct webhook_fixture : executor_fixture {
    webhook::receiver provider{exec, provider_options()};

    static webhook::receiver_options provider_options() {
        return {.provider = "provider",
                .scheme = webhook::body_signature{},
                .secrets = {"whsec"},
                .identify = webhook::id_from_json("id", scope::custom("account", "alice"))};
    }

    // A delivery of event `id`, signed as the provider signs it.
    struct signed_delivery {
        std::string body, signature;
        [[nodiscard]] webhook::delivery view() const {
            return {.body = body, .headers = {{"X-Hub-Signature-256", signature}}};
        }
    };
    [[nodiscard]] static signed_delivery delivery_of(const std::string& id) {
        const std::string body = R"({"id":")" + id + R"(","amount":10})";
        return {body, "sha256=" + webhook::hmac_sha256_hex("whsec", body)};
    }

    // Moves the money, then reports `result`.
    webhook::answer deliver(const signed_delivery& d, const webhook::handler_result& result) {
        return provider.handle(*runner, d.view(), [&](transaction& tx, const webhook::event& e) {
            ++runs;
            bank::move_money(tx.session(), std::string(e.id), 10);
            return result;
        });
    }

    reservation_status event_record(const std::string& id) {
        const auto key = webhook::event_key("provider", id, scope::custom("account", "alice"));
        auto r = store->try_reserve(key, webhook::fingerprint, std::chrono::minutes(1));
        if (r.status == reservation_status::reserved) REQUIRE(store->release(key, r.token));
        return r.status;
    }
};

}  // namespace

TEST_CASE("webhook receiver in a transaction: the event's record commits with the handler's writes") {
    webhook_fixture f;
    const auto d = webhook_fixture::delivery_of("evt-1");
    auto first = f.deliver(d, webhook::handler_result::applied());
    CHECK(first.status == 200);
    CHECK(first.verdict == webhook::verdict::applied);
    CHECK(f.runner->last_state() == transaction_state::committed);
    auto again = f.deliver(d, webhook::handler_result::applied());
    CHECK(again.status == 200);
    CHECK(again.verdict == webhook::verdict::duplicate);
    CHECK(f.runs == 1);
    CHECK(f.ledger() == 1);
    CHECK(f.event_record("evt-1") == reservation_status::completed);
}

TEST_CASE("webhook receiver in a transaction: a transient failure rolls the writes back and frees the key") {
    webhook_fixture f;
    const auto d = webhook_fixture::delivery_of("evt-2");
    auto first = f.deliver(d, webhook::handler_result::transient_failure("ledger busy"));
    CHECK(first.status == 503);
    CHECK(first.verdict == webhook::verdict::transient_failure);
    CHECK(f.runner->last_state() == transaction_state::rolled_back);
    CHECK(f.ledger() == 0);                                          // the money it moved went back with the record
    CHECK(f.event_record("evt-2") == reservation_status::reserved);  // free
    auto redelivered = f.deliver(d, webhook::handler_result::applied());
    CHECK(redelivered.verdict == webhook::verdict::applied);
    CHECK(f.runs == 2);
    CHECK(f.ledger() == 1);
}

TEST_CASE("webhook receiver in a transaction: a permanent failure is stored, so redeliveries stop") {
    webhook_fixture f;
    const auto d = webhook_fixture::delivery_of("evt-3");
    auto first = f.provider.handle(*f.runner, d.view(), [&](transaction&, const webhook::event&) {
        ++f.runs;
        return webhook::handler_result::permanent_failure("unknown account");
    });
    CHECK(first.status == 200);
    CHECK(first.verdict == webhook::verdict::permanent_failure);
    auto again = f.deliver(d, webhook::handler_result::applied());
    CHECK(again.status == 200);
    CHECK(again.verdict == webhook::verdict::duplicate);
    CHECK(again.result == webhook::handler_result::permanent_failure("unknown account"));
    CHECK(f.runs == 1);
    CHECK(f.ledger() == 0);
}

TEST_CASE("webhook receiver in a transaction: a handler that throws rolls back; the redelivery runs") {
    webhook_fixture f;
    const auto d = webhook_fixture::delivery_of("evt-4");
    CHECK_THROWS_AS((void)f.provider.handle(*f.runner, d.view(),
                                            [&](transaction& tx, const webhook::event& e) -> webhook::handler_result {
                                                bank::move_money(tx.session(), std::string(e.id), 10);
                                                throw bank::business_failure();
                                            }),
                    bank::business_failure);
    CHECK(f.ledger() == 0);
    CHECK(f.event_record("evt-4") == reservation_status::reserved);
    CHECK(f.deliver(d, webhook::handler_result::applied()).verdict == webhook::verdict::applied);
    CHECK(f.ledger() == 1);
}

}  // namespace idem::test
