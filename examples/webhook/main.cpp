// Provider webhooks applied once: Stripe-style signed deliveries, redelivered,
// replayed late, arriving before the account they credit, answered the way the
// provider expects; each deposit and its event's record in one SQLite transaction.
#include <soci/soci.h>
#include <idem/database.hpp>
#include <idem/webhook.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <unistd.h>

namespace {

// readme:begin webhook-handler
// Applies a deposit event in the unit of work that also records the event. The
// answer tells the receiver whether a failure can ever succeed: a permanent one
// is stored (200, redeliveries stop); a transient one rolls the unit of work back
// and frees the event for the provider's redelivery (503), as for an account that
// is not open yet: events arrive out of order.
idem::webhook::handler_result deposit(idem::unit_of_work& uow, const idem::webhook::event& e) {
    const auto event = nlohmann::json::parse(e.body, nullptr, false);
    if (!event.is_object() || !event.contains("account") || !event["account"].is_string())
        return idem::webhook::handler_result::permanent_failure("not a deposit event");
    const std::string account = event["account"].get<std::string>();
    long long balance = 0;
    uow.sql() << "UPDATE accounts SET balance = balance + 500 WHERE id = :id RETURNING balance", soci::use(account),
        soci::into(balance);
    if (!uow.sql().got_data()) return idem::webhook::handler_result::transient_failure("no such account yet");
    return idem::webhook::handler_result::applied("credited 500");
}

idem::webhook::receiver stripe_receiver(idem::database& db, std::shared_ptr<const idem::clock> time) {
    idem::webhook::receiver_options options{
        .provider = "stripe",
        .scheme = idem::webhook::timestamped_signature{.tolerance = std::chrono::minutes(5)},
        .secrets = {"whsec_new", "whsec_old"},  // rotation: both verify until the old one is retired
        .identify = idem::webhook::id_from_json("id", idem::scope::custom("account", "acct_platform")),
        .execution = {.retention = std::chrono::days(3)},  // as long as the provider redelivers
        .time = std::move(time),
    };
    return {db.executor(), std::move(options)};
}
// readme:end webhook-handler

int failures = 0;

void expect(const char* what, const idem::webhook::answer& a, int status, idem::webhook::verdict verdict) {
    std::cout << what << ": " << a.status << " " << a.body << "\n";
    if (a.status != status || a.verdict != verdict) {
        std::cout << "  unexpected answer\n";
        ++failures;
    }
}

long long balance(idem::database& db, const std::string& id) {
    return db.read([&](soci::session& sql) {
        long long b = -1;
        sql << "SELECT balance FROM accounts WHERE id = :id", soci::use(id), soci::into(b);
        return b;
    });
}

}  // namespace

int main() {
    using idem::webhook::verdict;
    const auto file =
        std::filesystem::temp_directory_path() / ("idem-webhook-example-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(file);
    idem::database db = idem::database::open("sqlite:" + file.string());
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)";
        uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('acct_alice', 0)";
    });
    const auto now = std::chrono::system_clock::now();
    auto clock = std::make_shared<idem::manual_clock>(now);
    auto receiver = stripe_receiver(db, clock);
    const auto deliver = [&](const std::string& body, const std::string& secret) {
        const std::string signature = idem::webhook::sign_timestamped(std::vector{secret}, body, now);
        return receiver.handle(db, {.body = body, .headers = {{"Stripe-Signature", signature}}}, deposit);
    };

    const std::string first = R"({"id":"evt_1","account":"acct_alice"})";
    expect("delivery", deliver(first, "whsec_new"), 200, verdict::applied);
    expect("redelivery", deliver(first, "whsec_new"), 200, verdict::duplicate);
    expect("signed with the old secret", deliver(R"({"id":"evt_2","account":"acct_alice"})", "whsec_old"), 200,
           verdict::applied);
    expect("forged", deliver(first, "guess"), 401, verdict::unauthenticated);
    expect("not a deposit", deliver(R"({"id":"evt_3"})", "whsec_new"), 200, verdict::permanent_failure);

    const std::string early = R"({"id":"evt_4","account":"acct_bob"})";
    expect("before bob's account is open", deliver(early, "whsec_new"), 503, verdict::transient_failure);
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "INSERT INTO accounts VALUES ('acct_bob', 0)"; });
    expect("redelivered once it is open", deliver(early, "whsec_new"), 200, verdict::applied);
    expect("and again", deliver(early, "whsec_new"), 200, verdict::duplicate);

    clock->advance(std::chrono::minutes(10));
    expect("a captured delivery replayed 10 min later", deliver(first, "whsec_new"), 401, verdict::unauthenticated);

    std::cout << "alice: " << balance(db, "acct_alice") << " (2 deposits of 500), bob: " << balance(db, "acct_bob")
              << " (1)\n";
    if (balance(db, "acct_alice") != 1000 || balance(db, "acct_bob") != 500) ++failures;
    std::filesystem::remove(file);
    return failures == 0 ? 0 : 1;
}
