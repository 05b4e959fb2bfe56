// idem::database on a MariaDB Galera cluster of three nodes on loopback, every
// node taking writes (innodb_flush_log_at_trx_commit=1). Six clients run
// db.once on the same keys, in the same order, each through one node and
// every retry through the next: the same key races on several nodes at once,
// and every transfer moves money between the same four accounts, so commits
// conflict across nodes and fail certification at COMMIT. Then one node is
// killed (SIGKILL) and rejoins; then two are killed within a second, the
// survivor (without quorum: 1047 to every statement) is bootstrapped as the
// primary component, and the two rejoin. At the end, on every node: each
// answered key ran once, the balances are exact, and every key replays.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "galera_cluster.hpp"
#include "galera_faults.hpp"
#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "idem/error.hpp"
#include "idem/mapping.hpp"
#include "idem/outbox_relay.hpp"
#include "retrying_clients.hpp"
#include "steps_bank.hpp"

namespace {

using namespace std::chrono_literals;
using idem::execution_status;
using idem::test::attempt;
using idem::test::retrying_clients;

constexpr int accounts = 4, client_count = 6;
constexpr long long opening = 1'000'000;

idem::record_key key_of(int number) {
    return {"bank.transfer", idem::scope::tenant("acme"), "k" + std::to_string(number)};
}

// Transfer number n: the same on every node and every retry.
int from_of(int n) {
    return n % accounts;
}
int to_of(int n) {
    return (n + 1 + n / accounts % (accounts - 1)) % accounts;
}
long long amount_of(int n) {
    return 1 + n % 97;
}

std::string transfer(idem::unit_of_work& uow, int n) {
    const long long amount = amount_of(n);
    const std::string from = "a" + std::to_string(from_of(n)), to = "a" + std::to_string(to_of(n));
    uow.sql() << "UPDATE accounts SET balance = balance - :m WHERE id = :a", soci::use(amount), soci::use(from);
    uow.sql() << "UPDATE accounts SET balance = balance + :m WHERE id = :a", soci::use(amount), soci::use(to);
    uow.sql() << "INSERT INTO transfers (n) VALUES (:n)", soci::use(n);  // no key: a transfer run twice shows twice
    // In order per block of ten transfers (an account, say).
    (void)uow.publish({.topic = "moved", .payload = std::to_string(n), .ordering_key = "b" + std::to_string(n / 10)});
    return "moved " + std::to_string(amount);
}

long long scalar(idem::database& db, const std::string& sql) {
    return db.read([&](soci::session& s) {
        long long v = -1;
        s << sql, soci::into(v);
        return v;
    });
}

// Mapped accounts, one with a version column and one without (read FOR UPDATE).
struct versioned {
    std::string id;
    long long balance = 0;
    long long version = 0;
};
struct unversioned {
    std::string id;
    long long balance = 0;
};

}  // namespace

template <>
struct idem::mapping<versioned> {
    static constexpr auto table = "versioned";
    static constexpr auto columns =
        idem::columns(idem::key("id", &versioned::id), idem::column("balance", &versioned::balance),
                      idem::version("version", &versioned::version));
};
template <>
struct idem::mapping<unversioned> {
    static constexpr auto table = "unversioned";
    static constexpr auto columns =
        idem::columns(idem::key("id", &unversioned::id), idem::column("balance", &unversioned::balance));
};

namespace {}  // namespace

