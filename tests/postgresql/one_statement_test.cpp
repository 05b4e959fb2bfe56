// The one-statement form (idem/detail/run_owned.hpp, behind db.once): the same results
// as reserving first inside the transaction, in fewer round trips on PostgreSQL.
#include <doctest/doctest.h>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include <atomic>
#include <barrier>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "executor_fixture.hpp"
#include "idem/memory_store.hpp"
#include "key_hex.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;
using bank::business_failure;
using idem::execution_status;
using idem::reservation_status;
using idem::unit_of_work;
using idem::test::executor_fixture;

// Counts the round trips a session makes: every message after which libpq
// waits for the server (a simple Query, or the Sync that ends an extended-protocol batch).
class round_trips {
public:
    explicit round_trips(soci::session& session)
        : conn_(static_cast<soci::postgresql_session_backend*>(session.get_backend())->conn_), trace_(std::tmpfile()) {
        REQUIRE(trace_ != nullptr);
        PQtrace(conn_, trace_);
        PQsetTraceFlags(conn_, PQTRACE_SUPPRESS_TIMESTAMPS);
    }
    ~round_trips() {
        PQuntrace(conn_);
        std::fclose(trace_);
    }
    round_trips(const round_trips&) = delete;
    round_trips& operator=(const round_trips&) = delete;

    int count() {
        int n = 0;
        each_sent([&](std::string_view l) {
            n += waits(l) ? 1 : 0;
            return true;
        });
        return n;
    }
    // Whether a message sent since the last reset() carried `command` (BEGIN, COMMIT).
    bool sent(std::string_view command) {
        bool found = false;
        each_sent([&](std::string_view l) {
            found = carries(l, command);
            return !found;
        });
        return found;
    }
    // The round trips completed before the first message that carried `command`.
    int before(std::string_view command) {
        int n = 0;
        each_sent([&](std::string_view l) {
            if (carries(l, command)) return false;
            n += waits(l) ? 1 : 0;
            return true;
        });
        return n;
    }
    void reset() {
        PQuntrace(conn_);
        std::fclose(trace_);
        trace_ = std::tmpfile();
        PQtrace(conn_, trace_);
        PQsetTraceFlags(conn_, PQTRACE_SUPPRESS_TIMESTAMPS);
    }

private:
    // Calls more(line) on each message sent since the last reset(), while it returns true.
    template <class More>
    void each_sent(More more) {
        std::fflush(trace_);
        std::rewind(trace_);
        char line[4096];
        while (std::fgets(line, sizeof line, trace_) != nullptr)
            if (std::string_view(line).starts_with("F\t") && !more(std::string_view(line))) break;
        std::fseek(trace_, 0, SEEK_END);
    }
    // A message after which libpq waits for the server.
    static bool waits(std::string_view line) {
        return line.find("\tSync") != std::string_view::npos || line.find("\tQuery\t") != std::string_view::npos;
    }
    // As text (Query, Parse), or by the name of the store's statement prepared for it (Bind of "idem1_begin").
    static bool carries(std::string_view line, std::string_view command) {
        std::string named = "_";
        for (const char c : command) named += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        named += '"';
        return line.find(command) != std::string_view::npos || line.find(named) != std::string_view::npos;
    }

    PGconn* conn_;
    std::FILE* trace_;
};

struct path {
    const char* name;
    std::function<idem::execution<std::string>(executor_fixture&, const std::string&, idem::execution_options,
                                               const char*)>
        transfer;
};

const path plain{"runner.run + executor.execute(tx)",
                 [](executor_fixture& f, const std::string& key, idem::execution_options o, const char* fp) {
                     return f.transfer(key, o, fp);
                 }};
const path fast{"execute_in_transaction", [](executor_fixture& f, const std::string& key, idem::execution_options o,
                                             const char* fp) { return f.transfer_fast(key, o, fp); }};

