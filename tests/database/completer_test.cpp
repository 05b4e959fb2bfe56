// idem::completer on real SQLite files and a throwaway PostgreSQL: operations
// whose request died (a worker process SIGKILLed between steps and inside the
// call) finished by the completer with each step once; compensation after
// failed runs; the fencing token against a late original; concurrent
// completers; inspect, unfinished and purge of operations.
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bank_places.hpp"
#include "child_process.hpp"
#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "recording_sink.hpp"
#include "steps_bank.hpp"

namespace {

using namespace std::chrono_literals;
using idem::execution_status;
using idem::operation_phase;
using namespace idem::test;
namespace bank = idem::test::steps_bank;
using bank::ran;

idem::database open_payments(const place& where) {
    idem::database db = open_bank(where);
    bank::create_tables(db);
    return db;
}

// A completer that does not wait: passes 5 ms apart, a failed run due again at once.
idem::completer_options quick(idem::completer_options o = {}) {
    o.idle_wait = 5ms;
    o.first_backoff = 0ms;
    o.max_backoff = 0ms;
    return o;
}

struct provider_down : std::runtime_error {
    provider_down() : std::runtime_error("the provider did not answer in time") {}
};

// A hook that makes the provider time out while `down` is set.
bank::crash_hook outage(const std::atomic<bool>& down) {
    return [&down](const std::string& point) {
        if (point == "charging" && down) throw provider_down();
    };
}

idem::operation_state state_of(idem::database& db, const std::string& op) {
    auto s = idem::inspect_operation(db, bank::key_of(op));
    REQUIRE(s.has_value());
    return *s;
}

// Waits until `done` holds (a minute at most, on a loaded machine).
template <class Done>
bool eventually(Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

}  // namespace

TEST_CASE(
    "completer: a request SIGKILLed between steps or inside the call is finished by the completer, each step once") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        const auto payment = bank::payment(db);
        idem::completer completer(db, {payment}, quick());
        // A request that died holding a live lease (ten minutes): the completer leaves it alone.
        {
            spawn_options run;
            run.argv = {IDEM_STEPS_WORKER, "operation", where->url(), "live", "600000", "hold"};
            run.pipe_stdout = true;
            child_process worker(run);
            REQUIRE(worker.read_line(30s) == "at hold");
            worker.signal(SIGKILL);
            CHECK(stopped_cleanly(worker.reap()));
            CHECK(completer.run_once() == 0);
            CHECK(state_of(db, "live").completions == 0);
        }
        long long paid = 0;
        for (const std::string point : {"hold", "charge", "charged"}) {
            CAPTURE(point);
            const std::string op = "abandoned-at-" + point;
            spawn_options run;
            run.argv = {IDEM_STEPS_WORKER, "operation", where->url(), op, "600", point};
            run.pipe_stdout = true;
            child_process worker(run);
            REQUIRE(worker.read_line(30s) == "at " + point);
            worker.signal(SIGKILL);
            CHECK(stopped_cleanly(worker.reap()));
            // What the dead request left: its recovery point, and the call made or answered.
            const idem::operation_state left = state_of(db, op);
            CHECK(left.phase == operation_phase::running);
            CHECK(left.input_bytes == bank::payment_input_of(op, 25).size());
            CHECK(left.recovery_point == (point == "charged" ? 2u : 1u));
            CHECK(left.steps.size() == (point == "hold" ? 1u : 2u));
            if (point == "charge") CHECK_FALSE(left.steps[1].answered);
            // Once its lease (600 ms) ended, the completer takes it over.
            CHECK(eventually([&] { return completer.run_once() == 1; }));
            paid += 25;
            const idem::operation_state done = state_of(db, op);
            CHECK(done.phase == operation_phase::completed);
            CHECK(done.completions == 1);
            CHECK(done.fence == 2);
            CHECK(done.recovery_point == 3);
            CHECK(ran(db, op, "hold") == 1);
            CHECK(ran(db, op, "settle") == 1);
            CHECK(balance(db, "alice") == 1000000 - 25 - paid);  // and the live one's hold
            CHECK(balance(db, "bob") == paid);
            // The client's retry gets the completer's result.
            auto retry = bank::pay_with(payment, db, op, 25);
            CHECK(retry.status() == execution_status::replayed);
            CHECK(retry.value().starts_with("held/ch_"));
            CHECK(retry.value().ends_with("/settled"));
        }
        // Killed inside the call: the provider got the same call key twice and charged once.
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_requests") == 4);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_charges") == 3);
        CHECK(completer.metrics().completed == 3);
        CHECK(completer.metrics().failed == 0);
    }
}