TEST_CASE(
    "galera: three nodes take writes on the same keys and hot accounts, through a killed node and a lost quorum; "
    "each key runs once, the books exact on every node") {
    idem::test::galera_cluster cluster(3, {.flush_log_at_trx_commit = 1, .extra_args = {}});
    std::vector<std::unique_ptr<idem::database>> nodes;
    for (int i = 0; i < cluster.size(); ++i)
        nodes.push_back(std::make_unique<idem::database>(idem::database::open(
            cluster.connection(i), {.pool_size = 4, .attempts = 9, .backoff = 5ms, .answer_timeout = 3s})));
    nodes[0]->migrate();
    nodes[0]->transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id VARCHAR(8) PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB";
        for (int a = 0; a < accounts; ++a)
            uow.sql() << "INSERT INTO accounts VALUES ('a" + std::to_string(a) + "', " + std::to_string(opening) + ")";
        uow.sql() << "CREATE TABLE transfers (seq BIGINT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL) ENGINE = InnoDB";
    });

    // Relays on two nodes deliver the transfers' events the whole time.
    std::mutex delivered_mutex;
    std::vector<idem::outbox_delivery> delivered;
    auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
        const std::lock_guard lock(delivered_mutex);
        delivered.push_back(m);
        return idem::delivery_result::delivered();
    });
    std::vector<std::unique_ptr<idem::outbox_relay>> relays;
    for (int i = 1; i <= 2; ++i) {
        relays.push_back(std::make_unique<idem::outbox_relay>(
            *nodes[static_cast<std::size_t>(i)], sink,
            idem::outbox_relay_options{.batch = 20, .lease = 2000ms, .idle_wait = 5ms}));
        relays.back()->start();
    }

    // Payments in three steps (a hold, a provider's charge, a settle) left half
    // done by a provider that did not answer, for completers on two nodes to
    // finish through the faults; the provider answers again before them.
    namespace bank = idem::test::steps_bank;
    bank::create_tables(*nodes[0]);
    std::atomic<bool> provider_down{true};
    const auto provider = [&](const std::string& point) {
        if (point == "charging" && provider_down) throw std::runtime_error("the provider did not answer");
    };
    constexpr int payments = 20;
    // Each node's completer with the operation bound to that node's database.
    const idem::operation<std::string> payment_on_0 = bank::payment(*nodes[0], provider, 1000);
    const idem::operation<std::string> payment_on_2 = bank::payment(*nodes[2], provider, 1000);
    for (int i = 0; i < payments; ++i)
        CHECK_THROWS((void)bank::pay_with(payment_on_0, *nodes[0], "op" + std::to_string(i), 1));
    const idem::completer_options completing{.batch = 4,
                                             .threads = 1,
                                             .idle_wait = 20ms,
                                             .first_backoff = 100ms,
                                             .max_backoff = 500ms,
                                             .execution = {.lease = 2s}};
    std::array<std::unique_ptr<idem::completer>, 2> completers{
        std::make_unique<idem::completer>(
            *nodes[0], std::vector<std::reference_wrapper<const idem::any_operation>>{payment_on_0}, completing),
        std::make_unique<idem::completer>(
            *nodes[2], std::vector<std::reference_wrapper<const idem::any_operation>>{payment_on_2}, completing)};
    for (auto& c : completers) c->start();

    std::atomic<int> spread{1};  // how many nodes the clients use: 1, then all
    std::array<std::atomic<int>, client_count> tries{};
    std::atomic<int> not_executed{0};
    retrying_clients load(
        client_count,
        [&](int client, int number, const std::string&) {
            // Each client starts on a node of its own and retries on the next.
            const int node = (client + tries[static_cast<std::size_t>(client)]++) % spread;
            try {
                auto e = nodes[static_cast<std::size_t>(node)]->once(
                    key_of(number), "fp", [&](idem::unit_of_work& uow) { return transfer(uow, number); });
                if (e.status() == execution_status::executed || e.status() == execution_status::replayed)
                    return attempt::answered;
                ++not_executed;  // in flight on another node: asked again
                return attempt::refused;
            } catch (const idem::transaction_in_doubt&) {
                return attempt::in_doubt;
            } catch (const idem::error&) {
                return attempt::failed;
            }
        },
        5ms);

    // Transfers per second through one node, then through all three, and the
    // certification failures those cost.
    for (const int used : {1, 3}) {
        const auto f = idem::test::through_nodes(cluster, load, spread, used);
        MESSAGE(idem::test::describe(f));
        if (used == 3) CHECK(f.certification_failures > 0);  // the clients did race across nodes
    }

    provider_down = false;
    const auto figures = idem::test::through_galera_faults(cluster, load);
    std::this_thread::sleep_for(2s);
    load.stop();
    CHECK(load.gave_up() == 0);
    for (const auto& f : figures) {
        MESSAGE(idem::test::describe(f));
        CHECK(f.after_promotion_ms >= 0);
    }

    // The completers finished every payment, each step once.
    const auto unfinished = [&] { return scalar(*nodes[2], "SELECT COUNT(*) FROM idem_operations WHERE state <> 1"); };
    const auto completer_deadline = std::chrono::steady_clock::now() + 60s;
    while (unfinished() != 0 && std::chrono::steady_clock::now() < completer_deadline)
        std::this_thread::sleep_for(50ms);
    for (auto& c : completers) c->stop();
    CHECK(unfinished() == 0);
    for (const char* step : {"hold", "settle"}) {
        CAPTURE(step);
        CHECK(scalar(*nodes[1], std::string("SELECT COUNT(*) FROM effects WHERE step = '") + step + "'") == payments);
        CHECK(scalar(*nodes[1], std::string("SELECT COUNT(DISTINCT op) FROM effects WHERE step = '") + step + "'") ==
              payments);
    }
    CHECK(scalar(*nodes[1], "SELECT COUNT(*) FROM provider_charges") == payments);
    MESSAGE("completers on two nodes finished " << payments << " payments (" << completers[0]->metrics().completed
                                                << " and " << completers[1]->metrics().completed << "), "
                                                << scalar(*nodes[1], "SELECT COUNT(*) FROM provider_requests")
                                                << " requests to the provider for " << payments << " charges");

    std::set<int> numbers;
    for (const std::string& key : load.answered()) numbers.insert(retrying_clients::call_of(key).second);
    std::vector<long long> expected(accounts, opening);
    for (const int n : numbers) {
        expected[static_cast<std::size_t>(from_of(n))] -= amount_of(n);
        expected[static_cast<std::size_t>(to_of(n))] += amount_of(n);
    }
    for (int i = 0; i < cluster.size(); ++i) {
        CAPTURE(i);
        idem::database& db = *nodes[static_cast<std::size_t>(i)];
        // Each answered transfer once, and none that was not answered.
        CHECK(scalar(db, "SELECT COUNT(*) FROM transfers") == static_cast<long long>(numbers.size()));
        CHECK(scalar(db, "SELECT COUNT(DISTINCT n) FROM transfers") == static_cast<long long>(numbers.size()));
        for (int a = 0; a < accounts; ++a)
            CHECK(scalar(db, "SELECT balance FROM accounts WHERE id = 'a" + std::to_string(a) + "'") ==
                  expected[static_cast<std::size_t>(a)]);
    }
    // Every key replays, on every node.
    std::size_t replayed = 0;
    for (const int n : numbers) {
        auto e = nodes[static_cast<std::size_t>(n % cluster.size())]->once(key_of(n), "fp",
                                                                           [](idem::unit_of_work&) -> std::string {
                                                                               FAIL("an answered key ran again");
                                                                               return {};
                                                                           });
        replayed += e.status() == execution_status::replayed ? 1 : 0;
    }
    CHECK(replayed == numbers.size());

    // Every answered transfer's event arrives, in order per block; none for a
    // transfer that is not there; the two relays shared the work.
    std::set<std::string> ids;
    std::map<std::string, std::vector<int>> firsts;  // per ordering key, transfer numbers in first-delivery order
    std::size_t phantoms = 0, redelivered = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
        ids.clear();
        firsts.clear();
        phantoms = redelivered = 0;
        std::set<int> arrived;
        {
            const std::lock_guard lock(delivered_mutex);
            for (const auto& m : delivered) {
                if (!ids.insert(m.id).second) {
                    ++redelivered;
                    continue;
                }
                const int n = std::stoi(m.payload);
                arrived.insert(n);
                if (numbers.count(n) == 0) ++phantoms;
                firsts[m.ordering_key.value_or("")].push_back(n);
            }
        }
        const bool all = std::includes(arrived.begin(), arrived.end(), numbers.begin(), numbers.end());
        if (all || std::chrono::steady_clock::now() > deadline) {
            CHECK(all);
            break;
        }
        std::this_thread::sleep_for(20ms);
    }
    for (auto& relay : relays) relay->stop();
    for (const auto& [block, order] : firsts) {
        CAPTURE(block);
        CHECK(std::is_sorted(order.begin(), order.end()));
    }
    CHECK(phantoms == 0);
    CHECK(relays[0]->metrics().delivered > 0);
    CHECK(relays[1]->metrics().delivered > 0);
    MESSAGE(ids.size() << " events delivered by two relays on two nodes (" << relays[0]->metrics().delivered << " and "
                       << relays[1]->metrics().delivered << "; " << redelivered << " delivered again), " << phantoms
                       << " phantoms");
    MESSAGE(numbers.size() << " transfers answered (" << load.answered().size() << " answers to " << client_count
                           << " clients racing the same keys), " << not_executed.load()
                           << " answered in flight and asked again; " << cluster.certification_failures()
                           << " certification failures on the nodes since their last start");
}

