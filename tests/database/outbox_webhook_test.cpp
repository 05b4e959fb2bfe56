// The outbox's HTTP sink against a real idem::webhook::receiver on loopback,
// each service on a database of its own: one publishes in its transactions,
// its relay delivers signed POSTs, the other applies each event once.
#include <doctest/doctest.h>

#include <httplib.h>
#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "bank_places.hpp"
#include "free_port.hpp"
#include "idem/database.hpp"
#include "idem/http/webhook_sink.hpp"
#include "idem/outbox_relay.hpp"
#include "idem/webhook.hpp"
#include "loopback_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test;

// A second idem service: a webhook receiver on its own database that records
// each event it applies (id, topic, payload) in the same transaction.
class receiving_service {
public:
    explicit receiving_service(const place& where, std::vector<std::string> secrets)
        : db_(open_bank(where)),
          receiver_(db_.executor(),
                    {.provider = "payments",
                     .scheme = idem::webhook::timestamped_signature{},
                     .secrets = std::move(secrets),
                     .identify = idem::webhook::id_from_header("Idem-Message-Id", idem::scope::global())}) {
        db_.transact([](idem::unit_of_work& uow) {
            uow.sql() << "CREATE TABLE applied (id TEXT PRIMARY KEY, topic TEXT NOT NULL, bytes BIGINT NOT NULL)";
        });
        http_.server.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
            const idem::webhook::delivery d = idem::test::delivery_of(req);
            const auto answer = receiver_.handle(db_, d, [&](idem::unit_of_work& uow, const idem::webhook::event& e) {
                const std::string id(e.id), topic = req.get_header_value("Idem-Topic");
                const long long bytes = static_cast<long long>(e.body.size());
                uow.sql() << "INSERT INTO applied (id, topic, bytes) VALUES (:i, :t, :b)", soci::use(id),
                    soci::use(topic), soci::use(bytes);
                std::lock_guard lock(mutex_);
                bodies_[id] = std::string(e.body);
                return idem::webhook::handler_result::applied();
            });
            res.status = answer.status;
            if (answer.retry_after > 0) res.set_header("Retry-After", std::to_string(answer.retry_after));
            res.set_content(answer.body, "application/json");
        });
        http_.server.Post("/refuse", [](const httplib::Request&, httplib::Response& res) {
            res.status = 422;
            res.set_content("no such account", "text/plain");
        });
        http_.server.Post("/busy", [this](const httplib::Request&, httplib::Response& res) {
            ++busy_;
            res.status = 503;
        });
        http_.start();
    }

    [[nodiscard]] std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(http_.port()) + path;
    }
    [[nodiscard]] long long applied() { return count_rows(db_, "SELECT COUNT(*) FROM applied"); }
    [[nodiscard]] std::string body_of(const std::string& id) {
        std::lock_guard lock(mutex_);
        return bodies_[id];
    }
    [[nodiscard]] int busy() const { return busy_; }

private:
    idem::database db_;
    idem::webhook::receiver receiver_;
    idem::test::loopback_server http_;
    std::mutex mutex_;
    std::map<std::string, std::string> bodies_;
    std::atomic<int> busy_{0};
};

idem::outbox_relay_options quick(idem::outbox_relay_options o = {}) {
    o.idle_wait = 5ms;
    o.first_backoff = 0ms;
    o.max_backoff = 0ms;
    return o;
}

void drain(idem::outbox_relay& relay) {
    while (relay.run_once() > 0) {
    }
}

}  // namespace