TEST_CASE("completer: after compensate_after failed runs it runs the compensation; the retry replays its answer") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<bool> down{true};
        const auto payment = bank::payment(db, outage(down), 2);
        idem::completer completer(db, {payment}, quick());
        // The request holds the funds, then the provider does not answer.
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "c", 40), provider_down);
        CHECK(balance(db, "alice") == 1000000 - 40);
        // Two runs of the completer fail (the provider is still down) and are kept for operators.
        CHECK(completer.run_once() == 1);
        CHECK(completer.run_once() == 1);
        idem::operation_state failing = state_of(db, "c");
        CHECK(failing.phase == operation_phase::running);
        CHECK(failing.completions == 2);
        CHECK(failing.last_error == "the provider did not answer in time");
        CHECK(failing.steps.at(1).attempts == 3);  // the request's call and the completer's two
        // The third compensates: the charge is voided by its call key, the hold released.
        CHECK(completer.run_once() == 1);
        const idem::operation_state undone = state_of(db, "c");
        CHECK(undone.phase == operation_phase::compensated);
        CHECK(undone.completions == 3);
        REQUIRE(undone.compensate_from == 2u);
        REQUIRE(undone.steps.size() == 4);
        CHECK(undone.steps[2].name == "void");
        CHECK(undone.steps[2].compensation);
        CHECK(undone.steps[3].name == "release");
        CHECK(undone.steps[3].result == "compensated");
        CHECK_FALSE(undone.steps[1].compensation);
        CHECK(balance(db, "alice") == 1000000);
        CHECK(ran(db, "c", "hold") == 1);
        CHECK(ran(db, "c", "release") == 1);
        CHECK(ran(db, "c", "settle") == 0);
        const idem::completer_metrics m = completer.metrics();
        CHECK(m.failed == 2);
        CHECK(m.compensated == 1);
        CHECK(m.completed == 0);
        // The provider is back: the retry still gets the compensation's answer, and nothing runs.
        down = false;
        auto retry = bank::pay_with(payment, db, "c", 40);
        CHECK(retry.status() == execution_status::replayed);
        CHECK(retry.value() == "compensated");
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_charges") == 0);
        CHECK(completer.run_once() == 0);
    }
}

TEST_CASE("completer: runs that died (SIGKILL) are no failed runs; compensate_after counts the runs that failed") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<bool> down{true};
        const auto payment = bank::payment(db, outage(down), 1);
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "d", 30), provider_down);  // the request's: not counted
        down = false;
        // Two completers (compensate_after 1) take it over and are SIGKILLed inside the call.
        for (int killed = 1; killed <= 2; ++killed) {
            CAPTURE(killed);
            spawn_options run;
            run.argv = {IDEM_STEPS_WORKER, "complete", where->url(), "200", "charge"};
            run.pipe_stdout = true;
            child_process worker(run);
            REQUIRE(worker.read_line(60s) == "at charge");
            worker.signal(SIGKILL);
            CHECK(stopped_cleanly(worker.reap()));
            const idem::operation_state s = state_of(db, "d");
            CHECK(s.completions == killed);
            CHECK(s.failures == 0);
        }
        // The third run completes it: nothing failed, so nothing is undone.
        idem::completer completer(db, {payment}, quick());
        CHECK(eventually([&] { return completer.run_once() == 1; }));
        const idem::operation_state done = state_of(db, "d");
        CHECK(done.phase == operation_phase::completed);
        CHECK(done.completions == 3);
        CHECK(done.failures == 0);
        CHECK_FALSE(done.compensate_from.has_value());
        CHECK(ran(db, "d", "settle") == 1);
        CHECK(ran(db, "d", "release") == 0);
        // The killed runs' calls had the same call key: one charge.
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_charges") == 1);
        CHECK(balance(db, "bob") == 30);
    }
}

