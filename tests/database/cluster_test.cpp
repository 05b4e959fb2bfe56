// idem::database on a PostgreSQL cluster that pg_auto_failover manages (a
// monitor and two nodes, synchronous replication, on loopback), through the
// faults a service meets, each under load: a planned failover, the primary's
// host killed (SIGKILL to its pg_autoctl, postgres and backends at once), and
// the primary frozen (SIGSTOP) past the monitor's health check, then resumed.
// Four clients run db.once with a fresh key a call, each key retried until it
// is answered, as a client does after a 503 or a lost answer; each transfer
// publishes one outbox event, in order per client and block of ten, that a
// relay delivers the whole time; a completer finishes payments in steps left
// half done before the faults. After each fault: how long until the next write was answered,
// how many attempts failed meanwhile, how many answers were in doubt. At the
// end, on the last primary: no key ran twice, every answered key is there (but
// those pg_auto_failover's planned failover loses, counted apart: cluster_faults.hpp),
// every event of an answered key was delivered in order, no event was
// delivered for a transfer that is not there (a phantom), and each payment's
// steps ran once.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "auto_failover_cluster.hpp"
#include "cluster_faults.hpp"
#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "idem/outbox_relay.hpp"
#include "postgres_server.hpp"
#include "recording_sink.hpp"
#include "retrying_clients.hpp"
#include "steps_bank.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using idem::execution_status;
using idem::test::attempt;
using idem::test::auto_failover_cluster;
using idem::test::retrying_clients;

idem::record_key key_of(const std::string& k) {
    return {"bank.transfer", idem::scope::tenant("acme"), k};
}

// The transfer: money moves, and the key is written beside it, so the books
// say which transfers the surviving history holds, and how many times each.
std::string transfer(idem::unit_of_work& uow, const std::string& key, int client, int i) {
    uow.sql() << "UPDATE accounts SET balance = balance - 1 WHERE id = 'alice'";
    uow.sql() << "UPDATE accounts SET balance = balance + 1 WHERE id = 'bob'";
    uow.sql() << "INSERT INTO transfers (key) VALUES (:k)", soci::use(key);
    // In order per client and block of ten transfers (an account, say): a key's
    // messages go one per relay round, so many keys keep the relay up with the load.
    (void)uow.publish({.topic = "moved",
                       .payload = key,
                       .ordering_key = "c" + std::to_string(client) + "." + std::to_string(i / 10)});
    return "moved 1";
}

// The first value of each row.
std::vector<std::string> column(const std::string& conninfo, const std::string& sql) {
    std::vector<std::string> out;
    for (auto& row : idem::test::sql_rows(conninfo, sql)) out.push_back(row.at(0));
    return out;
}

}  // namespace