TEST_CASE(
    "galera: a key committed through one node replays through another at once, without running; mapped accounts "
    "updated through three nodes at once lose no update") {
    idem::test::galera_cluster cluster(3, {.flush_log_at_trx_commit = 2, .extra_args = {}});
    std::vector<std::unique_ptr<idem::database>> nodes;
    for (int i = 0; i < cluster.size(); ++i)
        nodes.push_back(std::make_unique<idem::database>(
            idem::database::open(cluster.connection(i), {.pool_size = 4, .attempts = 20, .backoff = 2ms})));
    nodes[0]->migrate();

    // Causal reads (wsrep_sync_wait, set by idem on a Galera node): the lookup on
    // node 1 waits until node 1 has applied node 0's commit, so the work never runs there.
    constexpr int keys = 200;
    int ran_again = 0, replayed = 0;
    for (int n = 0; n < keys; ++n) {
        (void)nodes[0]->once(key_of(n), "fp", [](idem::unit_of_work&) { return std::string("first"); });
        auto e = nodes[1]->once(key_of(n), "fp", [&](idem::unit_of_work&) {
            ++ran_again;
            return std::string("again");
        });
        replayed += e.status() == execution_status::replayed && e.value() == "first" ? 1 : 0;
    }
    CHECK(ran_again == 0);
    CHECK(replayed == keys);

    nodes[0]->transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE versioned (id VARCHAR(8) PRIMARY KEY, balance BIGINT NOT NULL, version BIGINT NOT "
                     "NULL) ENGINE = InnoDB";
        uow.sql() << "CREATE TABLE unversioned (id VARCHAR(8) PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB";
        uow.sql() << "INSERT INTO versioned VALUES ('x', 0, 1)";
        uow.sql() << "INSERT INTO unversioned VALUES ('x', 0)";
    });
    // Two threads per node add 1 to each account, 100 times each: a unit of work
    // that lost a race (a version moved, or certification at COMMIT) runs again.
    constexpr int threads_per_node = 2, adds = 100;
    std::atomic<int> gave_up{0}, in_doubt{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < cluster.size() * threads_per_node; ++t)
        threads.emplace_back([&, t] {
            idem::database& db = *nodes[static_cast<std::size_t>(t % cluster.size())];
            for (int i = 0; i < adds; ++i) {
                bool done = false;
                for (int attempt = 0; attempt < 50 && !done; ++attempt) {
                    try {
                        db.transact([](idem::unit_of_work& uow) {
                            uow.get<versioned>("x").balance += 1;
                            uow.get<unversioned>("x").balance += 1;
                        });
                        done = true;
                    } catch (const idem::transaction_in_doubt& e) {
                        std::string why = e.what();
                        try {
                            std::rethrow_if_nested(e);
                        } catch (const std::exception& cause) {
                            why += std::string(" <- ") + cause.what();
                        }
                        MESSAGE("in doubt: " << why);
                        ++in_doubt;  // with every node up, none is expected: checked below
                        done = true;
                    } catch (const idem::error&) {
                        // lost the race more times than the retry budget: once more
                    }
                }
                if (!done) ++gave_up;
            }
        });
    for (auto& t : threads) t.join();
    CHECK(gave_up == 0);
    CHECK(in_doubt == 0);
    const long long total = static_cast<long long>(cluster.size()) * threads_per_node * adds;
    for (int i = 0; i < cluster.size(); ++i) {
        CAPTURE(i);
        CHECK(scalar(*nodes[static_cast<std::size_t>(i)], "SELECT balance FROM versioned") == total);
        CHECK(scalar(*nodes[static_cast<std::size_t>(i)], "SELECT version FROM versioned") == total + 1);
        CHECK(scalar(*nodes[static_cast<std::size_t>(i)], "SELECT balance FROM unversioned") == total);
    }
    MESSAGE(total << " adds through " << cluster.size() << " nodes, none lost; " << cluster.certification_failures()
                  << " certification failures");
}