TEST_CASE(
    "completer: a row it cannot take over, or a run that throws no std::exception, fails alone; the pass goes on") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<int> odd_throws{0};
        std::atomic<bool> down{false};
        const auto payment = bank::payment(db, [&](const std::string& point) {
            if (point != "charging") return;
            if (odd_throws > 0) {
                --odd_throws;
                throw 42;  // what no std::exception is
            }
            if (down) throw provider_down();
        });
        auto sink = std::make_shared<recording_sink>();
        idem::completer completer(db, {payment}, quick({.telemetry = sink}));

        SUBCASE("its stored input is not the hex idem writes") {
            down = true;
            for (const std::string op : {"poison", "a", "b"})
                CHECK_THROWS_AS((void)bank::pay_with(payment, db, op, 5), provider_down);
            down = false;
            const std::string poison = state_of(db, "poison").record_id;
            db.transact([&](idem::unit_of_work& uow) {
                uow.sql() << "UPDATE idem_operations SET input = 'not hex' WHERE record_id = :id", soci::use(poison);
            });
            std::size_t found = 0;
            CHECK_NOTHROW(found = completer.run_once());
            CHECK(found == 3);
            CHECK(state_of(db, "a").phase == operation_phase::completed);
            CHECK(state_of(db, "b").phase == operation_phase::completed);
            const idem::operation_state left = state_of(db, "poison");
            CHECK(left.phase == operation_phase::running);
            CHECK(left.failures == 1);
            CHECK(left.completions == 0);  // its takeover rolled back
            CHECK(left.last_error.find("not the hex idem writes") != std::string::npos);
            CHECK(sink->logged("idem.completer.takeover_failed"));
            CHECK(completer.metrics().failed == 1);
            CHECK(completer.metrics().completed == 2);
        }
        SUBCASE("its run throws an int") {
            odd_throws = 3;  // the requests' two runs and the completer's first
            CHECK_THROWS_AS((void)bank::pay_with(payment, db, "odd", 5), int);
            CHECK_THROWS_AS((void)bank::pay_with(payment, db, "even", 5), int);
            std::size_t found = 0;
            CHECK_NOTHROW(found = completer.run_once());
            CHECK(found == 2);
            const idem::operation_state odd = state_of(db, "odd");
            CHECK(odd.phase == operation_phase::running);
            CHECK(odd.failures == 1);
            CHECK(odd.last_error == "an exception that is no std::exception");
            CHECK(state_of(db, "even").phase == operation_phase::completed);
            CHECK(sink->logged("idem.completer.run_failed"));
        }
        // Its threads go on past them too: one abandoned later is completed.
        down = true;
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "later", 5), provider_down);
        down = false;
        completer.start();
        CHECK(eventually([&] { return state_of(db, "later").phase == operation_phase::completed; }));
        completer.stop();
    }
}

TEST_CASE("completer: marked to compensate where no compensation is registered: the mark goes, and it runs forward") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<bool> down{true};
        const idem::operation<std::string> forward_only{"bank.payment", [&](idem::steps& s) {
                                                            const bank::payment_input p =
                                                                bank::parse_payment(s.input());
                                                            return bank::pay_steps(db, s, p.op, p.amount, outage(down));
                                                        }};
        auto sink = std::make_shared<recording_sink>();
        idem::completer completer(db, {forward_only}, quick({.telemetry = sink}));
        CHECK_THROWS_AS((void)bank::pay_with(forward_only, db, "m", 10), provider_down);
        down = false;
        // A row begun before idem kept whether it compensates, marked by an
        // operator (idem complete --compensate refuses one that says it does not).
        const std::string id = state_of(db, "m").record_id;
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "UPDATE idem_operations SET compensates = NULL, compensate_from = 2 WHERE record_id = :id",
                soci::use(id);
        });
        CHECK(completer.run_once() == 1);
        const idem::operation_state done = state_of(db, "m");
        CHECK(done.phase == operation_phase::completed);
        CHECK_FALSE(done.compensate_from.has_value());
        CHECK(ran(db, "m", "settle") == 1);
        CHECK(sink->logged("idem.completer.no_compensation"));
    }
}

