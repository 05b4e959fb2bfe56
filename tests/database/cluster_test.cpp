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
// end, on the last primary: no key ran twice, every answered key is there,
// every event of an answered key was delivered in order, no event was
// delivered for a transfer that is not there (a phantom), and each payment's
// steps ran once.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <signal.h>

#include <algorithm>
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

#include "auto_failover_cluster.hpp"
#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "idem/outbox_relay.hpp"
#include "postgres_server.hpp"
#include "recording_sink.hpp"
#include "steps_bank.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using idem::execution_status;
using idem::test::auto_failover_cluster;
using ms = std::chrono::milliseconds;

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

// What the clients saw around one fault.
struct fault_figures {
    std::string fault;
    long long to_promotion_ms = 0;      // from the fault to the new primary seen taking writes: the cluster's time
    long long after_promotion_ms = -1;  // from then to the next answer: what idem adds
    long long longest_silence_ms = 0;   // the longest time without any answer, from a second before the fault
    int failed_attempts = 0;            // errors that reached a client (a 503 each), retried with the same key
    int in_doubt = 0;                   // of those, transaction_in_doubt
    std::size_t answered = 0;
};

class clients {
public:
    clients(idem::database& db, int count) : db_(db) {
        for (int c = 0; c < count; ++c) threads_.emplace_back([this, c] { run(c); });
    }
    ~clients() { stop(); }
    clients(const clients&) = delete;
    clients& operator=(const clients&) = delete;

    void stop() {
        stop_ = true;
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }

    // Runs `fault`, which returns when it saw the new primary take writes, lets
    // the load go on for `after`, and reads what the clients saw from a second before it.
    fault_figures through(const std::string& name, const std::function<clock_type::time_point()>& fault,
                          clock_type::duration after) {
        std::this_thread::sleep_for(1s);
        const auto from = clock_type::now();
        const int failed_before = failed_, in_doubt_before = in_doubt_;
        const auto promoted = fault();
        std::this_thread::sleep_for(after);
        fault_figures f{.fault = name, .to_promotion_ms = std::chrono::duration_cast<ms>(promoted - from).count()};
        const std::lock_guard lock(mutex_);
        f.failed_attempts = failed_ - failed_before;
        f.in_doubt = in_doubt_ - in_doubt_before;
        std::vector<clock_type::time_point> answers;
        for (const auto& [started, answered] : calls_) {
            if (answered < from - 1s) continue;
            answers.push_back(answered);
            if (answered >= promoted) {
                const long long took = std::chrono::duration_cast<ms>(answered - promoted).count();
                if (f.after_promotion_ms < 0 || took < f.after_promotion_ms) f.after_promotion_ms = took;
            }
        }
        std::sort(answers.begin(), answers.end());
        for (std::size_t i = 1; i < answers.size(); ++i)
            f.longest_silence_ms = std::max<long long>(
                f.longest_silence_ms, std::chrono::duration_cast<ms>(answers[i] - answers[i - 1]).count());
        f.answered = answers.size();
        return f;
    }

    [[nodiscard]] std::vector<std::string> answered() const {
        const std::lock_guard lock(mutex_);
        return answered_;
    }
    [[nodiscard]] int gave_up() const { return gave_up_; }
    [[nodiscard]] int not_executed() const { return not_executed_; }

private:
    void run(int c) {
        for (int i = 0; !stop_; ++i) {
            const std::string key = "c" + std::to_string(c) + "-" + std::to_string(i);
            const auto started = clock_type::now();
            bool done = false;
            // A client gives up on a key after a minute: far past any failover here.
            while (!done && clock_type::now() - started < 60s) {
                try {
                    auto e =
                        db_.once(key_of(key), "fp", [&](idem::unit_of_work& uow) { return transfer(uow, key, c, i); });
                    // replayed: an earlier attempt committed, its answer lost.
                    done = e.status() == execution_status::executed || e.status() == execution_status::replayed;
                    if (!done) ++not_executed_;
                } catch (const idem::transaction_in_doubt&) {
                    ++failed_;
                    ++in_doubt_;
                } catch (const idem::error&) {
                    ++failed_;
                }
                if (!done) std::this_thread::sleep_for(50ms);
            }
            if (!done) {
                ++gave_up_;
                continue;
            }
            const std::lock_guard lock(mutex_);
            answered_.push_back(key);
            calls_.emplace_back(started, clock_type::now());
        }
    }

