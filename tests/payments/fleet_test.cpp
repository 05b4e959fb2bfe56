// A fleet on one ledger: 3 payments service processes on one PostgreSQL, through
// PgBouncer in transaction pooling (and, for comparison, directly), while one
// instance after another is SIGKILLed and restarted. Each transfer's retries go
// to another instance than its first try; every transfer is applied exactly
// once, the money is conserved, and every replay is byte-identical.
#include <doctest/doctest.h>

#include <httplib.h>
#include <libpq-fe.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "pgbouncer.hpp"
#include "postgres_server.hpp"

using namespace std::chrono_literals;

namespace {

constexpr int instances = 3, accounts = 20, transfers = 2000, client_threads = 12;
constexpr long long opening = 1'000'000;

std::string uri(int port, const std::string& database) {
    return "postgresql://idem@127.0.0.1:" + std::to_string(port) + "/" + database;
}

// One service process; restart() SIGKILLs it and starts another on a new port.
class instance {
public:
    instance(std::string db, bool pooler) : db_(std::move(db)), pooler_(pooler) { start(); }
    ~instance() {
        stop(SIGTERM);
        CHECK_MESSAGE(unclean_exits_ == 0, unclean_exits_.load() << " runs of an instance exited with a failure");
    }

    [[nodiscard]] int port() const noexcept { return port_.load(); }
    void restart() {
        port_ = 0;
        stop(SIGKILL);
        start();
    }

private:
    void start() {
        idem::test::spawn_options o;
        o.argv = {IDEM_PAYMENTS_BINARY, "--db", db_, "--port", "0", "--threads", "8", "--lease", "2"};
        if (pooler_) o.argv.emplace_back("--transaction-pooler");
        o.pipe_stdout = true;
        process_ = std::make_unique<idem::test::child_process>(std::move(o));
        const auto line = process_->read_line(20s);
        REQUIRE(line.has_value());
        port_ = std::stoi(line->substr(line->rfind(':') + 1));
    }
    void stop(int sig) {
        process_->signal(sig);
        (void)process_->wait_for_exit(5s);
        if (!idem::test::stopped_cleanly(process_->reap())) ++unclean_exits_;
    }

    std::string db_;
    bool pooler_;
    std::unique_ptr<idem::test::child_process> process_;
    std::atomic<int> port_{0};
    std::atomic<int> unclean_exits_{0};
};

httplib::Result post(int port, const std::string& path, const std::string& body, const std::string& key) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1s);
    c.set_read_timeout(10s);
    return c.Post(path, {{"Authorization", "Bearer fleet"}, {"Idempotency-Key", key}}, body, "application/json");
}

long long scalar(const std::string& conninfo, const std::string& sql) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    PGresult* r = PQexec(conn, sql.c_str());
    const long long value = PQresultStatus(r) == PGRES_TUPLES_OK ? std::stoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(conn);
    return value;
}

struct transfer {
    int from, to;
    long long amount;
};