TEST_CASE("completer: while it compensates, a request with the key gets in_flight, never the operation's own steps") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<bool> down{true};
        bool void_fails = true;
        const idem::operation<std::string> payment{"bank.payment",
                                                   [&](idem::steps& s) {
                                                       const bank::payment_input p = bank::parse_payment(s.input());
                                                       return bank::pay_steps(db, s, p.op, p.amount, outage(down));
                                                   },
                                                   {.compensate =
                                                        [&](idem::steps& s) {
                                                            if (std::exchange(void_fails, false))
                                                                throw std::runtime_error("the void did not answer");
                                                            return bank::undo_payment(db, s);
                                                        },
                                                    .compensate_after = 0}};
        idem::completer completer(db, {payment}, quick());
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "w", 10), provider_down);
        down = false;
        CHECK(completer.run_once() == 1);  // compensate_after 0: it compensates at once, and that run fails
        CHECK(state_of(db, "w").phase == operation_phase::compensating);
        // Its lease ended, and the provider is back: still the request does not take it over.
        auto e = bank::pay_with(payment, db, "w", 10);
        CHECK(e.status() == execution_status::in_flight);
        CHECK(ran(db, "w", "settle") == 0);
        CHECK(completer.run_once() == 1);
        CHECK(state_of(db, "w").phase == operation_phase::compensated);
        CHECK(bank::pay_with(payment, db, "w", 10).value() == "compensated");
        CHECK(balance(db, "alice") == 1000000);
    }
}

TEST_CASE("completer: a compensation may name its steps as the operation's; stored() still reads the operation's") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::string forward_key, undo_key;
        const idem::operation<std::string> payment{
            "bank.payment",
            [&](idem::steps& s) {
                s.step("hold", [](idem::unit_of_work&) { return std::string("held 10"); });
                return s.call("charge", [&](const std::string& key) -> std::string {
                    forward_key = key;
                    throw provider_down();
                });
            },
            {.compensate =
                 [&](idem::steps& s) {
                     // The names are checked within one run: the compensation's own "hold" is allowed.
                     const std::string undone = s.step("hold", [&](idem::unit_of_work&) {
                         return "released " + s.stored("hold").value_or("nothing");
                     });
                     // A call of the same name has the same call key: a provider would take it for the charge.
                     undo_key = s.call_key("charge");
                     return undone + ", then " + s.stored("hold").value_or("nothing");
                 },
             .compensate_after = 0}};
        idem::completer completer(db, {payment}, quick());
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "n", 10), provider_down);
        CHECK(completer.run_once() == 1);
        const idem::operation_state undone = state_of(db, "n");
        CHECK(undone.phase == operation_phase::compensated);
        REQUIRE(undone.steps.size() == 3);
        CHECK(undone.steps[0].name == "hold");
        CHECK_FALSE(undone.steps[0].compensation);
        CHECK(undone.steps[2].name == "hold");
        CHECK(undone.steps[2].compensation);
        CHECK(undone.steps[2].result == "released held 10");
        CHECK(bank::pay_with(payment, db, "n", 10).value() == "released held 10, then held 10");
        CHECK(undo_key == forward_key);
    }
}

TEST_CASE("completer: a late original cannot write a step after the completer took it over") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        idem::completer_options options = quick();
        options.execution.lease = 10min;
        std::atomic<int> charges{0};
        std::promise<void> completer_calling, original_failed;
        std::shared_future<void> completer_is_calling = completer_calling.get_future().share();
        std::shared_future<void> original_has_failed = original_failed.get_future().share();
        std::future<std::size_t> taken;
        // The request's call outlives its lease; the completer takes the operation over
        // and, while its own call is under way, the request's call returns.
        const idem::operation<std::string> payment{
            "bank.payment", [&](idem::steps& s) {
                const bank::payment_input p = bank::parse_payment(s.input());
                return bank::pay_steps(db, s, p.op, p.amount, [&](const std::string& point) {
                    if (point != "charge") return;
                    if (charges++ == 0) {  // the request's: the provider is slow, and the lease ends
                        REQUIRE(eventually([&] { return state_of(db, "late").expired(); }));
                        taken = std::async(std::launch::async, [&] {
                            idem::completer completer(db, {payment}, options);
                            return completer.run_once();
                        });
                        REQUIRE(completer_is_calling.wait_for(5min) == std::future_status::ready);
                    } else {  // the completer's: it goes on once the request's run failed
                        completer_calling.set_value();
                        if (original_has_failed.wait_for(5min) != std::future_status::ready)
                            throw std::runtime_error("the request's run never failed");
                    }
                });
            }};
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "late", 25, {.lease = 300ms}), idem::lease_lost);
        original_failed.set_value();
        REQUIRE(taken.valid());
        REQUIRE(taken.wait_for(5min) == std::future_status::ready);
        CHECK(taken.get() == 1);
        const idem::operation_state done = state_of(db, "late");
        CHECK(done.phase == operation_phase::completed);
        CHECK(done.fence == 2);
        CHECK(done.steps.at(1).attempts == 2);
        CHECK(ran(db, "late", "hold") == 1);
        CHECK(ran(db, "late", "settle") == 1);
        CHECK(balance(db, "bob") == 25);
        // The provider saw the call key twice and charged once.
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_requests") == 2);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_charges") == 1);
    }
}

