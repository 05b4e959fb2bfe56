// `idem relay`, `idem outbox status|dead|requeue` and the outbox part of `idem
// purge`, run as processes on a SQLite file, delivering to a real webhook
// receiver on loopback.
#include <doctest/doctest.h>

#include <httplib.h>
#include <signal.h>
#include <soci/soci.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "cli_support.hpp"
#include "idem/database.hpp"
#include "idem/memory_store.hpp"
#include "idem/webhook.hpp"
#include "loopback_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test::cli;

// A receiver that verifies each delivery (lease mode, in memory) and refuses topic "bad" with 422.
class receiver_service {
public:
    receiver_service()
        : exec_(std::make_shared<idem::memory_store>()),
          receiver_(exec_, {.provider = "payments",
                            .scheme = idem::webhook::timestamped_signature{},
                            .secrets = {"whsec"},
                            .identify = idem::webhook::id_from_header("Idem-Message-Id", idem::scope::global())}) {
        http_.server.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
            if (req.get_header_value("Idem-Topic") == "bad") {
                res.status = 422;
                res.set_content("unknown account", "text/plain");
                return;
            }
            const idem::webhook::delivery d = idem::test::delivery_of(req);
            const auto answer = receiver_.handle(d, [&](const idem::webhook::event&) {
                ++applied_;
                return idem::webhook::handler_result::applied();
            });
            res.status = answer.status;
            res.set_content(answer.body, "application/json");
        });
        http_.start();
    }
    [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(http_.port()) + "/events"; }
    [[nodiscard]] int applied() const { return applied_; }

private:
    idem::executor exec_;
    idem::webhook::receiver receiver_;
    idem::test::loopback_server http_;
    std::atomic<int> applied_{0};
};

void publish(const std::string& db_path, int count, const std::string& topic) {
    idem::database db = idem::database::open("sqlite:" + db_path);
    db.transact([&](idem::unit_of_work& uow) {
        for (int i = 0; i < count; ++i) (void)uow.publish(topic, "event " + std::to_string(i));
    });
}

}  // namespace

TEST_CASE("idem relay --drain delivers, dead-letters a refusal; outbox status, dead, requeue; purge takes delivered") {
    workspace w;
    w.migrate();
    receiver_service ledger;
    publish(w.db, 10, "transfer.completed");
    publish(w.db, 1, "bad");

    auto r = w.idem({"relay", "--db", w.db, "--to", ledger.url(), "--secret", "whsec", "--drain"});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "delivered 10, failed 1, pending 0, dead 1, lag 0.0s\n");
    CHECK(ledger.applied() == 10);

    r = w.idem({"outbox", "status", "--db", w.db});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "pending 0, dead 1, lag 0.0s\n");
    r = w.idem({"outbox", "dead", "--db", w.db});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, " bad attempts=1 answer=\"HTTP 422: unknown account\"\n"));
    const std::string id = r.out.substr(0, 36);

    r = w.idem({"outbox", "requeue", "--db", w.db, "--id", id});
    CHECK(r.out == "requeued 1 dead letter\n");
    r = w.idem({"outbox", "requeue", "--db", w.db});
    CHECK(r.out == "requeued 0 dead letters\n");
    CHECK(w.idem({"outbox", "status", "--db", w.db}).out.starts_with("pending 1, dead 0, lag "));

    r = w.idem({"purge", "--db", w.db, "--dry-run"});
    CHECK(contains(r.out, "would purge 10 delivered outbox messages\n"));
    r = w.idem({"purge", "--db", w.db, "--batch", "4"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "purged 10 delivered outbox messages in 3 batches"));
    r = w.idem({"purge", "--db", w.db});
    CHECK_FALSE(contains(r.out, "outbox"));  // nothing delivered is left: no line
    CHECK(w.idem({"outbox", "status", "--db", w.db}).out.starts_with("pending 1, dead 0"));  // never a pending one
}

TEST_CASE("idem relay runs until SIGTERM, delivering what is published meanwhile; bad options are usage errors") {
    workspace w;
    w.migrate();
    receiver_service ledger;
    auto relay = w.start({"relay", "--db", w.db, "--to", ledger.url(), "--secret", "whsec", "--threads", "2"});
    publish(w.db, 5, "deposit.applied");
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (ledger.applied() < 5 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    CHECK(ledger.applied() == 5);
    relay->signal(SIGTERM);
    const auto r = relay->finish();
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.starts_with("delivered 5, failed 0, pending 0, dead 0"));

    CHECK(w.idem({"relay", "--db", w.db, "--to", ledger.url()}).exit_code == 2);  // no secret
    CHECK(w.idem({"relay", "--db", w.db, "--to", "ftp://x", "--secret", "s", "--drain"}).exit_code == 1);
    CHECK(w.idem({"relay", "--db", w.db, "--to", ledger.url(), "--secret", "s", "--batch", "0"}).exit_code == 2);
    CHECK(w.idem({"outbox", "status", "--db", (w.dir.path() / "missing.db").string()}).exit_code == 1);
}

