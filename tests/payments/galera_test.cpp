// The payments service on a MariaDB Galera cluster of three nodes, every node
// taking writes (innodb_flush_log_at_trx_commit=1): one service process per
// node, and a retrying client per process. The clients post the same
// transfers with the same Idempotency-Keys, in the same order, between the
// same four accounts, each retry to the next process: a key races on several
// nodes at once, and commits conflict across nodes at COMMIT (certification).
// Then one node is killed and rejoins; then two are killed within a second,
// the survivor is bootstrapped, and the two rejoin. Meanwhile `idem relay` on
// two nodes delivers the events the transfers publish to the ledger mirror
// (examples/ledger_mirror, on a SQLite file of its own). At the end, on every
// node: each answered transfer there once and no other, the balances exact,
// every key answers its first body from any process; and downstream, every
// published event applied once, in the order published per account.
#include <doctest/doctest.h>

#include <soci/soci.h>
#include <sys/wait.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "free_port.hpp"
#include "galera_cluster.hpp"
#include "galera_faults.hpp"
#include "idem/database.hpp"
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

// (ordering key, event id) of each row `sql` returns, in its order.
std::vector<std::pair<std::string, std::string>> keyed_ids(idem::database& db, const std::string& sql) {
    return db.read([&](soci::session& session) {
        std::vector<std::pair<std::string, std::string>> out;
        soci::rowset<soci::row> rows = (session.prepare << sql);
        for (const soci::row& row : rows) out.emplace_back(row.get<std::string>(0), row.get<std::string>(1));
        return out;
    });
}

// A process the test starts, its output in a file; SIGTERM stops it cleanly.
std::unique_ptr<idem::test::child_process> start(std::vector<std::string> argv, const std::filesystem::path& log) {
    idem::test::spawn_options o;
    o.argv = std::move(argv);
    o.output_file = log;
    return std::make_unique<idem::test::child_process>(std::move(o));
}
void stop(idem::test::child_process& process, const std::string& name) {
    process.signal(SIGTERM);
    REQUIRE(process.wait_for_exit(30s));
    const int status = process.reap();
    CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), name << " did not stop cleanly: " << status);
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

    // The ledger mirror, fed by a relay on node 1 and one on node 2.
    idem::test::temp_dir mirror_dir{"galera-mirror"};
    const std::string mirror_db = "sqlite:" + (mirror_dir.path() / "mirror.db").string(), secret = "whsec-relay";
    const int mirror_port = idem::test::free_loopback_port();
    const auto mirror =
        start({IDEM_LEDGER_MIRROR_BINARY, "--db", mirror_db, "--port", std::to_string(mirror_port), "--secret", secret},
              mirror_dir.path() / "mirror.log");
    std::vector<std::unique_ptr<idem::test::child_process>> relays;
    for (int node = 1; node < nodes; ++node)
        relays.push_back(
            start({IDEM_BINARY, "relay", "--db", cluster.connection(node), "--to",
                   "http://127.0.0.1:" + std::to_string(mirror_port) + "/events", "--secret", secret, "--batch", "8",
                   "--lease", "2s", "--first-backoff", "200ms", "--max-backoff", "1s", "--max-attempts", "1000"},
                  mirror_dir.path() / ("relay" + std::to_string(node) + ".log")));

    std::mutex mutex;
    std::map<int, std::string> first_answers;  // transfer number -> the body of its first 201
    std::map<int, int> statuses;               // answers by status, 0 for no answer
    int mismatched = 0;                        // a 201 whose body differs from the first
    std::array<std::atomic<int>, nodes> tries{};
    std::atomic<int> spread{1};  // how many processes (and nodes) the clients use: 1, then all
    std::vector<idem::test::fault_figures> figures;
    std::set<int> numbers;
    {
        retrying_clients load(
            nodes,
            [&](int client, int number, const std::string&) {
                const auto& svc =
                    *services[static_cast<std::size_t>((client + tries[static_cast<std::size_t>(client)]++) % spread)];
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
        // Transfers per second through one process (and node), then through all
        // three, and the certification failures those cost.
        for (const int used : {1, nodes})
            MESSAGE(idem::test::describe(idem::test::through_nodes(cluster, load, spread, used)));
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
    // Downstream: every published event applied once by the mirror, none lost,
    // none other, in the order published per account.
    const std::string undelivered =
        "SELECT (SELECT COUNT(*) FROM idem_outbox WHERE state <> 1) + (SELECT COUNT(*) FROM idem_outbox_intake)";
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (services[2]->count(undelivered) > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
    CHECK(services[2]->count(undelivered) == 0);
    std::this_thread::sleep_for(1500ms);  // a claim still held would be delivered again meanwhile
    for (std::size_t i = 0; i < relays.size(); ++i) stop(*relays[i], "relay " + std::to_string(i + 1));
    stop(*mirror, "the ledger mirror");
    idem::database payments_view = idem::database::open(cluster.connection(2));
    idem::database mirror_view = idem::database::open(mirror_db);
    const auto published = keyed_ids(payments_view, "SELECT ordering_key, id FROM idem_outbox ORDER BY seq");
    const auto applied = keyed_ids(mirror_view, "SELECT ordering_key, event_id FROM mirror_events ORDER BY position");
    CHECK(published.size() >= numbers.size());  // a transfer's event, and the accounts' openings'
    CHECK(applied.size() == published.size());
    std::set<std::string> published_ids, applied_ids;
    std::map<std::string, std::vector<std::string>> published_order, applied_order;
    for (const auto& [key, id] : published) {
        published_ids.insert(id);
        published_order[key].push_back(id);
    }
    for (const auto& [key, id] : applied) {
        applied_ids.insert(id);
        applied_order[key].push_back(id);
    }
    CHECK(applied_ids.size() == applied.size());  // none twice
    CHECK(applied_ids == published_ids);          // none lost, none other
    for (const auto& [key, ids] : published_order) {
        CAPTURE(key);
        CHECK(applied_order[key] == ids);
    }

    MESSAGE(numbers.size() << " transfers answered, each once on every node, " << replayed
                           << " replayed byte for byte; " << cluster.certification_failures()
                           << " certification failures on the nodes since their last start; " << applied.size()
                           << " events applied once by the ledger mirror through relays on two nodes");
}