TEST_CASE("completer: two completers of two threads each share 60 abandoned operations, each step once") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<bool> down{true};
        const auto payment = bank::payment(db, outage(down));
        constexpr int operations = 60;
        for (int i = 0; i < operations; ++i)
            CHECK_THROWS_AS((void)bank::pay_with(payment, db, "op" + std::to_string(i), 1), provider_down);
        down = false;
        auto metrics = std::make_shared<idem::metrics_sink>();
        idem::completer first(db, {payment},
                              quick({.batch = 8, .threads = 2, .report_every = 1ms, .telemetry = metrics}));
        idem::completer second(db, {payment}, quick({.batch = 8, .threads = 2}));
        // start() and stop() from several threads at once, then for good.
        std::vector<std::thread> togglers;
        for (int t = 0; t < 4; ++t)
            togglers.emplace_back([&, t] {
                idem::completer& c = t % 2 == 0 ? first : second;
                for (int i = 0; i < 5; ++i) {
                    c.start();
                    c.stop();
                }
            });
        for (std::thread& t : togglers) t.join();
        first.start();
        second.start();
        CHECK(first.running());
        CHECK(eventually(
            [&] { return count_rows(db, "SELECT COUNT(*) FROM idem_operations WHERE state = 1") == operations; }));
        // The figures the first one reports, in the Prometheus text.
        CHECK(eventually([&] { return metrics->completer().unfinished == 0; }));
        first.stop();
        second.stop();
        CHECK_FALSE(first.running());
        CHECK(count_rows(db, "SELECT COUNT(*) FROM effects WHERE step = 'hold'") == operations);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM effects WHERE step = 'settle'") == operations);
        CHECK(count_rows(db, "SELECT COUNT(DISTINCT op) FROM effects WHERE step = 'settle'") == operations);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_charges") == operations);
        CHECK(balance(db, "bob") == operations);
        CHECK(first.metrics().completed + second.metrics().completed == operations);
        CHECK(metrics->render_prometheus().find("idem_completer_completed_total ") != std::string::npos);
        CHECK(metrics->completer().completed == first.metrics().completed);
    }
}

