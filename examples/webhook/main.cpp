// Provider webhooks applied once: Stripe-style signed deliveries, redelivered,
// replayed late and failing, answered the way the provider expects.
#include <idem/idem.hpp>
#include <idem/memory_store.hpp>
#include <idem/webhook.hpp>

#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct bank {
    std::map<std::string, long long> balances{{"acct_alice", 0}};
    bool ledger_down = false;
};

// readme:begin webhook-handler
// Applies a deposit event. The answer tells the receiver whether a failure can
// ever succeed: a permanent one is stored (200, redeliveries stop), a transient
// one frees the event for the provider's redelivery (503).
idem::webhook::handler_result deposit(bank& b, const idem::webhook::event& e) {
    const auto event = nlohmann::json::parse(e.body, nullptr, false);
    if (!event.is_object() || !event.contains("account") || !event["account"].is_string())
        return idem::webhook::handler_result::permanent_failure("not a deposit event");
    if (b.ledger_down) return idem::webhook::handler_result::transient_failure("ledger unavailable");
    const auto it = b.balances.find(event["account"].get<std::string>());
    if (it == b.balances.end()) return idem::webhook::handler_result::permanent_failure("unknown account");
    it->second += 500;
    return idem::webhook::handler_result::applied("credited 500");
}

idem::webhook::receiver stripe_receiver(idem::executor& exec, std::shared_ptr<const idem::clock> time) {
    idem::webhook::receiver_options options{
        .provider = "stripe",
        .scheme = idem::webhook::timestamped_signature{.tolerance = std::chrono::minutes(5)},
        .secrets = {"whsec_new", "whsec_old"},  // rotation: both verify until the old one is retired
        .identify = idem::webhook::id_from_json("id", idem::scope::custom("account", "acct_platform")),
        .execution = {.retention = std::chrono::days(3)},  // as long as the provider redelivers
        .time = std::move(time),
    };
    return {exec, std::move(options)};
}
// readme:end webhook-handler

// What the provider sends: the body, and t=...,v1=... signed with its secret at `t`.
struct signed_delivery {
    std::string body, signature;
};

signed_delivery sign(const std::string& body, const std::string& secret, long long t) {
    const std::string ts = std::to_string(t);
    return {body, "t=" + ts + ",v1=" + idem::webhook::hmac_sha256_hex(secret, ts + "." + body)};
}

int failures = 0;

void expect(const char* what, const idem::webhook::answer& a, int status, idem::webhook::verdict verdict) {
    std::cout << what << ": " << a.status << " " << a.body << "\n";
    if (a.status != status || a.verdict != verdict) {
        std::cout << "  unexpected answer\n";
        ++failures;
    }
}

}  // namespace

int main() {
    using idem::webhook::verdict;
    const long long now = 1'700'000'000;
    auto clock = std::make_shared<idem::manual_clock>(idem::time_point(std::chrono::seconds(now)));
    idem::executor exec{std::make_shared<idem::memory_store>(clock)};
    auto receiver = stripe_receiver(exec, clock);
    bank b;
    const auto deliver = [&](const signed_delivery& d) {
        return receiver.handle({.body = d.body, .headers = {{"Stripe-Signature", d.signature}}},
                               [&](const idem::webhook::event& e) { return deposit(b, e); });
    };

    const auto first = sign(R"({"id":"evt_1","account":"acct_alice"})", "whsec_new", now);
    expect("delivery", deliver(first), 200, verdict::applied);
    expect("redelivery", deliver(first), 200, verdict::duplicate);
    expect("signed with the old secret", deliver(sign(R"({"id":"evt_2","account":"acct_alice"})", "whsec_old", now)),
           200, verdict::applied);
    expect("forged", deliver({first.body, sign(first.body, "guess", now).signature}), 401, verdict::unauthenticated);

    const auto unknown = sign(R"({"id":"evt_3","account":"acct_bob"})", "whsec_new", now);
    expect("unknown account", deliver(unknown), 200, verdict::permanent_failure);
    expect("its redelivery", deliver(unknown), 200, verdict::duplicate);

    const auto later = sign(R"({"id":"evt_4","account":"acct_alice"})", "whsec_new", now);
    b.ledger_down = true;
    expect("ledger down", deliver(later), 503, verdict::transient_failure);
    b.ledger_down = false;
    expect("redelivered once it is back", deliver(later), 200, verdict::applied);

    clock->advance(std::chrono::minutes(10));
    expect("a captured delivery replayed 10 min later", deliver(first), 401, verdict::unauthenticated);

    std::cout << "alice: " << b.balances["acct_alice"] << " (3 deposits of 500)\n";
    if (b.balances["acct_alice"] != 1500) ++failures;
    return failures == 0 ? 0 : 1;
}