TEST_CASE("idem outbox dead escapes an answer of several lines, quotes, backslashes and tabs: one line a letter") {
    workspace w;
    w.migrate();
    idem::test::loopback_server refusing;
    const std::string answer = "line one\nhe said \"no\"\r\n\\path\\to\tend\x01 \xc3\xa9t\xc3\xa9";
    refusing.server.Post("/events", [&](const httplib::Request&, httplib::Response& res) {
        res.status = 422;
        res.set_content(answer, "text/plain");
    });
    refusing.start();
    publish(w.db, 1, "odd\ttopic");
    const std::string url = "http://127.0.0.1:" + std::to_string(refusing.port()) + "/events";
    auto r = w.idem({"relay", "--db", w.db, "--to", url, "--secret", "whsec", "--drain"});
    CAPTURE(r.err);
    REQUIRE(r.out.starts_with("delivered 0, failed 1, pending 0, dead 1"));

    r = w.idem({"outbox", "dead", "--db", w.db});
    CHECK(r.exit_code == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    const auto space = r.out.find(' ');
    REQUIRE(space != std::string::npos);
    CHECK(r.out.substr(space) ==
          " odd\\ttopic attempts=1 answer=\"HTTP 422: line one\\nhe said \\\"no\\\"\\r\\n\\\\path\\\\to\\tend\\x01 "
          "\xc3\xa9t\xc3\xa9\"\n");
    // The id printed is the one requeue takes.
    CHECK(w.idem({"outbox", "requeue", "--db", w.db, "--id", r.out.substr(0, space)}).out ==
          "requeued 1 dead letter\n");
}

TEST_CASE("idem relay --timeout: a receiver slower than it gets the message again later, a duplicate") {
    workspace w;
    w.migrate();
    // An idem webhook receiver that takes 1.5 s over each of its first `slow` requests.
    idem::executor exec(std::make_shared<idem::memory_store>());
    idem::webhook::receiver receiver(
        exec, {.provider = "payments",
               .scheme = idem::webhook::timestamped_signature{},
               .secrets = {"whsec"},
               .identify = idem::webhook::id_from_header("Idem-Message-Id", idem::scope::global())});
    std::atomic<int> slow{1}, requests{0}, applied{0}, answered{0};
    idem::test::loopback_server http;
    http.server.Post("/events", [&](const httplib::Request& req, httplib::Response& res) {
        ++requests;
        if (slow-- > 0) std::this_thread::sleep_for(1500ms);
        const auto a = receiver.handle(idem::test::delivery_of(req), [&](const idem::webhook::event&) {
            ++applied;
            return idem::webhook::handler_result::applied();
        });
        res.status = a.status;
        res.set_content(a.body, "application/json");
        ++answered;
    });
    http.start();
    const std::string url = "http://127.0.0.1:" + std::to_string(http.port()) + "/events";
    publish(w.db, 1, "transfer.completed");

    // 300 ms is too short for it: the delivery fails and backs off, though the receiver applies it.
    auto r = w.idem({"relay", "--db", w.db, "--to", url, "--secret", "whsec", "--timeout", "300ms", "--first-backoff",
                     "1s", "--drain"});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.starts_with("delivered 0, failed 1, pending 1, dead 0"));
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (answered < 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    CHECK(applied == 1);
    // Once its backoff ends, the message goes again: a duplicate, answered 200 without applying it again.
    bool delivered = false;
    while (!delivered && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(100ms);
        r = w.idem({"relay", "--db", w.db, "--to", url, "--secret", "whsec", "--timeout", "300ms", "--drain"});
        REQUIRE(r.exit_code == 0);
        delivered = r.out.starts_with("delivered 1, failed 0, pending 0, dead 0");
    }
    CHECK(delivered);
    CHECK(requests == 2);
    CHECK(applied == 1);

    // The default (10 s) waits for the same slow answer: delivered at once, one request.
    slow = 1;
    publish(w.db, 1, "transfer.completed");
    r = w.idem({"relay", "--db", w.db, "--to", url, "--secret", "whsec", "--drain"});
    CHECK(r.out.starts_with("delivered 1, failed 0, pending 0, dead 0"));
    CHECK(requests == 3);
    CHECK(applied == 2);

    // A timeout that is no duration, or none at all, is a usage error naming the flag.
    for (const std::string bad : {"10", "0s", "1.5s", "fast"}) {
        CAPTURE(bad);
        r = w.idem({"relay", "--db", w.db, "--to", url, "--secret", "whsec", "--timeout", bad, "--drain"});
        CHECK(r.exit_code == 2);
        CHECK(contains(r.err, "--timeout"));
    }
    CHECK(contains(w.idem({"relay", "--db", w.db, "--to", url, "--secret", "whsec", "--timeout", "10", "--drain"}).err,
                   "ms, s, m, h or d"));
    CHECK(contains(w.idem({"relay", "--help"}).out, "--timeout"));
}