TEST_CASE("completer: unregistered namespaces are left alone; the table's figures; options are checked") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        const auto payment = bank::payment(db);
        idem::completer completer(db, {payment}, quick());
        const idem::record_key other{"other.work", idem::scope::tenant("acme"), "k"};
        CHECK_THROWS_AS((void)db.steps(other, "fp",
                                       [](idem::steps& s) {
                                           s.step("a", [](idem::unit_of_work&) { return 1; });
                                           throw std::runtime_error("stop");
                                           return 0;
                                       }),
                        std::runtime_error);
        std::this_thread::sleep_for(20ms);
        CHECK(completer.run_once() == 0);
        const idem::completer_metrics m = completer.metrics();
        CHECK(m.unfinished == 1);
        CHECK(m.overdue == 1);
        CHECK(m.lag > 0ms);
        const auto listed = idem::unfinished_operations(db);
        REQUIRE(listed.size() == 1);
        CHECK(listed[0].name_space == "other.work");
        CHECK(listed[0].recovery_point == 1);
        CHECK(listed[0].expired());
        CHECK(idem::unfinished_operations(db, "bank.payment").empty());
        CHECK_THROWS_AS((void)idem::unfinished_operations(db, "", 0), std::invalid_argument);

        CHECK_THROWS_AS(idem::completer(db, {}, {}), idem::options_error);
        CHECK_THROWS_AS(idem::completer(db, {payment, payment}, {}), idem::options_error);
        CHECK_THROWS_AS(idem::completer(db, {payment}, {.batch = 0}), idem::options_error);
        CHECK_THROWS_AS(idem::completer(db, {payment}, {.threads = 65}), idem::options_error);
        CHECK_THROWS_AS(idem::completer(db, {payment}, {.first_backoff = 2s, .max_backoff = 1s}), idem::options_error);
        CHECK_THROWS_AS(idem::operation<std::string>("", [](idem::steps&) { return std::string(); }),
                        std::invalid_argument);
        CHECK_THROWS_AS(idem::operation<std::string>("ns", nullptr), std::invalid_argument);
        CHECK_THROWS_AS(
            idem::operation<std::string>("ns", [](idem::steps&) { return std::string(); }, {.compensate_after = -1}),
            std::invalid_argument);
        // A key of another namespace than the operation's.
        CHECK_THROWS_AS((void)payment.run(db, other, "fp", "x"), std::invalid_argument);
    }
}

TEST_CASE("inspect_operation: the recovery point, each step's result and attempts; nothing for an unknown key") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        const auto payment = bank::payment(db);
        CHECK_FALSE(idem::inspect_operation(db, bank::key_of("none")).has_value());
        auto e = bank::pay_with(payment, db, "i", 7);
        REQUIRE(e.status() == execution_status::executed);
        const idem::operation_state s = state_of(db, "i");
        CHECK(s.name_space == "bank.payment");
        CHECK(s.record_id.size() == 32);
        CHECK(s.phase == operation_phase::completed);
        CHECK(s.recovery_point == 3);
        CHECK(s.fence == 1);
        CHECK(s.completions == 0);
        CHECK_FALSE(s.compensate_from.has_value());
        CHECK(s.result == e.value());
        CHECK(s.input_bytes == bank::payment_input_of("i", 7).size());
        CHECK(s.expires_at > s.now);  // retained
        REQUIRE(s.steps.size() == 3);
        CHECK(s.steps[0].name == "hold");
        CHECK(s.steps[0].result == "held");
        CHECK_FALSE(s.steps[0].call);
        CHECK(s.steps[1].name == "charge");
        CHECK(s.steps[1].call);
        CHECK(s.steps[1].answered);
        CHECK(s.steps[1].attempts == 1);
        CHECK(s.steps[1].result.starts_with("ch_"));
        CHECK(s.steps[2].position == 2);
    }
}

TEST_CASE("purge_operations: finished operations past their retention go with their steps, in batches") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::atomic<bool> down{false};
        const auto payment = bank::payment(db, outage(down));
        for (int i = 0; i < 25; ++i)
            REQUIRE(bank::pay_with(payment, db, "old" + std::to_string(i), 1, {.lease = 50ms, .retention = 100ms})
                        .status() == execution_status::executed);
        REQUIRE(bank::pay_with(payment, db, "kept", 1).status() == execution_status::executed);
        down = true;
        CHECK_THROWS_AS((void)bank::pay_with(payment, db, "unfinished", 1, {.lease = 50ms}), provider_down);
        std::this_thread::sleep_for(200ms);
        // Not yet expired for an hour: nothing goes.
        CHECK(idem::purge_operations(db, {.older_than = std::chrono::hours(1)}).deleted == 0);
        const idem::purge_result r = idem::purge_operations(db, {.batch = 10});
        CHECK(r.deleted == 25);
        CHECK(r.batches == 3);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_operations") == 2);
        // The retained one's three steps, the unfinished one's hold and unanswered call.
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps") == 5);
        CHECK(state_of(db, "unfinished").phase == operation_phase::running);
        // A key whose operation was purged starts anew.
        down = false;
        CHECK(bank::pay_with(payment, db, "old0", 1).status() == execution_status::executed);
        CHECK(ran(db, "old0", "hold") == 2);
    }
}
