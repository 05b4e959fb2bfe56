// The payments service on a PostgreSQL cluster that pg_auto_failover manages
// (a monitor and two nodes, synchronous replication, on loopback): two service
// processes on the cluster's multi-host URL, six clients posting transfers,
// each retried with its Idempotency-Key, on the other process, until it is
// answered 201. Through a planned failover, the primary's host killed, and the
// primary frozen past its health check: what the clients saw after each fault
// (answers other than 201, in doubt among them, time to the next 201). The
// planned failover drains the primary of writes first (read-only), as
// docs/ha.md advises: without it pg_auto_failover can lose acknowledged
// commits. At the end, on the last primary: every answered transfer is there
// once and no other, the balances are exact, and every key replays its first
// answer byte for byte.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "auto_failover_cluster.hpp"
#include "cluster_faults.hpp"
#include "payments_service.hpp"
#include "retrying_clients.hpp"

namespace {

using namespace std::chrono_literals;
using idem::test::attempt;
using idem::test::retrying_clients;

constexpr int accounts = 8, client_count = 6;
constexpr long long opening = 1'000'000;

std::string account(int a) {
    return "acct" + std::to_string(a);
}

// The transfer of a client's call: the same body on every retry.
struct planned {
    int from, to;
    long long amount;
};
planned plan(int client, int number) {
    const int from = (client * 3 + number) % accounts;
    return {from, (from + 1 + number % (accounts - 1)) % accounts, 1 + (number * 31 + client) % 100};
}

}  // namespace

TEST_CASE(
    "the payments service on pg_auto_failover: two processes through a planned failover, a killed host and a frozen "
    "primary; each answered transfer applied once, the books exact, every key replays") {
    idem::test::auto_failover_cluster cluster;
    // The bound on a server that stops answering, and the lease of a request
    // whose process lost its session mid-way.
    const idem::test::service_config config{.db = cluster.url(), .extra = {"--answer-timeout", "3000", "--lease", "2"}};
    const std::array<std::unique_ptr<idem::test::payments_service>, 2> services{
        std::make_unique<idem::test::payments_service>(config),  // migrates and creates the tables
        std::make_unique<idem::test::payments_service>(config)};
    for (int a = 0; a < accounts; ++a) services[0]->open(account(a), opening);

    std::mutex mutex;
    std::map<std::string, std::string> first_answers;  // key -> the body of its 201
    std::map<int, int> statuses;                       // answers by status, 0 for no answer
    std::array<std::atomic<int>, client_count> tries{};
    std::vector<idem::test::fault_figures> figures;
    std::vector<std::string> answered;
    std::set<std::string> ids;  // the transfers on the last primary
    idem::test::lost_answers lost;
    {
        retrying_clients load(client_count, [&](int client, int number, const std::string& key) {
            const planned t = plan(client, number);
            // Each retry goes to the other process, as a load balancer may send it.
            const auto& svc = *services[static_cast<std::size_t>(tries[static_cast<std::size_t>(client)]++ % 2)];
            const auto r = svc.post("/transfers", svc.transfer_body(account(t.from), account(t.to), t.amount),
                                    {{"Idempotency-Key", key}});
            const std::lock_guard lock(mutex);
            ++statuses[r ? r->status : 0];
            if (r && r->status == 201) {
                first_answers.emplace(key, r->body);
                return attempt::answered;
            }
            if (r && r->status == 409) return attempt::refused;
            if (r && r->body.find("Idempotency.InDoubt") != std::string::npos) return attempt::in_doubt;
            return attempt::failed;
        });
        figures = idem::test::through_the_faults(cluster, load, {}, /*drained=*/true);
        load.stop();
        CHECK(load.gave_up() == 0);
        answered = load.answered();
        for (const auto& row : idem::test::sql_rows(cluster.url(), "SELECT id FROM transfers")) ids.insert(row.at(0));
        lost = idem::test::lost_answers_of(load, figures, [&](const std::string& key) {
            const std::string& body = first_answers.at(key);
            const auto at = body.find("\"id\":\"") + 6;
            return ids.count(body.substr(at, body.find('"', at) - at)) != 0;
        });
    }
    for (const auto& f : figures) {
        MESSAGE(idem::test::describe(f));
        CHECK(f.after_promotion_ms >= 0);
    }
    {
        std::string seen;
        for (const auto& [status, n] : statuses) seen += " " + std::to_string(status) + ": " + std::to_string(n) + ";";
        MESSAGE("answers by status (0: none, the connection failed):" << seen);
    }
    // A failure is a 503 with a problem to retry on, or no answer while a process
    // lost its server; never a 500 or a refusal of the request itself.
    for (const auto& [status, n] : statuses) {
        CAPTURE(status);
        CHECK((status == 201 || status == 409 || status == 503 || status == 0));
    }

    // On the last primary: each answered transfer once, no other, the books exact.
    // With the primary drained before the planned failover, no fault loses an
    // acknowledged transfer (without the drain, pg_auto_failover's may: docs/ha.md).
    const std::size_t lost_count = lost.in_planned_failover.size() + lost.elsewhere.size();
    CHECK(lost_count == 0);
    CHECK(ids.size() == answered.size() - lost_count);
    if (lost_count > 0)
        MESSAGE(lost.in_planned_failover.size() << " acknowledged transfers lost in the planned failover, "
                                                << lost.elsewhere.size() << " elsewhere; the monitor's events:\n"
                                                << cluster.events());
    std::vector<long long> expected(accounts, opening);
    for (const std::string& key : answered) {
        if (lost.in_planned_failover.count(key) + lost.elsewhere.count(key) != 0) continue;
        const auto [client, number] = retrying_clients::call_of(key);
        const planned t = plan(client, number);
        expected[static_cast<std::size_t>(t.from)] -= t.amount;
        expected[static_cast<std::size_t>(t.to)] += t.amount;
    }
    for (const auto& row : idem::test::sql_rows(cluster.url(), "SELECT id, balance FROM accounts")) {
        CAPTURE(row.at(0));
        CHECK(std::stoll(row.at(1)) == expected.at(static_cast<std::size_t>(std::stoi(row.at(0).substr(4)))));
    }

    // Every key the cluster kept replays its first answer, from either process.
    std::size_t replayed = 0;
    for (std::size_t i = 0; i < answered.size(); ++i) {
        const std::string& key = answered[i];
        if (lost.in_planned_failover.count(key) + lost.elsewhere.count(key) != 0) continue;
        const auto [client, number] = retrying_clients::call_of(key);
        const planned t = plan(client, number);
        const auto& svc = *services[i % 2];
        const auto r = svc.post("/transfers", svc.transfer_body(account(t.from), account(t.to), t.amount),
                                {{"Idempotency-Key", key}});
        REQUIRE(r);
        const bool same = r->status == 201 && r->body == first_answers.at(key) &&
                          r->get_header_value("Idempotent-Replayed") == "true";
        CHECK(same);
        replayed += same ? 1 : 0;
    }
    MESSAGE(answered.size() << " transfers answered, " << ids.size() << " on the last primary, " << lost_count
                            << " answered and lost, " << replayed << " replayed byte for byte");
}