TEST_CASE("webhook sink: signed deliveries a receiver verifies (old secret while rotating), applied once each") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database payments = open_bank(*where);
        const auto receiving_place = places();  // the receiver's own database of the same kind
        receiving_service ledger(*receiving_place[where->postgresql() ? 1 : 0], {"whsec-new", "whsec-old"});
        std::string payload("\0{\"amount\":10}\xff", 15);
        std::vector<std::string> ids;
        for (int i = 0; i < 20; ++i)
            ids.push_back(payments.transact([&](idem::unit_of_work& uow) {
                move(uow, 1);
                return uow.publish({.topic = "transfer.completed",
                                    .payload = payload + std::to_string(i),
                                    .ordering_key = "alice",
                                    .headers = {{"Content-Type", "application/json"}}});
            }));
        auto sink = std::make_shared<idem::http::webhook_sink>(
            idem::http::webhook_sink_options{.url = ledger.url("/events"), .secrets = {"whsec-old"}});
        idem::outbox_relay relay(payments, sink, quick());
        drain(relay);
        CHECK(ledger.applied() == 20);
        CHECK(ledger.body_of(ids[3]) == payload + "3");
        CHECK(relay.metrics().pending == 0);
        CHECK(relay.metrics().delivered == 20);
        // A redelivery (a relay killed after the POST, before it settled) is a
        // duplicate there: 200, applied once.
        const idem::outbox_delivery again{.id = ids[0],
                                          .topic = "transfer.completed",
                                          .ordering_key = "alice",
                                          .headers = {},
                                          .payload = payload + "0",
                                          .attempt = 2,
                                          .published_at = std::chrono::system_clock::now()};
        CHECK(sink->deliver(again).what() == idem::delivery_result::kind::delivered);
        CHECK(ledger.applied() == 20);
    }
}

TEST_CASE(
    "webhook sink: 4xx dead-letters with the answer; 503 and a sink that is down back off; a wrong secret is refused") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database payments = open_bank(*where);
        const auto receiving_place = places();
        receiving_service ledger(*receiving_place[where->postgresql() ? 1 : 0], {"whsec-new"});
        payments.transact([](idem::unit_of_work& uow) { (void)uow.publish("t", "p"); });

        idem::outbox_relay refused(payments,
                                   std::make_shared<idem::http::webhook_sink>(idem::http::webhook_sink_options{
                                       .url = ledger.url("/refuse"), .secrets = {"whsec-new"}}),
                                   quick());
        CHECK(refused.run_once() == 1);
        auto dead = idem::dead_letters(payments);
        REQUIRE(dead.size() == 1);
        CHECK(dead[0].last_answer == "HTTP 422: no such account");

        CHECK(idem::requeue_dead_letters(payments) == 1);
        idem::outbox_relay forged(payments,
                                  std::make_shared<idem::http::webhook_sink>(idem::http::webhook_sink_options{
                                      .url = ledger.url("/events"), .secrets = {"not-the-secret"}}),
                                  quick());
        CHECK(forged.run_once() == 1);
        dead = idem::dead_letters(payments);
        REQUIRE(dead.size() == 1);
        CHECK(dead[0].last_answer.starts_with("HTTP 401"));
        CHECK(ledger.applied() == 0);

        // Busy, then down: tried again after the backoff, not in a loop.
        CHECK(idem::requeue_dead_letters(payments) == 1);
        idem::outbox_relay busy(payments,
                                std::make_shared<idem::http::webhook_sink>(idem::http::webhook_sink_options{
                                    .url = ledger.url("/busy"), .secrets = {"whsec-new"}}),
                                {.max_attempts = 100, .first_backoff = 100ms, .max_backoff = 100ms, .idle_wait = 5ms});
        busy.start();
        std::this_thread::sleep_for(450ms);
        busy.stop();
        CHECK(ledger.busy() >= 3);
        // At most one try per 50 ms (the backoff's lower half) and one at once: not thousands.
        CHECK(ledger.busy() <= 10);
        CHECK(busy.metrics().pending == 1);

        const int closed = free_loopback_port();
        std::atomic<int> tries{0};
        auto down = std::make_shared<idem::http::webhook_sink>(idem::http::webhook_sink_options{
            .url = "http://127.0.0.1:" + std::to_string(closed) + "/events", .secrets = {"whsec-new"}});
        auto counting = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
            ++tries;
            return down->deliver(m);
        });
        std::this_thread::sleep_for(100ms);  // the busy backoff ends
        idem::outbox_relay relay_down(
            payments, counting, {.max_attempts = 100, .first_backoff = 100ms, .max_backoff = 100ms, .idle_wait = 5ms});
        relay_down.start();
        std::this_thread::sleep_for(450ms);
        relay_down.stop();
        CHECK(tries.load() >= 3);
        CHECK(tries.load() <= 10);
        auto still = relay_down.metrics();
        CHECK(still.pending == 1);
        CHECK(still.failed == static_cast<std::uint64_t>(tries.load()));
    }
}