// A completed record of its own, replayed on `runner` until the lookups of its
// connection go out before BEGIN (a replay is then one round trip): as in a
// burst of retries. Touches no business row.
void replay_until_lookups_go_first(executor_fixture& f, idem::transaction_runner& runner) {
    const idem::record_key primer = bank::transfer_key("primer");
    auto r = f.store->try_reserve(primer, bank::fingerprint, 1min);
    if (r.status == reservation_status::reserved)
        REQUIRE(f.store->complete(primer, r.token, bank::fingerprint, "primed", 1h));
    round_trips trips(runner.session());
    for (int i = 0; i < 16; ++i) {
        trips.reset();
        const auto e = idem::detail::execute_in_transaction(
            f.exec, runner, primer, bank::fingerprint, {},
            [](unit_of_work&) -> std::string { throw std::logic_error("a replay ran the operation"); }, f.codec);
        REQUIRE(e.status() == execution_status::replayed);
        REQUIRE(e.value() == "primed");
        if (trips.count() == 1 && !trips.sent("BEGIN")) return;
    }
    FAIL("the replays kept sending BEGIN");
}

// One of several duplicate transfers of `key`, each on its own connection:
// its work waits at `inside` until every duplicate has looked the key up.
struct duplicates {
    executor_fixture& f;
    std::string key;
    std::barrier<>& inside;
    std::atomic<int> executed{0}, replayed{0};

    void run(idem::transaction_runner& runner) {
        auto e = idem::detail::execute_in_transaction(
            f.exec, runner, bank::transfer_key(key), bank::fingerprint, {},
            [&](unit_of_work& tx) {
                ++f.runs;
                inside.arrive_and_wait();
                bank::move_money(tx.sql(), key, 10);
                return std::string("moved 10");
            },
            f.codec);
        if (e.status() == execution_status::executed) ++executed;
        if (e.status() == execution_status::replayed && e.value() == "moved 10") ++replayed;
    }
};

}  // namespace

TEST_CASE("execute_in_transaction gives the same results as the plain form") {
    for (const path& p : {plain, fast}) {
        CAPTURE(p.name);
        executor_fixture f;
        auto first = p.transfer(f, "k-1", {}, bank::fingerprint);
        CHECK(first.status() == execution_status::executed);
        CHECK(first.value() == "moved 10");
        auto again = p.transfer(f, "k-1", {}, bank::fingerprint);
        CHECK(again.status() == execution_status::replayed);
        CHECK(again.value() == "moved 10");
        CHECK(p.transfer(f, "k-1", {}, "another transfer").status() == execution_status::key_reused);

        // A lease-mode reservation of the key elsewhere: in flight, nothing runs.
        auto held = f.store->try_reserve(bank::transfer_key("k-2"), bank::fingerprint, 1min);
        REQUIRE(held.status == reservation_status::reserved);
        CHECK(p.transfer(f, "k-2", {}, bank::fingerprint).status() == execution_status::in_flight);
        REQUIRE(f.store->release(bank::transfer_key("k-2"), held.token));
        CHECK(p.transfer(f, "k-2", {}, bank::fingerprint).status() == execution_status::executed);

        // Observe and off run the operation every time.
        CHECK(p.transfer(f, "k-3", {.mode = idem::mode::observe}, bank::fingerprint).status() ==
              execution_status::executed);
        auto observed = p.transfer(f, "k-3", {.mode = idem::mode::observe}, bank::fingerprint);
        CHECK(observed.enforce_decision() == execution_status::replayed);
        CHECK(p.transfer(f, "k-4", {.mode = idem::mode::off}, bank::fingerprint).status() ==
              execution_status::executed);
        CHECK(f.record("k-4") == reservation_status::reserved);  // off writes no record

        CHECK(f.runs == 5);
        CHECK(f.ledger() == 5);
        CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 50);
        for (const char* key : {"k-1", "k-2", "k-3"}) CHECK(f.record(key) == reservation_status::completed);
        CHECK(f.runner->last_state() == idem::transaction_state::committed);
    }
}