TEST_CASE(
    "pg_auto_failover: a planned failover, the primary's host killed, the primary frozen past its health check: "
    "each costs a retry, nothing runs twice, nothing answered is lost") {
    auto_failover_cluster cluster;
    // Reruns that outlast a switch (20 ms doubling, about 5 s in all), and a
    // bound on a server that stops answering.
    idem::database db =
        idem::database::open(cluster.url(), {.pool_size = 4, .attempts = 9, .backoff = 20ms, .answer_timeout = 3s});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "INSERT INTO accounts VALUES ('alice', 1000000), ('bob', 0)";
        uow.sql() << "CREATE TABLE transfers (key TEXT NOT NULL)";  // no key: a transfer run twice shows as two rows
    });

    std::mutex delivered_mutex;
    std::vector<idem::outbox_delivery> delivered;
    auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
        const std::lock_guard lock(delivered_mutex);
        delivered.push_back(m);
        return idem::delivery_result::delivered();
    });
    auto relay_log = std::make_shared<idem::test::recording_sink>();
    idem::outbox_relay relay(db, sink, {.batch = 20, .lease = 2000ms, .idle_wait = 5ms, .telemetry = relay_log});
    relay.start();

    // Payments in three steps (hold, a provider's charge, settle) left half done
    // by requests whose provider did not answer, for a completer to finish
    // across the switches: the provider answers again from the host's death on.
    namespace bank = idem::test::steps_bank;
    bank::create_tables(db);
    std::atomic<bool> provider_down{true};
    const auto payment = bank::payment(
        db,
        [&](const std::string& point) {
            if (point == "charging" && provider_down) throw std::runtime_error("the provider did not answer");
        },
        1000);  // no compensation: each is finished forwards
    constexpr int payments = 20;
    for (int i = 0; i < payments; ++i) CHECK_THROWS((void)bank::pay_with(payment, db, "op" + std::to_string(i), 1));
    idem::completer completer(db, {payment},
                              {.batch = 4,
                               .threads = 2,
                               .idle_wait = 20ms,
                               .first_backoff = 100ms,
                               .max_backoff = 500ms,
                               .execution = {.lease = 2s}});
    completer.start();

    {
        std::atomic<int> not_executed{0};
        retrying_clients load(4, [&](int client, int number, const std::string& key) {
            try {
                auto e = db.once(key_of(key), "fp",
                                 [&](idem::unit_of_work& uow) { return transfer(uow, key, client, number); });
                // replayed: an earlier attempt committed, its answer lost.
                if (e.status() == execution_status::executed || e.status() == execution_status::replayed)
                    return attempt::answered;
                ++not_executed;
                return attempt::refused;
            } catch (const idem::transaction_in_doubt&) {
                return attempt::in_doubt;
            } catch (const idem::error&) {
                return attempt::failed;
            }
        });
        const auto figures = idem::test::through_the_faults(cluster, load, [&] { provider_down = false; });
        load.stop();
        CHECK(load.gave_up() == 0);
        CHECK(not_executed == 0);

        // The completer finished every payment on the last primary, each step once.
        const auto unfinished = [&] {
            return column(cluster.conninfo(cluster.primary()), "SELECT COUNT(*) FROM idem_operations WHERE state <> 1")
                .at(0);
        };
        const auto completer_deadline = clock_type::now() + 60s;
        while (unfinished() != "0" && clock_type::now() < completer_deadline) std::this_thread::sleep_for(50ms);
        completer.stop();
        CHECK(unfinished() == "0");
        const std::string last = cluster.conninfo(cluster.primary());
        for (const char* step : {"hold", "settle"}) {
            CAPTURE(step);
            CHECK(column(last, std::string("SELECT COUNT(*) FROM effects WHERE step = '") + step + "'").at(0) ==
                  std::to_string(payments));
            CHECK(
                column(last, std::string("SELECT COUNT(DISTINCT op) FROM effects WHERE step = '") + step + "'").at(0) ==
                std::to_string(payments));
        }
        CHECK(column(last, "SELECT COUNT(*) FROM provider_charges").at(0) == std::to_string(payments));
        MESSAGE("completer: " << payments << " payments finished across the switches, "
                              << column(last, "SELECT COUNT(*) FROM provider_requests").at(0)
                              << " requests to the provider for " << payments << " charges");

        for (const auto& f : figures) {
            MESSAGE(idem::test::describe(f));
            CHECK(f.after_promotion_ms >= 0);
        }

        const std::string now_primary = cluster.conninfo(cluster.primary());
        const std::vector<std::string> answered = load.answered();
        const std::vector<std::string> rows = column(now_primary, "SELECT key FROM transfers");
        const std::set<std::string> present(rows.begin(), rows.end());
        // Nothing ran twice in the history that survived.
        CHECK(rows.size() == present.size());
        CHECK(column(now_primary, "SELECT balance FROM accounts WHERE id = 'bob'").at(0) ==
              std::to_string(rows.size() + payments));  // a unit per transfer and per payment
        // Every answer a client got is there (synchronous replication), but what
        // pg_auto_failover's planned failover loses (cluster_faults.hpp).
        const idem::test::lost_answers lost =
            idem::test::lost_answers_of(load, figures, [&](const std::string& key) { return present.count(key) != 0; });
        CHECK(lost.elsewhere.empty());
        if (!lost.in_planned_failover.empty() || !lost.elsewhere.empty())
            MESSAGE(lost.in_planned_failover.size() << " acknowledged transfers lost in the planned failover, "
                                                    << lost.elsewhere.size() << " elsewhere; the monitor's events:\n"
                                                    << cluster.events());
        // And each key the cluster kept replays, never runs again.
        for (const std::string& key : answered) {
            if (present.count(key) == 0) continue;
            auto e = db.once(key_of(key), "fp", [](idem::unit_of_work&) -> std::string {
                FAIL("an answered key ran again");
                return {};
            });
            CHECK(e.status() == execution_status::replayed);
        }

        // Every event of an answered transfer arrives, in order per ordering key; none
        // arrives for a transfer the surviving history does not hold.
        std::set<std::string> ids;
        std::map<std::string, std::vector<int>> firsts;  // per ordering key, transfer numbers in first-delivery order
        std::size_t phantoms = 0, lost_events = 0, redelivered = 0;
        const auto deadline = clock_type::now() + 60s;
        for (;;) {
            ids.clear();
            firsts.clear();
            phantoms = lost_events = redelivered = 0;
            std::set<std::string> keys;
            {
                const std::lock_guard lock(delivered_mutex);
                for (const auto& m : delivered) {
                    if (!ids.insert(m.id).second) {
                        ++redelivered;
                        continue;
                    }
                    keys.insert(m.payload);
                    // An event of a transfer the cluster lost: a phantom, unless that
                    // transfer was one of the planned failover's losses (counted apart).
                    if (present.count(m.payload) == 0)
                        ++(lost.in_planned_failover.count(m.payload) != 0 ? lost_events : phantoms);
                    firsts[m.ordering_key.value_or("")].push_back(retrying_clients::call_of(m.payload).second);
                }
            }
            const bool all = std::all_of(answered.begin(), answered.end(),
                                         [&](const auto& k) { return keys.count(k) || !present.count(k); });
            if (all || clock_type::now() > deadline) {
                CHECK(all);
                const auto m = relay.metrics();
                MESSAGE("relay: pending " << m.pending << ", delivered " << m.delivered << ", failed " << m.failed
                                          << ", lag " << m.lag.count() << " ms");
                // What the relay logged through the faults: each event's count and its last message.
                std::map<std::string, std::pair<int, std::string>> events;
                for (const auto& l : relay_log->logs()) events[l.name] = {events[l.name].first + 1, l.message};
                for (const auto& [name, seen] : events)
                    MESSAGE("relay logged " << name << " " << seen.first << " times, last: " << seen.second);
                break;
            }
            std::this_thread::sleep_for(20ms);
        }
        relay.stop();
        for (const auto& [client, numbers] : firsts) {
            CAPTURE(client);
            CHECK(std::is_sorted(numbers.begin(), numbers.end()));
        }
        CHECK(phantoms == 0);
        MESSAGE(answered.size() << " transfers answered, " << rows.size() << " on the last primary, "
                                << lost.in_planned_failover.size() + lost.elsewhere.size() << " answered and lost; "
                                << ids.size() << " events delivered (" << redelivered
                                << " delivered again, receivers dedupe by id), " << phantoms << " phantoms, "
                                << lost_events << " events of transfers the planned failover lost");
    }
}