    idem::database& db_;
    std::atomic<bool> stop_{false};
    std::atomic<int> failed_{0}, in_doubt_{0}, gave_up_{0}, not_executed_{0};
    mutable std::mutex mutex_;
    std::vector<std::string> answered_;
    std::vector<std::pair<clock_type::time_point, clock_type::time_point>> calls_;  // (started, answered)
    std::vector<std::thread> threads_;
};

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

    std::vector<fault_figures> figures;
    {
        clients load(db, 4);
        figures.push_back(load.through(
            "planned failover (pgautofailover.perform_failover)",
            [&] {
                (void)cluster.perform_failover();
                return clock_type::now();
            },
            2s));
        cluster.wait_stable();  // the old primary follows the new one
        const int killed = cluster.primary();
        REQUIRE(killed >= 0);
        figures.push_back(load.through(
            "the primary's host killed (SIGKILL to the node's whole process tree)",
            [&] {
                cluster.signal_node(killed, SIGKILL);
                provider_down = false;
                (void)cluster.wait_primary_other_than(killed);
                return clock_type::now();
            },
            2s));
        cluster.rejoin(killed);  // under load: it comes back as the standby, replication synchronous again
        const int frozen = cluster.primary();
        REQUIRE(frozen >= 0);
        figures.push_back(load.through(
            "the primary frozen (SIGSTOP) past its health check, then resumed",
            [&] {
                cluster.signal_node(frozen, SIGSTOP);
                (void)cluster.wait_primary_other_than(frozen);
                const auto promoted = clock_type::now();
                std::this_thread::sleep_for(2s);
                cluster.signal_node(frozen, SIGCONT);
                return promoted;
            },
            2s));
        cluster.wait_stable();  // the resumed node learns it was demoted and follows the new primary
        load.stop();
        CHECK(load.gave_up() == 0);
        CHECK(load.not_executed() == 0);

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
            MESSAGE(f.fault << ": the new primary took writes " << f.to_promotion_ms << " ms after the fault, the "
                            << "next answer came " << f.after_promotion_ms << " ms later; longest time without an "
                            << "answer " << f.longest_silence_ms << " ms; " << f.failed_attempts
                            << " failed attempts retried (" << f.in_doubt << " in doubt); " << f.answered
                            << " calls answered from a second before");
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
        // Every answer a client got is there (synchronous replication).
        std::size_t lost = 0;
        for (const std::string& key : answered) lost += present.count(key) == 0 ? 1 : 0;
        CHECK(lost == 0);
        // And each answered key replays, never runs again.
        for (const std::string& key : answered) {
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
        std::size_t phantoms = 0, redelivered = 0;
        const auto deadline = clock_type::now() + 60s;
        for (;;) {
            ids.clear();
            firsts.clear();
            phantoms = redelivered = 0;
            std::set<std::string> keys;
            {
                const std::lock_guard lock(delivered_mutex);
                for (const auto& m : delivered) {
                    if (!ids.insert(m.id).second) {
                        ++redelivered;
                        continue;
                    }
                    keys.insert(m.payload);
                    if (present.count(m.payload) == 0) ++phantoms;
                    firsts[m.ordering_key.value_or("")].push_back(std::stoi(m.payload.substr(m.payload.find('-') + 1)));
                }
            }
            const bool all =
                std::all_of(answered.begin(), answered.end(), [&](const auto& k) { return keys.count(k); });
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
        MESSAGE(answered.size() << " transfers answered, " << rows.size() << " on the last primary, " << lost
                                << " answered and missing; " << ids.size() << " events delivered (" << redelivered
                                << " delivered again, receivers dedupe by id), " << phantoms << " phantoms");
    }
}