TEST_CASE("execute_in_transaction rolls back with the operation and with should_commit") {
    executor_fixture f;
    CHECK_THROWS_AS(idem::detail::execute_in_transaction(
                        f.exec, *f.runner, bank::transfer_key("r-1"), bank::fingerprint, {},
                        [&](unit_of_work& tx) -> std::string {
                            bank::move_money(tx.sql(), "r-1", 10);
                            throw business_failure();
                        },
                        f.codec),
                    business_failure);
    CHECK(f.runner->last_state() == idem::transaction_state::rolled_back);
    CHECK(f.ledger() == 0);
    CHECK(f.record("r-1") == reservation_status::reserved);

    auto declined = idem::detail::execute_in_transaction(f.exec, *f.runner, bank::transfer_key("r-2"),
                                                         bank::fingerprint, {}, f.operation("r-2"), f.codec,
                                                         [](const idem::execution<std::string>&) { return false; });
    CHECK(declined.status() == execution_status::executed);
    CHECK(f.runner->last_state() == idem::transaction_state::rolled_back);
    CHECK(f.ledger() == 0);
    CHECK(f.record("r-2") == reservation_status::reserved);  // the record went with the rollback
    CHECK(f.transfer_fast("r-2").status() == execution_status::executed);
    CHECK(f.ledger() == 1);
}

TEST_CASE("execute_in_transaction: a completing statement that completes nothing fails the commit") {
    executor_fixture f;
    // The operation hands the key to another token behind the executor's back:
    // the record can no longer be completed, so nothing may commit.
    try {
        (void)idem::detail::execute_in_transaction(
            f.exec, *f.runner, bank::transfer_key("c-1"), bank::fingerprint, {.reserve_first = true},
            [&](unit_of_work& tx) {
                bank::move_money(tx.sql(), "c-1", 10);
                tx.sql() << "UPDATE idem_records SET token = 'stolen'::bytea"
                            " WHERE key_hash = '\\x" +
                                idem::test::record_id_hex(bank::transfer_key("c-1")) + "'";
                return std::string("moved 10");
            },
            f.codec);
        FAIL("the commit went through");
    } catch (const idem::store_error& e) {
        CHECK(e.native_code() == "22P02");
        CHECK(std::string(e.what()).find("completing a record at commit failed: the record was not completed") !=
              std::string::npos);
        CHECK(std::string(e.what()).find("c-1") == std::string::npos);
    }
    CHECK(f.runner->last_state() == idem::transaction_state::rolled_back);
    CHECK(f.ledger() == 0);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance);
    CHECK(f.transfer_fast("c-1").status() == execution_status::executed);
    CHECK(f.ledger() == 1);
}

TEST_CASE("execute_in_transaction costs no round trip beyond the bare transaction on postgresql") {
    executor_fixture f;
    (void)f.transfer_fast("warm-up");  // prepares the store's statements on this connection
    (void)f.transfer("warm-up-plain");
    round_trips trips(f.session);

    f.runner->run([&](unit_of_work& tx) { bank::move_money(tx.sql(), "bare", 10); });
    const int bare = trips.count();
    trips.reset();
    CHECK(f.transfer_fast("rt-1").status() == execution_status::executed);
    const int with_idem = trips.count();
    trips.reset();
    CHECK(f.transfer_fast("rt-1").status() == execution_status::replayed);
    const int replay = trips.count();
    trips.reset();
    CHECK(f.transfer("rt-2").status() == execution_status::executed);
    const int plain_form = trips.count();
    trips.reset();
    CHECK(f.transfer_fast("rt-3", {.reserve_first = true}).status() == execution_status::executed);
    const int reserving = trips.count();
    trips.reset();
    CHECK(f.transfer_fast("rt-3", {.reserve_first = true}).status() == execution_status::replayed);
    const int reserving_replay = trips.count();
    MESSAGE("round trips: bare transfer " << bare << ", with execute_in_transaction " << with_idem << ", replayed "
                                          << replay << ", reserving first " << reserving << ", replayed "
                                          << reserving_replay << ", runner.run + executor.execute " << plain_form);
    CHECK(bare == 5);              // BEGIN, 2 UPDATEs, INSERT, COMMIT
    CHECK(with_idem == bare);      // BEGIN + lookup, the same 3, record + COMMIT
    CHECK(replay == 2);            // BEGIN + lookup (finds the completed record), COMMIT
    CHECK(reserving == bare);      // BEGIN + reserve, the same 3, complete + COMMIT
    CHECK(reserving_replay == 3);  // BEGIN + reserve (finds the row), lock and read it, COMMIT
    CHECK(plain_form == bare + 2);
}

