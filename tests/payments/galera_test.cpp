// The payments service on a MariaDB Galera cluster of three nodes, every node
// taking writes (innodb_flush_log_at_trx_commit=1): one service process per
// node, and a retrying client per process. The clients post the same
// transfers with the same Idempotency-Keys, in the same order, between the
// same four accounts, each retry to the next process: a key races on several
// nodes at once, and commits conflict across nodes at COMMIT (certification).
// Then one node is killed and rejoins; then two are killed within a second,
// the survivor is bootstrapped, and the two rejoin. At the end, on every node:
// each answered transfer there once and no other, the balances exact, and
// every key answers its first body from any process.
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

#include "galera_cluster.hpp"
#include "galera_faults.hpp"
#include "payments_service.hpp"
#include "retrying_clients.hpp"

namespace {

using namespace std::chrono_literals;
using idem::test::attempt;
using idem::test::retrying_clients;

constexpr int accounts = 4, nodes = 3;
constexpr long long opening = 1'000'000;

std::string account(int a) {
    return "acct" + std::to_string(a);
}
int from_of(int n) {
    return n % accounts;
}
int to_of(int n) {
    return (n + 1 + n / accounts % (accounts - 1)) % accounts;
}
long long amount_of(int n) {
    return 1 + n % 97;
}

long long certification_failures(const idem::test::galera_cluster& cluster) {
    long long n = 0;
    for (int i = 0; i < cluster.size(); ++i) n += cluster.status(i, "wsrep_local_cert_failures");
    return n;
}

}  // namespace

TEST_CASE(
    "the payments service on Galera: a process per node, clients racing the same keys and hot accounts, through a "
    "killed node and a lost quorum; each transfer applied once, the books exact on every node") {
    idem::test::galera_cluster cluster(nodes, {.flush_log_at_trx_commit = 1, .extra_args = {}});
    std::array<std::unique_ptr<idem::test::payments_service>, nodes> services;
    for (int i = 0; i < nodes; ++i)
        services[static_cast<std::size_t>(i)] =
            std::make_unique<idem::test::payments_service>(idem::test::service_config{
                .db = cluster.connection(i), .extra = {"--answer-timeout", "3000", "--lease", "2"}});
    for (int a = 0; a < accounts; ++a) services[0]->open(account(a), opening);

    std::mutex mutex;
    std::map<int, std::string> first_answers;  // transfer number -> the body of its first 201
    std::map<int, int> statuses;               // answers by status, 0 for no answer
    int mismatched = 0;                        // a 201 whose body differs from the first
    std::array<std::atomic<int>, nodes> tries{};
    std::vector<idem::test::fault_figures> figures;
    std::set<int> numbers;
    {
        retrying_clients load(
            nodes,
            [&](int client, int number, const std::string&) {
                const auto& svc =
                    *services[static_cast<std::size_t>((client + tries[static_cast<std::size_t>(client)]++) % nodes)];
                const auto r =
                    svc.post("/transfers",
                             svc.transfer_body(account(from_of(number)), account(to_of(number)), amount_of(number)),
                             {{"Idempotency-Key", "k" + std::to_string(number)}});
                const std::lock_guard lock(mutex);
                ++statuses[r ? r->status : 0];
                if (r && r->status == 201) {
                    const auto [at, first] = first_answers.emplace(number, r->body);
                    if (!first && at->second != r->body) ++mismatched;
                    return attempt::answered;
                }
                if (r && r->status == 409) return attempt::refused;
                if (r && r->body.find("Idempotency.InDoubt") != std::string::npos) return attempt::in_doubt;
                return attempt::failed;
            },
            5ms);
        std::this_thread::sleep_for(4s);
        figures = idem::test::through_galera_faults(cluster, load);
        std::this_thread::sleep_for(2s);
        load.stop();
        CHECK(load.gave_up() == 0);
        for (const std::string& key : load.answered()) numbers.insert(retrying_clients::call_of(key).second);
    }
    for (const auto& f : figures) {
        MESSAGE(idem::test::describe(f));
        CHECK(f.after_promotion_ms >= 0);
    }
    std::string seen;
    for (const auto& [status, n] : statuses) {
        CAPTURE(status);
        CHECK((status == 201 || status == 409 || status == 503 || status == 0));
        seen += " " + std::to_string(status) + ": " + std::to_string(n) + ";";
    }
    MESSAGE("answers by status (0: none, the process lost its node):" << seen);
    CHECK(mismatched == 0);

    std::vector<long long> expected(accounts, opening);
    for (const int n : numbers) {
        expected[static_cast<std::size_t>(from_of(n))] -= amount_of(n);
        expected[static_cast<std::size_t>(to_of(n))] += amount_of(n);
    }
    for (int i = 0; i < nodes; ++i) {
        CAPTURE(i);
        const auto& svc = *services[static_cast<std::size_t>(i)];
        CHECK(svc.count("SELECT COUNT(*) FROM transfers") == static_cast<long long>(numbers.size()));
        for (int a = 0; a < accounts; ++a) CHECK(svc.balance(account(a)) == expected[static_cast<std::size_t>(a)]);
    }
    std::size_t replayed = 0;
    for (const int n : numbers) {
        const auto& svc = *services[static_cast<std::size_t>(n % nodes)];
        const auto r = svc.post("/transfers", svc.transfer_body(account(from_of(n)), account(to_of(n)), amount_of(n)),
                                {{"Idempotency-Key", "k" + std::to_string(n)}});
        REQUIRE(r);
        const bool same =
            r->status == 201 && r->body == first_answers.at(n) && r->get_header_value("Idempotent-Replayed") == "true";
        CHECK(same);
        replayed += same ? 1 : 0;
    }
    MESSAGE(numbers.size() << " transfers answered, each once on every node, " << replayed
                           << " replayed byte for byte; " << certification_failures(cluster)
                           << " certification failures on the nodes since their last start");
}
