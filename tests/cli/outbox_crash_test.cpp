// The delivery guarantee under crashes: transfers publish events while `idem
// relay` (a process of its own, short lease) is SIGKILLed at random points and
// started again; a webhook receiver on a database of its own applies them.
// Every event is applied exactly once, none is lost, and each account's events
// arrive in the order they were published. On SQLite and PostgreSQL.
#include <doctest/doctest.h>

#include <httplib.h>
#include <signal.h>
#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "cli_support.hpp"
#include "idem/database.hpp"
#include "idem/webhook.hpp"
#include "loopback_server.hpp"

namespace {

using namespace std::chrono_literals;

// The receiving service: each event recorded in its own table, in the receiver's transaction.
class ledger_mirror {
public:
    explicit ledger_mirror(const idem::test::place& where)
        : db_(idem::database::open(where.url(), {.pool_size = 8})),
          receiver_(db_.executor(),
                    {.provider = "payments",
                     .scheme = idem::webhook::timestamped_signature{},
                     .secrets = {"whsec"},
                     .identify = idem::webhook::id_from_header("Idem-Message-Id", idem::scope::global())}) {
        db_.migrate();
        db_.transact([](idem::unit_of_work& uow) {
            uow.sql() << "CREATE TABLE applied (id TEXT PRIMARY KEY, account TEXT NOT NULL, n BIGINT NOT NULL)";
        });
        http_.server.new_task_queue = [] { return new httplib::ThreadPool(4); };
        http_.server.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
            const idem::webhook::delivery d = idem::test::delivery_of(req);
            const std::string account = req.get_header_value("Idem-Ordering-Key");
            const auto answer = receiver_.handle(db_, d, [&](idem::unit_of_work& uow, const idem::webhook::event& e) {
                const std::string id(e.id);
                const long long n = std::stoll(std::string(e.body));
                uow.sql() << "INSERT INTO applied (id, account, n) VALUES (:i, :a, :n)", soci::use(id),
                    soci::use(account), soci::use(n);
                uow.after_commit([this, account, n] {
                    std::lock_guard lock(mutex_);
                    arrivals_[account].push_back(n);
                });
                return idem::webhook::handler_result::applied();
            });
            res.status = answer.status;
            res.set_content(answer.body, "application/json");
        });
        http_.start();
    }
    [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(http_.port()) + "/events"; }
    [[nodiscard]] long long applied() { return idem::test::count_rows(db_, "SELECT COUNT(*) FROM applied"); }
    [[nodiscard]] std::map<std::string, std::vector<long long>> arrivals() {
        std::lock_guard lock(mutex_);
        return arrivals_;
    }

private:
    idem::database db_;
    idem::webhook::receiver receiver_;
    idem::test::loopback_server http_;
    std::mutex mutex_;
    std::map<std::string, std::vector<long long>> arrivals_;
};

}  // namespace

TEST_CASE("idem relay SIGKILLed at random under load: every event applied once downstream, in order per account") {
    for (const auto& payments_place : idem::test::places()) {
        CAPTURE(payments_place->url());
        const auto mirror_places = idem::test::places();
        ledger_mirror mirror(*mirror_places[payments_place->postgresql() ? 1 : 0]);
        idem::database payments = idem::test::open_bank(*payments_place, {.pool_size = 4});
        idem::test::cli::workspace w;

        constexpr int accounts = 8, transfers = 300;
        std::atomic<bool> publishing{true};
        // Transfers in their own transactions, each publishing the next number of its account.
        std::thread publisher([&] {
            std::map<int, long long> next;
            for (int i = 0; i < transfers; ++i) {
                const int account = i % accounts;
                payments.once(idem::test::key_of("transfer-" + std::to_string(i)), "fp", [&](idem::unit_of_work& uow) {
                    idem::test::move(uow, 1);
                    (void)uow.publish({.topic = "transfer.completed",
                                       .payload = std::to_string(next[account]),
                                       .ordering_key = "account-" + std::to_string(account)});
                });
                ++next[account];
                if (i % 10 == 0) std::this_thread::sleep_for(5ms);
            }
            publishing = false;
        });

        const std::vector<std::string> relay_args = {
            "relay",   "--db", payments_place->url(), "--to", mirror.url(), "--secret", "whsec",
            "--batch", "16",   "--threads",           "2",    "--lease",    "1s"};
        std::minstd_rand random(12345);
        int kills = 0;
        while (publishing || kills < 4) {
            auto relay = w.start(relay_args);
            std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 300));
            relay->signal(SIGKILL);
            (void)relay->finish();
            ++kills;
        }
        publisher.join();
        // The last run delivers what is left, the killed runs' claims too once their leases end.
        auto last = w.start({"relay", "--db", payments_place->url(), "--to", mirror.url(), "--secret", "whsec"});
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (mirror.applied() < transfers && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        std::this_thread::sleep_for(1500ms);  // a claim still held would be redelivered meanwhile
        last->signal(SIGTERM);
        const auto r = last->finish();
        CHECK(r.exit_code == 0);
        CHECK(kills >= 4);

        CHECK(mirror.applied() == transfers);  // none lost, none applied twice (ids are the primary key)
        CHECK(idem::test::count_rows(payments, "SELECT COUNT(*) FROM idem_outbox WHERE state <> 1") == 0);
        const auto arrivals = mirror.arrivals();
        CHECK(arrivals.size() == static_cast<std::size_t>(accounts));
        for (const auto& [account, numbers] : arrivals) {
            CAPTURE(account);
            std::vector<long long> expected(numbers.size());
            for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<long long>(i);
            CHECK(numbers == expected);  // each once, in the order published
        }
        CHECK(idem::test::balance(payments, "bob") == transfers);
    }
}