TEST_CASE("execute_in_transaction: the held BEGIN goes out before anything else uses the transaction") {
    executor_fixture f;
    // Nothing but the operation uses the transaction (off), or a savepoint comes first (observe).
    CHECK(f.transfer_fast("h-1", {.mode = idem::mode::off}).status() == execution_status::executed);
    CHECK(f.transfer_fast("h-2", {.mode = idem::mode::observe}).status() == execution_status::executed);
    CHECK(f.record("h-2") == reservation_status::completed);

    // A store that cannot join transactions: the operation's writes still run in the transaction.
    idem::executor memory{std::make_shared<idem::memory_store>()};
    CHECK_THROWS_AS(idem::detail::execute_in_transaction(
                        memory, *f.runner, bank::transfer_key("h-3"), bank::fingerprint, {},
                        [&](unit_of_work& tx) -> std::string {
                            bank::move_money(tx.sql(), "h-3", 10);
                            throw business_failure();
                        },
                        f.codec),
                    business_failure);
    CHECK(f.ledger() == 2);

    // Inside a transaction the runner already has open: joined behind a savepoint, rolled back with it.
    CHECK_THROWS_AS(f.runner->run([&](unit_of_work& tx) {
        bank::move_money(tx.sql(), "outer", 10);
        CHECK(f.transfer_fast("h-4").status() == execution_status::executed);
        throw business_failure();
    }),
                    business_failure);
    CHECK(f.ledger() == 2);
    CHECK(f.record("h-4") == reservation_status::reserved);
    f.runner->run([&](unit_of_work&) { CHECK(f.transfer_fast("h-5").status() == execution_status::executed); });
    CHECK(f.record("h-5") == reservation_status::completed);
    CHECK(f.ledger() == 3);
}

TEST_CASE("execute_in_transaction: a duplicate waits for the first commit, then replays") {
    executor_fixture f;
    std::promise<void> started;
    std::jthread first([&] {
        auto e = idem::detail::execute_in_transaction(
            f.exec, *f.runner, bank::transfer_key("w-1"), bank::fingerprint, {},
            [&](unit_of_work& tx) {
                bank::move_money(tx.sql(), "w-1", 10);
                started.set_value();
                std::this_thread::sleep_for(300ms);
                return std::string("moved 10");
            },
            f.codec);
        CHECK(e.status() == execution_status::executed);
    });
    started.get_future().wait();
    executor_fixture::connection other(*f.database);
    const auto begun = std::chrono::steady_clock::now();
    auto e = idem::detail::execute_in_transaction(f.exec, *other.runner, bank::transfer_key("w-1"), bank::fingerprint,
                                                  {}, f.operation("w-1"), f.codec);
    const auto waited = std::chrono::steady_clock::now() - begun;
    first.join();
    CHECK(e.status() == execution_status::replayed);
    CHECK(e.value() == "moved 10");
    CHECK(waited >= 200ms);
    CHECK(f.ledger() == 1);
}

TEST_CASE("execute_in_transaction: duplicates on their own connections all run; one commits, the others replay") {
    executor_fixture f;
    constexpr int threads = 5;
    std::vector<std::unique_ptr<executor_fixture::connection>> connections;
    for (int t = 0; t < threads; ++t)
        connections.push_back(std::make_unique<executor_fixture::connection>(*f.database));
    std::barrier<> all_inside(threads);  // nobody commits before every duplicate has looked the key up
    duplicates d1{f, "d-1", all_inside};
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { d1.run(*connections[t]->runner); });
    pool.clear();
    CHECK(f.runs == threads);
    CHECK(d1.executed == 1);
    CHECK(d1.replayed == threads - 1);
    CHECK(f.ledger() == 1);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(f.sink->count(idem::outcome::executed, idem::mode::enforce) == 1);
    CHECK(f.sink->count(idem::outcome::replay, idem::mode::enforce) == threads - 1);

    // Another fingerprint loses the same way and answers key_reused.
    std::barrier two_inside(2);
    std::atomic<int> reused{0};
    for (const char* fp : {"one transfer", "another transfer"})
        pool.emplace_back([&, fp] {
            auto e = idem::detail::execute_in_transaction(
                f.exec, *connections[fp[0] == 'o' ? 0 : 1]->runner, bank::transfer_key("d-2"), fp, {},
                [&](unit_of_work& tx) {
                    two_inside.arrive_and_wait();
                    bank::move_money(tx.sql(), "d-2", 10);
                    return std::string("moved 10");
                },
                f.codec);
            if (e.status() == execution_status::key_reused) ++reused;
        });
    pool.clear();
    CHECK(reused == 1);
    CHECK(f.ledger() == 2);
}