void run_fleet(const std::string& direct, const std::string& service_db, bool pooler) {
    std::array<std::unique_ptr<instance>, instances> fleet;
    fleet[0] = std::make_unique<instance>(service_db, pooler);  // migrates and creates the tables
    for (int i = 1; i < instances; ++i) fleet[i] = std::make_unique<instance>(service_db, pooler);
    for (int a = 0; a < accounts; ++a) {
        auto r = post(fleet[a % instances]->port(), "/accounts",
                      "{\"id\":\"acct" + std::to_string(a) + "\",\"balance\":" + std::to_string(opening) + "}",
                      "open-" + std::to_string(a));
        REQUIRE(r);
        REQUIRE(r->status == 201);
    }

    std::vector<transfer> plan;
    std::mt19937 random(16);
    for (int k = 0; k < transfers; ++k) {
        const int from = static_cast<int>(random() % accounts);
        plan.push_back({from, (from + 1 + static_cast<int>(random() % (accounts - 1))) % accounts,
                        1 + static_cast<long long>(random() % 100)});
    }

    std::atomic<bool> spraying{true};
    std::atomic<int> kills{0};
    // An instance is killed every 1.5 s, and at each quarter of the plan at the
    // latest, so that however fast the fleet serves, every run sees its kills.
    std::atomic<int> next{0};
    std::thread killer([&] {
        int victim = 0, quarter = 1;
        auto last = std::chrono::steady_clock::now();
        while (spraying) {
            std::this_thread::sleep_for(10ms);
            const bool marked = quarter < 4 && next >= transfers * quarter / 4;
            if (!spraying || !(marked || std::chrono::steady_clock::now() - last >= 1500ms)) continue;
            if (marked) ++quarter;
            fleet[victim]->restart();
            ++kills;
            victim = (victim + 1) % instances;
            last = std::chrono::steady_clock::now();
        }
    });

    std::atomic<int> attempts{0}, mismatched{0}, unfinished{0}, replays{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < client_threads; ++c)
        clients.emplace_back([&] {
            for (int k = next++; k < transfers; k = next++) {
                const transfer& t = plan[static_cast<std::size_t>(k)];
                const std::string body = "{\"from\":\"acct" + std::to_string(t.from) + "\",\"to\":\"acct" +
                                         std::to_string(t.to) + "\",\"amount\":" + std::to_string(t.amount) + "}";
                const std::string key = "t-" + std::to_string(k);
                std::string first;
                // The first try on one instance, every retry on the next one; a key is done
                // after a 201 and then one replay from another instance.
                int answered_by = -1;
                for (int attempt = 0; attempt < 400; ++attempt) {
                    const int target = (k + attempt) % instances;
                    ++attempts;
                    auto r = post(fleet[target]->port(), "/transfers", body, key);
                    if (r && r->status == 201) {
                        if (first.empty()) {
                            first = r->body;
                            answered_by = target;
                            continue;  // now a duplicate on the next instance
                        }
                        if (target == answered_by) continue;
                        ++replays;
                        if (r->body != first || r->get_header_value("Idempotent-Replayed") != "true") ++mismatched;
                        answered_by = -2;
                        break;
                    }
                    std::this_thread::sleep_for(r && r->status == 409 ? 20ms : 50ms);
                }
                if (answered_by != -2) ++unfinished;
            }
        });
    for (auto& c : clients) c.join();
    spraying = false;
    killer.join();

    std::vector<long long> expected(accounts, opening);
    for (const transfer& t : plan) {
        expected[static_cast<std::size_t>(t.from)] -= t.amount;
        expected[static_cast<std::size_t>(t.to)] += t.amount;
    }
    MESSAGE(transfers, " transfers over ", instances, " instances",
            std::string(pooler ? " through PgBouncer" : " directly"), ": ", attempts.load(), " requests, ",
            kills.load(), " SIGKILLs and restarts, ", replays.load(), " cross-instance replays");
    CHECK(unfinished == 0);
    CHECK(mismatched == 0);
    CHECK(kills >= 2);
    CHECK(scalar(direct, "SELECT count(*) FROM transfers") == transfers);
    CHECK(scalar(direct, "SELECT sum(balance) FROM accounts") == accounts * opening);
    for (int a = 0; a < accounts; ++a)
        CHECK(scalar(direct, "SELECT balance FROM accounts WHERE id = 'acct" + std::to_string(a) + "'") ==
              expected[static_cast<std::size_t>(a)]);
}

}  // namespace

TEST_CASE("a fleet of 3 payments services on one ledger, instances SIGKILLed and restarted under traffic") {
    idem::test::postgres_server server;
    SUBCASE("through PgBouncer in transaction pooling") {
        idem::test::scratch_database bank(server.conninfo(), "fleet");
        idem::test::pgbouncer pooler(server.port(), {.pool_mode = "transaction", .pool_size = 6});
        run_fleet(bank.conninfo(), uri(pooler.port(), bank.name()), true);
    }
    SUBCASE("directly on PostgreSQL") {
        idem::test::scratch_database bank(server.conninfo(), "fleet");
        run_fleet(bank.conninfo(), uri(server.port(), bank.name()), false);
    }
}
