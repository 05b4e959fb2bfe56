// `idem relay`, `idem outbox status|dead|requeue` and the outbox part of `idem
// purge`, run as processes on a SQLite file, delivering to a real webhook
// receiver on loopback.
#include <doctest/doctest.h>

#include <httplib.h>
#include <signal.h>
#include <soci/soci.h>

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