TEST_CASE("execute_in_transaction: a throwing operation leaves nothing, and a kept-in-flight result holds the key") {
    executor_fixture f;
    CHECK_THROWS_AS(idem::detail::execute_in_transaction(
                        f.exec, *f.runner, bank::transfer_key("t-1"), bank::fingerprint, {},
                        [&](unit_of_work& tx) -> std::string {
                            bank::move_money(tx.sql(), "t-1", 10);
                            throw business_failure();
                        },
                        f.codec),
                    business_failure);
    CHECK(f.runner->last_state() == idem::transaction_state::rolled_back);
    CHECK(f.record("t-1") == reservation_status::reserved);  // no record: the probe could reserve it
    CHECK(f.ledger() == 0);

    const auto pending = idem::make_codec<std::string>(
        [](const std::string& s) { return s; }, [](std::string_view s) { return std::string(s); },
        [](const std::string&) { return idem::classification::keep_in_flight; });
    CHECK(idem::detail::execute_in_transaction(f.exec, *f.runner, bank::transfer_key("t-2"), bank::fingerprint, {},
                                               f.operation("t-2"), pending)
              .status() == execution_status::executed);
    CHECK(f.record("t-2") == reservation_status::in_flight);
    CHECK(f.transfer_fast("t-2").status() == execution_status::in_flight);
    CHECK(f.ledger() == 1);
}

TEST_CASE("execute_in_transaction: while lookups find records, a replay is one round trip and opens no transaction") {
    executor_fixture f;
    (void)f.transfer_fast("warm-up");  // prepares the store's statements on this connection
    round_trips trips(f.session);
    f.runner->run([&](unit_of_work& tx) { bank::move_money(tx.sql(), "bare", 10); });
    const int bare = trips.count();
    CHECK(f.transfer_fast("q-1").status() == execution_status::executed);
    replay_until_lookups_go_first(f, *f.runner);

    trips.reset();
    auto replay = f.transfer_fast("q-1");
    CHECK(replay.status() == execution_status::replayed);
    CHECK(replay.value() == "moved 10");
    CHECK(trips.count() == 1);
    CHECK_FALSE(trips.sent("BEGIN"));
    CHECK_FALSE(trips.sent("COMMIT"));
    trips.reset();
    CHECK(f.transfer_fast("q-1", {}, "another transfer").status() == execution_status::key_reused);
    CHECK(trips.count() == 1);
    CHECK(f.runner->last_state() == idem::transaction_state::committed);

    // A call that runs its work there sends BEGIN alone, after the lookup and
    // before the work: one round trip more than bare, until calls that run
    // their work are most of the connection's lookups again.
    int executed = 4;  // warm-up, bare, q-1, q-2
    trips.reset();
    CHECK(f.transfer_fast("q-2").status() == execution_status::executed);
    CHECK(trips.count() == bare + 1);
    CHECK(trips.before("BEGIN") == 1);
    bool back = false;
    for (int i = 0; i < 8 && !back; ++i) {
        trips.reset();
        CHECK(f.transfer_fast("q-3-" + std::to_string(i)).status() == execution_status::executed);
        ++executed;
        back = trips.count() == bare;
        if (!back) CHECK(trips.count() == bare + 1);
    }
    CHECK(back);
    CHECK(trips.before("BEGIN") == 0);  // with the lookup again
    CHECK(f.ledger() == executed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10 * executed);
}

TEST_CASE(
    "execute_in_transaction, lookups before BEGIN: the work runs in the transaction however it reaches the session") {
    executor_fixture f;
    replay_until_lookups_go_first(f, *f.runner);
    round_trips trips(f.session);
    // The work writes through the session itself, not tx.sql(), then throws: its writes roll back.
    CHECK_THROWS_AS(idem::detail::execute_in_transaction(
                        f.exec, *f.runner, bank::transfer_key("b-1"), bank::fingerprint, {},
                        [&](unit_of_work&) -> std::string {
                            bank::move_money(f.session, "b-1", 10);
                            throw business_failure();
                        },
                        f.codec),
                    business_failure);
    CHECK(trips.before("BEGIN") == 1);  // the lookup went first
    CHECK(f.runner->last_state() == idem::transaction_state::rolled_back);
    CHECK(f.ledger() == 0);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance);
    CHECK(f.record("b-1") == reservation_status::reserved);

    // The same work returning commits its writes with the record.
    trips.reset();
    auto e = idem::detail::execute_in_transaction(
        f.exec, *f.runner, bank::transfer_key("b-1"), bank::fingerprint, {},
        [&](unit_of_work&) {
            bank::move_money(f.session, "b-1", 10);
            return std::string("moved 10");
        },
        f.codec);
    CHECK(e.status() == execution_status::executed);
    CHECK(trips.before("BEGIN") == 1);
    CHECK(f.ledger() == 1);
    CHECK(f.record("b-1") == reservation_status::completed);

    // Observe and off on the same connection: the operation runs, in its transaction.
    CHECK(f.transfer_fast("b-2", {.mode = idem::mode::observe}).status() == execution_status::executed);
    CHECK(f.record("b-2") == reservation_status::completed);
    CHECK(f.transfer_fast("b-2", {.mode = idem::mode::observe}).enforce_decision() == execution_status::replayed);
    CHECK(f.transfer_fast("b-3", {.mode = idem::mode::off}).status() == execution_status::executed);
    CHECK(f.record("b-3") == reservation_status::reserved);
    CHECK(f.ledger() == 4);
    CHECK(bank::balance(f.session, "bob") == bank::opening_balance + 40);
}

namespace {

// Waits until a backend of the test database waits for a lock another transaction holds.
void wait_for_a_lock_wait(soci::session& admin) {
    for (int i = 0; i < 1000; ++i) {
        long long waiting = 0;
        admin << "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND datname = current_database()",
            soci::into(waiting);
        if (waiting > 0) return;
        std::this_thread::sleep_for(10ms);
    }
    FAIL("no backend ever waited for the lock");
}

// Runs `call` on another thread while a transaction on the fixture's connection
// holds what hold(tx) locked, and commits that transaction once the call waits for it.
template <class Call>
auto while_held(executor_fixture& f, soci::session& admin, const std::function<void(unit_of_work&)>& hold, Call call) {
    std::promise<void> locked, go;
    std::jthread holder([&] {
        f.runner->run([&](unit_of_work& tx) {
            hold(tx);
            locked.set_value();
            go.get_future().wait();
        });
    });
    locked.get_future().wait();
    auto answer = std::async(std::launch::async, call);
    wait_for_a_lock_wait(admin);
    go.set_value();
    holder.join();
    return answer.get();
}

}  // namespace

TEST_CASE("execute_in_transaction, lookups before BEGIN: a record completed or expired after the lookup decides") {
    executor_fixture f;
    executor_fixture::connection other(*f.database);
    replay_until_lookups_go_first(f, *other.runner);
    soci::session admin;
    f.database->connect(admin);
    round_trips trips(other.session);

    // In flight under a lease-mode reservation, whose completion holds the row
    // while the lookup reads the reservation: the reserve that follows waits for
    // it, then replays the completed record without running the work.
    auto held = f.store->try_reserve(bank::transfer_key("x-1"), bank::fingerprint, 1min);
    REQUIRE(held.status == reservation_status::reserved);
    const auto call = [&](const std::string& key) {
        return [&f, &other, key] {
            return idem::detail::execute_in_transaction(f.exec, *other.runner, bank::transfer_key(key),
                                                        bank::fingerprint, {}, f.operation(key), f.codec);
        };
    };
    auto e = while_held(
        f, admin,
        [&](unit_of_work& tx) {
            REQUIRE(f.store->complete(tx, bank::transfer_key("x-1"), held.token, bank::fingerprint, "moved 10", 1h));
        },
        call("x-1"));
    CHECK(e.status() == execution_status::replayed);
    CHECK(e.value() == "moved 10");
    CHECK(trips.before("BEGIN") == 1);  // the lookup went first
    CHECK(f.runs == 0);

    // Expired by the transaction holding the row meanwhile: the waiting reserve takes it over, and the work runs.
    trips.reset();
    auto stale = f.store->try_reserve(bank::transfer_key("x-2"), bank::fingerprint, 1min);
    REQUIRE(stale.status == reservation_status::reserved);
    auto taken = while_held(
        f, admin,
        [&](unit_of_work& tx) {
            tx.sql() << "UPDATE idem_records SET expires_at = now() - interval '1 second' WHERE key_hash = '\\x" +
                            idem::test::record_id_hex(bank::transfer_key("x-2")) + "'";
        },
        call("x-2"));
    CHECK(taken.status() == execution_status::executed);
    CHECK(trips.before("BEGIN") == 1);
    CHECK(f.runs == 1);
    CHECK(f.ledger() == 1);
    CHECK(f.record("x-2") == reservation_status::completed);
    CHECK(f.store->complete(bank::transfer_key("x-2"), stale.token, bank::fingerprint, "stale", 1h) == false);
}

TEST_CASE("execute_in_transaction, lookups before BEGIN: duplicates that both ran: one commits, the other replays") {
    executor_fixture f;
    executor_fixture::connection other(*f.database);
    replay_until_lookups_go_first(f, *f.runner);
    replay_until_lookups_go_first(f, *other.runner);
    std::barrier<> both_inside(2);  // neither commits before both have looked the key up and found nothing
    duplicates d9{f, "d-9", both_inside};
    {
        std::jthread first([&] { d9.run(*f.runner); });
        d9.run(*other.runner);
    }
    CHECK(f.runs == 2);
    CHECK(d9.executed == 1);
    CHECK(d9.replayed == 1);
    CHECK(f.ledger() == 1);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
}

TEST_CASE(
    "execute_in_transaction, lookups before BEGIN: the transaction's isolation level decides, not the session's") {
    executor_fixture f;
    idem::transaction_runner read_committed(f.session, {.isolation = idem::isolation_level::read_committed});
    replay_until_lookups_go_first(f, read_committed);
    replay_until_lookups_go_first(f, *f.runner);
    f.session << "SET default_transaction_isolation = 'serializable'";
    round_trips trips(f.session);

    // BEGIN names READ COMMITTED: the lookup before it runs at the session's level, which does not count.
    CHECK(idem::detail::execute_in_transaction(f.exec, read_committed, bank::transfer_key("i-1"), bank::fingerprint, {},
                                               f.operation("i-1"), f.codec)
              .status() == execution_status::executed);
    CHECK(trips.before("BEGIN") == 1);
    CHECK(idem::detail::execute_in_transaction(f.exec, read_committed, bank::transfer_key("i-1"), bank::fingerprint, {},
                                               f.operation("i-1"), f.codec)
              .status() == execution_status::replayed);

    // BEGIN names no level: the session's is the transaction's, and refused before any work.
    const auto refused = [&](idem::transaction_runner& runner, const std::string& key) {
        try {
            (void)idem::detail::execute_in_transaction(f.exec, runner, bank::transfer_key(key), bank::fingerprint, {},
                                                       f.operation(key), f.codec);
            FAIL("a transaction at SERIALIZABLE or REPEATABLE READ was not refused");
        } catch (const idem::store_error& e) {
            CHECK(e.failure() == idem::store_failure::unsupported);
        }
    };
    refused(*f.runner, "i-2");
    // BEGIN names REPEATABLE READ: the lookup goes with it, and is refused.
    f.session << "SET default_transaction_isolation = 'read committed'";
    idem::transaction_runner repeatable(f.session, {.isolation = idem::isolation_level::repeatable_read});
    refused(repeatable, "i-3");
    CHECK(f.runs == 1);
    CHECK(f.ledger() == 1);
}
