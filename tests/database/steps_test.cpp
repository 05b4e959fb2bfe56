// idem::database::steps on real SQLite files and a throwaway PostgreSQL: steps
// skipped on a rerun, calls made again with the same call key, the operation's
// shape, its lease and fencing token, and real worker processes SIGKILLed
// between steps and inside the call.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <utility>

#include "bank_places.hpp"
#include "child_process.hpp"
#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "idem/keys.hpp"
#include "key_hex.hpp"
#include "steps_bank.hpp"
#ifdef IDEM_TEST_POSTGRESQL
#include "idem/postgresql_store.hpp"
#include "postgres_server.hpp"
#include "slow_commit.hpp"
#include "tcp_proxy.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using idem::execution_status;
using namespace idem::test;
namespace bank = idem::test::steps_bank;
using bank::ran;

idem::database open_payments(const place& where, idem::database_options options = {}) {
    idem::database db = open_bank(where, std::move(options));
    bank::create_tables(db);
    return db;
}

long long attempts(idem::database& db, const std::string& name) {
    return db.read([&](soci::session& sql) {
        long long n = -1;
        sql << "SELECT attempts FROM idem_steps WHERE name = :n", soci::use(name), soci::into(n);
        return n;
    });
}

struct fail_once : std::runtime_error {
    fail_once() : std::runtime_error("the step failed") {}
};

}  // namespace

TEST_CASE("steps: a step, a call and a step run once; a retry replays the final result") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        auto first = bank::pay(db, "p1", 25);
        REQUIRE(first.status() == execution_status::executed);
        auto again = bank::pay(db, "p1", 25);
        CHECK(again.status() == execution_status::replayed);
        CHECK(again.value() == first.value());
        CHECK(first.value().starts_with("held/ch_"));
        CHECK(ran(db, "p1", "hold") == 1);
        CHECK(ran(db, "p1", "settle") == 1);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_requests") == 1);
        CHECK(balance(db, "alice") == 1000000 - 25);
        CHECK(balance(db, "bob") == 25);
        CHECK(count_rows(db, "SELECT recovery_point FROM idem_operations") == 3);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps") == 3);
        // Another request under the key: nothing runs.
        auto other = bank::pay(db, "p1", 30);
        CHECK(other.status() == execution_status::key_reused);
        CHECK(!other.has_value());
        CHECK(balance(db, "alice") == 1000000 - 25);
    }
}

TEST_CASE("steps: the call key is deterministic per record key and step name, and a valid Idempotency-Key") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::string seen_a, seen_b, named;
        auto run = [&](const std::string& op, std::string& seen) {
            return db.steps(bank::key_of(op), "fp", [&](idem::steps& s) {
                named = s.call_key("charge");
                return s.call("charge", [&](const std::string& call_key) { return (seen = call_key); });
            });
        };
        (void)run("a", seen_a);
        (void)run("b", seen_b);
        CHECK(seen_b == named);
        CHECK(seen_a != seen_b);
        CHECK(idem::keys::is_valid(seen_a));
        std::string again;
        idem::database other = idem::database::open(where->url());
        (void)other.steps(bank::key_of("c"), "fp", [&](idem::steps& s) { return (again = s.call_key("charge")); });
        (void)db.steps(bank::key_of("d"), "fp", [&](idem::steps& s) { return s.call_key("charge"); });
        // The same key and name give the same call key, in any process, before and after any run.
        auto c = db.steps(bank::key_of("c"), "fp", [&](idem::steps& s) { return s.call_key("charge"); });
        CHECK(c.status() == execution_status::replayed);
        CHECK(c.value() == again);
    }
}

TEST_CASE("steps: a step that throws rolls back that step only; the retry resumes after the last stored step") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        bool fail = true;
        int holds = 0, settles = 0;
        auto operation = [&](idem::steps& s) {
            s.step("hold", [&](idem::unit_of_work& uow) {
                ++holds;
                bank::effect(uow, "t", "hold");
                return std::string("held");
            });
            return s.step("settle", [&](idem::unit_of_work& uow) {
                ++settles;
                bank::effect(uow, "t", "settle");
                uow.sql() << "UPDATE accounts SET balance = balance + 5 WHERE id = 'bob'";
                if (fail) throw fail_once();
                return std::string("settled");
            });
        };
        CHECK_THROWS_AS((void)db.steps(bank::key_of("t"), "fp", operation), fail_once);
        CHECK(ran(db, "t", "hold") == 1);
        CHECK(ran(db, "t", "settle") == 0);
        CHECK(balance(db, "bob") == 0);
        CHECK(count_rows(db, "SELECT recovery_point FROM idem_operations") == 1);
        // The throw ended the lease: the retry resumes at once, after "hold".
        fail = false;
        auto e = db.steps(bank::key_of("t"), "fp", operation);
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value() == "settled");
        CHECK(holds == 1);
        CHECK(settles == 2);
        CHECK(ran(db, "t", "hold") == 1);
        CHECK(ran(db, "t", "settle") == 1);
        CHECK(balance(db, "bob") == 5);
    }
}

TEST_CASE("steps: a failed step the operation catches stores nothing, and the operation's answer is final") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        int checks = 0;
        auto operation = [&](idem::steps& s) {
            try {
                s.step("check", [&](idem::unit_of_work& uow) {
                    ++checks;
                    bank::effect(uow, "f", "check");
                    throw fail_once();
                    return 0;
                });
            } catch (const fail_once&) {
                return s.step("decline", [](idem::unit_of_work&) { return std::string("declined"); });
            }
            return std::string("accepted");
        };
        auto e = db.steps(bank::key_of("f"), "fp", operation);
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value() == "declined");
        CHECK(ran(db, "f", "check") == 0);
        auto again = db.steps(bank::key_of("f"), "fp", operation);
        CHECK(again.status() == execution_status::replayed);
        CHECK(again.value() == "declined");
        CHECK(checks == 1);
    }
}

TEST_CASE("steps: a transient conflict runs the step again, not the operation") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        int holds = 0, settles = 0;
        auto e = db.steps(bank::key_of("c"), "fp", [&](idem::steps& s) {
            s.step("hold", [&](idem::unit_of_work&) { return ++holds; });
            return s.step("settle", [&](idem::unit_of_work& uow) {
                bank::effect(uow, "c", "settle");
                // What a versioned mapped row raises when a concurrent write overtook it.
                if (++settles == 1) throw idem::stale_write("account", "accounts");
                return settles;
            });
        });
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value() == 2);
        CHECK(holds == 1);
        CHECK(ran(db, "c", "settle") == 1);
        CHECK(attempts(db, "settle") == 2);
        CHECK(attempts(db, "hold") == 1);
    }
}

TEST_CASE("steps: a call that throws stores nothing; the next run calls again with the same call key") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::vector<std::string> keys;
        bool timeout = true;
        auto operation = [&](idem::steps& s) {
            return s.call("charge", [&](const std::string& call_key) {
                keys.push_back(call_key);
                if (timeout) throw std::runtime_error("the provider did not answer in time");
                return std::string("ch_1");
            });
        };
        CHECK_THROWS_AS((void)db.steps(bank::key_of("x"), "fp", operation), std::runtime_error);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps WHERE state = 1") == 0);
        timeout = false;
        auto e = db.steps(bank::key_of("x"), "fp", operation);
        CHECK(e.value() == "ch_1");
        REQUIRE(keys.size() == 2);
        CHECK(keys[0] == keys[1]);
        CHECK(attempts(db, "charge") == 2);
        // A final answer is returned, not thrown: it is stored like any other.
        auto declined = db.steps(bank::key_of("declined"), "fp", [&](idem::steps& s) {
            return s.call("charge2", [&](const std::string&) { return std::string("declined"); });
        });
        CHECK(declined.value() == "declined");
        CHECK(db.steps(bank::key_of("declined"), "fp", [&](idem::steps&) { return std::string("no"); }).value() ==
              "declined");
    }
}

TEST_CASE("steps: results keep every byte (NUL, invalid UTF-8), in steps, calls and the final result") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        const std::string bytes("a\0b\xff\xfe\x80z", 7);
        std::string from_step, from_call;
        auto operation = [&](idem::steps& s) {
            from_step = s.step("bytes", [&](idem::unit_of_work&) { return bytes; });
            from_call = s.call("more", [&](const std::string&) { return bytes + bytes; });
            return from_step + from_call;
        };
        auto first = db.steps(bank::key_of("b"), "fp", operation);
        CHECK(first.value() == bytes + bytes + bytes);
        // A run that failed after both stored: the retry gets them from the store.
        from_step.clear();
        from_call.clear();
        CHECK_THROWS_AS((void)db.steps(bank::key_of("b2"), "fp",
                                       [&](idem::steps& s) {
                                           (void)operation(s);
                                           throw fail_once();
                                           return std::string();
                                       }),
                        fail_once);
        int runs = 0;
        auto resumed = db.steps(bank::key_of("b2"), "fp", [&](idem::steps& s) {
            std::string a = s.step("bytes", [&](idem::unit_of_work&) { return (++runs, std::string()); });
            std::string b = s.call("more", [&](const std::string&) { return (++runs, std::string()); });
            return a + b;
        });
        CHECK(runs == 0);
        CHECK(resumed.value() == bytes + bytes + bytes);
        CHECK(db.steps(bank::key_of("b"), "fp", operation).value() == bytes + bytes + bytes);
    }
}

TEST_CASE("steps: a changed shape under an old key is steps_shape_changed, and changes nothing stored") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        CHECK_THROWS_AS((void)db.steps(bank::key_of("s"), "fp",
                                       [&](idem::steps& s) {
                                           s.step("hold", [](idem::unit_of_work&) { return std::string("held"); });
                                           s.call("charge", [](const std::string&) { return std::string("ch"); });
                                           throw fail_once();
                                           return std::string();
                                       }),
                        fail_once);
        const long long steps_before = count_rows(db, "SELECT COUNT(*) FROM idem_steps");
        // A renamed step at position 1.
        try {
            (void)db.steps(bank::key_of("s"), "fp", [&](idem::steps& s) {
                s.step("hold", [](idem::unit_of_work&) { return std::string("held"); });
                return s.call("capture", [](const std::string&) { return std::string("ch"); });
            });
            FAIL("a renamed step ran");
        } catch (const idem::steps_shape_changed& e) {
            CHECK(e.index() == 1);
        }
        // A step where a call was.
        CHECK_THROWS_AS((void)db.steps(bank::key_of("s"), "fp",
                                       [&](idem::steps& s) {
                                           s.step("hold", [](idem::unit_of_work&) { return std::string("held"); });
                                           return s.step("charge",
                                                         [](idem::unit_of_work&) { return std::string("ch"); });
                                       }),
                        idem::steps_shape_changed);
        // Fewer steps than are stored.
        CHECK_THROWS_AS((void)db.steps(bank::key_of("s"), "fp",
                                       [&](idem::steps& s) {
                                           return s.step("hold",
                                                         [](idem::unit_of_work&) { return std::string("held"); });
                                       }),
                        idem::steps_shape_changed);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps") == steps_before);
        CHECK(count_rows(db, "SELECT state FROM idem_operations") == 0);
        // Bad names are typed errors too, before anything is written.
        CHECK_THROWS_AS(
            (void)db.steps(bank::key_of("n"), "fp",
                           [&](idem::steps& s) { return s.step("two words", [](idem::unit_of_work&) { return 1; }); }),
            std::invalid_argument);
        CHECK_THROWS_AS((void)db.steps(bank::key_of("n2"), "fp",
                                       [&](idem::steps& s) {
                                           s.step("a", [](idem::unit_of_work&) { return 1; });
                                           return s.step("a", [](idem::unit_of_work&) { return 2; });
                                       }),
                        std::invalid_argument);
        CHECK_THROWS_AS((void)db.steps(bank::key_of("n3"), "", [&](idem::steps&) { return 1; }), std::invalid_argument);
    }
}

TEST_CASE(
    "steps: a live lease answers in_flight; after it ends a takeover bumps the fence and the late run "
    "cannot write") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        std::int64_t late_fence = 0, taker_fence = 0;
        std::string late_key, taker_key;
        int settles = 0, late_settles = 0;
        std::promise<void> taker_calling, late_failed;
        std::shared_future<void> taker_is_calling = taker_calling.get_future().share();
        std::shared_future<void> late_has_failed = late_failed.get_future().share();
        auto settle = [&](idem::steps& s, int& runs) {
            return s.step("settle", [&](idem::unit_of_work& uow) {
                ++runs;
                bank::effect(uow, "l", "settle");
                return std::string("settled");
            });
        };
        auto hold = [](idem::steps& s) { s.step("hold", [](idem::unit_of_work&) { return std::string("held"); }); };
        bool first_taker = true;
        auto taker = [&](idem::steps& s) {
            taker_fence = s.fence();
            hold(s);
            std::string charged = s.call("charge", [&](const std::string& k) {
                taker_key = k;
                // Holds the taken-over operation unfinished while the late run tries to write.
                if (std::exchange(first_taker, false)) {
                    taker_calling.set_value();
                    late_has_failed.wait();
                }
                return std::string("taker");
            });
            return charged + "/" + settle(s, settles);
        };
        std::optional<idem::execution<std::string>> in_flight;
        std::future<idem::execution<std::string>> taken;
        auto late = [&](idem::steps& s) {
            late_fence = s.fence();
            hold(s);
            std::string charged = s.call("charge", [&](const std::string& k) {
                late_key = k;
                // While this run's lease is live, another run answers in flight.
                in_flight.emplace(
                    std::async(std::launch::async, [&] { return db.steps(bank::key_of("l"), "fp", taker); }).get());
                std::this_thread::sleep_for(500ms);  // the lease ends while the provider answers
                taken = std::async(std::launch::async, [&] { return db.steps(bank::key_of("l"), "fp", taker); });
                taker_is_calling.wait();
                return std::string("late");
            });
            return charged + "/" + settle(s, late_settles);
        };
        CHECK_THROWS_AS((void)db.steps(bank::key_of("l"), "fp", late, {.lease = 300ms}), idem::lease_lost);
        late_failed.set_value();
        REQUIRE(in_flight);
        CHECK(in_flight->status() == execution_status::in_flight);
        REQUIRE(taken.valid());
        auto e = taken.get();
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value() == "taker/settled");
        CHECK(taker_fence == late_fence + 1);
        CHECK(taker_key == late_key);
        CHECK(settles == 1);
        CHECK(late_settles == 0);
        CHECK(ran(db, "l", "settle") == 1);
        CHECK(attempts(db, "charge") == 2);
        // The stored answer is the taker's (hex of "taker"): the late one was never written.
        CHECK(db.read([](soci::session& sql) {
            std::string r;
            sql << "SELECT result FROM idem_steps WHERE name = 'charge'", soci::into(r);
            return r;
        }) == "74616b6572");
        CHECK(count_rows(db, "SELECT fence FROM idem_operations") == late_fence + 1);
        auto replay = db.steps(bank::key_of("l"), "fp", taker);
        CHECK(replay.status() == execution_status::replayed);
        CHECK(replay.value() == "taker/settled");
    }
}

TEST_CASE("steps: a run fenced out (as idem complete --expire does) is told what did not happen; fences start at 1") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        // What `idem complete --expire` does to an operation: its lease ends and its fence moves on.
        auto expire = [&](const std::string& op) {
            const std::string id = record_id_hex(bank::key_of(op));
            db.transact([&](idem::unit_of_work& uow) {
                uow.sql() << "UPDATE idem_operations SET fence = fence + 1, expires_at = 0 WHERE record_id = :id",
                    soci::use(id);
            });
        };
        // Runs op: its step "hold", then `between`; returns what lease_lost said.
        auto fenced_out = [&](const std::string& op, const std::function<void(idem::steps&)>& between) {
            try {
                (void)db.steps(bank::key_of(op), "fp", [&](idem::steps& s) {
                    CHECK(s.fence() == 1);  // a new operation's first run
                    s.step("hold", [](idem::unit_of_work&) { return std::string("held"); });
                    between(s);
                    return std::string("done");
                });
            } catch (const idem::lease_lost& e) {
                return std::string(e.what());
            }
            return std::string("no lease_lost");
        };
        bool ran_it = false;
        std::string said = fenced_out("before-step", [&](idem::steps& s) {
            expire("before-step");
            s.step("settle", [&](idem::unit_of_work&) {
                ran_it = true;
                return std::string();
            });
        });
        CHECK(said.ends_with(" was taken over by a newer run (fence 2, this run's 1): its step 'settle' did not run"));
        said = fenced_out("before-call", [&](idem::steps& s) {
            expire("before-call");
            (void)s.call("charge", [&](const std::string&) {
                ran_it = true;
                return std::string();
            });
        });
        CHECK(said.ends_with(" (fence 2, this run's 1): its call 'charge' was not made"));
        CHECK_FALSE(ran_it);
        said = fenced_out("in-call", [&](idem::steps& s) {
            (void)s.call("charge", [&](const std::string&) {
                expire("in-call");
                return std::string("ch_1");
            });
        });
        CHECK(said.ends_with(" (fence 2, this run's 1): the answer of its call 'charge' was not stored"));
        said = fenced_out("at-end", [&](idem::steps&) { expire("at-end"); });
        CHECK(said.ends_with(" (fence 2, this run's 1): its final result was not stored (every step it stored stays)"));
        CHECK(said.starts_with("idem: operation " + bank::key_of("at-end").key_hash() + " was taken over"));
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps WHERE name = 'hold'") == 4);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps WHERE name = 'charge' AND state = 1") == 0);
        // A retry takes the expired one over: one more than the fence the expire left.
        const auto e = db.steps(bank::key_of("at-end"), "fp", [&](idem::steps& s) {
            CHECK(s.fence() == 3);
            return s.step("hold", [](idem::unit_of_work&) { return std::string("not run: stored"); });
        });
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value() == "held");
    }
}

TEST_CASE("steps: a result classified release deletes the operation; the next run starts over") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        const auto codec = idem::make_codec<std::string>(
            [](const std::string& s) { return s; }, [](std::string_view p) { return std::string(p); },
            [](const std::string& s) {
                return s == "undone" ? idem::classification::release : idem::classification::store;
            });
        int holds = 0;
        auto operation = [&](idem::steps& s) {
            s.step("hold", [&](idem::unit_of_work&) { return ++holds; });
            return std::string(holds == 1 ? "undone" : "done");
        };
        CHECK(db.steps(bank::key_of("r"), "fp", operation, codec).status() == execution_status::executed);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_operations") == 0);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_steps") == 0);
        auto e = db.steps(bank::key_of("r"), "fp", operation, codec);
        CHECK(e.value() == "done");
        CHECK(holds == 2);
    }
}

TEST_CASE("steps: a worker SIGKILLed between steps or inside the call; the rerun finishes, each step once") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        long long paid = 0;
        for (const std::string point : {"hold", "charge", "charged"}) {
            CAPTURE(point);
            const std::string op = "killed-at-" + point;
            spawn_options run;
            run.argv = {IDEM_STEPS_WORKER, "pay", where->url(), op, "800", point};
            run.pipe_stdout = true;
            child_process worker(run);
            REQUIRE(worker.read_line(30s) == "at " + point);
            worker.signal(SIGKILL);
            CHECK(stopped_cleanly(worker.reap()));
            // Its lease is still live: a rerun now answers in flight and runs nothing.
            CHECK(bank::pay(db, op, 25).status() == execution_status::in_flight);
            std::this_thread::sleep_for(900ms);
            auto e = bank::pay(db, op, 25);
            REQUIRE(e.status() == execution_status::executed);
            paid += 25;
            CHECK(e.value().starts_with("held/ch_"));
            CHECK(ran(db, op, "hold") == 1);
            CHECK(ran(db, op, "settle") == 1);
            CHECK(balance(db, "alice") == 1000000 - paid);
            CHECK(balance(db, "bob") == paid);
        }
        // Killed inside the call: the provider got the same call key twice and charged once.
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_requests") == 4);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM provider_charges") == 3);
        CHECK(count_rows(db, "SELECT COUNT(DISTINCT call_key) FROM provider_requests") == 3);
        CHECK(count_rows(db, "SELECT MAX(attempts) FROM idem_steps WHERE name = 'charge'") == 2);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_operations WHERE state = 1 AND fence = 2") == 3);
    }
}

TEST_CASE("steps: the operation docs/steps.md shows") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_payments(*where);
        const idem::record_key key{"bank.payment", idem::scope::tenant("acme"), "order-17"};
        const long long amount = 40;
        // readme:begin steps-payment
        auto e = db.steps(key, "pay:" + std::to_string(amount), [&](idem::steps& op) {
            // One transaction: the hold and its stored result commit together.
            long long hold = op.step("hold", [&](idem::unit_of_work& uow) {
                uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount);
                return amount;
            });
            // No transaction: the same call key on every run, so the provider charges once.
            std::string charge = op.call("charge", [&](const std::string& call_key) {
                return bank::charge(db, call_key, hold);  // the provider's API, with call_key as Idempotency-Key
            });
            return op.step("settle", [&](idem::unit_of_work& uow) {
                uow.sql() << "UPDATE accounts SET balance = balance + :a WHERE id = 'bob'", soci::use(hold);
                return charge;
            });
        });
        // readme:end steps-payment
        CHECK(e.status() == execution_status::executed);
        CHECK(e.value().starts_with("ch_"));
        CHECK(balance(db, "alice") == 1000000 - 40);
        CHECK(balance(db, "bob") == 40);
    }
}

#ifdef IDEM_TEST_POSTGRESQL

TEST_CASE("steps (PostgreSQL): a step whose COMMIT went unanswered is read back before anything runs again") {
    idem::test::postgres_server server;
    idem::test::tcp_proxy proxy(server.port());
    idem::database db = open_payments(connection_place(idem::test::with_port(server.conninfo(), proxy.port())));
    idem::test::slow_commits(db, "effects");
    soci::session admin;
    idem::open_postgresql_session(admin, server.conninfo());

    SUBCASE("it committed: the server finished the COMMIT after the connection broke") {
        auto pending = std::async(std::launch::async, [&] { return bank::pay(db, "doubt-committed", 25); });
        wait_for_commit(admin);
        proxy.sever();
        CHECK_THROWS_AS((void)pending.get(), idem::transaction_in_doubt);
        std::this_thread::sleep_for(1500ms);  // the server ends its COMMIT
        db.transact([](idem::unit_of_work& uow) { uow.sql() << "DROP TRIGGER slow_commit ON effects"; });
        // The hold's row says it committed: the rerun takes its stored result and goes on.
        auto e = bank::pay(db, "doubt-committed", 25);
        CHECK(e.status() == execution_status::executed);
        CHECK(ran(db, "doubt-committed", "hold") == 1);
        CHECK(ran(db, "doubt-committed", "settle") == 1);
        CHECK(balance(db, "alice") == 1000000 - 25);
        CHECK(attempts(db, "hold") == 1);
    }
    SUBCASE("it did not: the server ended the backend during the COMMIT") {
        auto pending = std::async(std::launch::async, [&] { return bank::pay(db, "doubt-rolled-back", 25); });
        wait_for_commit(admin);
        admin << "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'";
        CHECK_THROWS_AS((void)pending.get(), idem::transaction_in_doubt);
        db.transact([](idem::unit_of_work& uow) { uow.sql() << "DROP TRIGGER slow_commit ON effects"; });
        // No row for the hold: the rerun runs it, once.
        auto e = bank::pay(db, "doubt-rolled-back", 25);
        CHECK(e.status() == execution_status::executed);
        CHECK(ran(db, "doubt-rolled-back", "hold") == 1);
        CHECK(ran(db, "doubt-rolled-back", "settle") == 1);
        CHECK(balance(db, "alice") == 1000000 - 25);
    }
}

TEST_CASE("steps (PostgreSQL): an operation deleted between the start's INSERT and its read begins anew") {
    for (const auto& where : places()) {
        if (!where->postgresql()) continue;
        idem::database db = open_payments(*where);
        REQUIRE(bank::pay(db, "gone", 25).status() == execution_status::executed);
        const std::string id = idem::inspect_operation(db, bank::key_of("gone"))->record_id;
        // An operator's session holds the operation's row, so the rerun's INSERT
        // meets it and its read waits; then the row is deleted (a purge would).
        soci::session holder, watcher;
        idem::open_postgresql_session(holder, where->url());
        idem::open_postgresql_session(watcher, where->url());
        holder.begin();
        holder << "SELECT 1 FROM idem_operations WHERE record_id = :id FOR UPDATE", soci::use(id);
        auto rerun = std::async(std::launch::async, [&] { return bank::pay(db, "gone", 25); });
        int waiting = 0;
        for (int i = 0; i < 6000 && waiting == 0; ++i) {
            watcher << "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                       "'SELECT namespace, fingerprint%'",
                soci::into(waiting);
            if (waiting == 0) std::this_thread::sleep_for(10ms);
        }
        REQUIRE(waiting == 1);
        holder << "DELETE FROM idem_steps WHERE record_id = :id", soci::use(id);
        holder << "DELETE FROM idem_operations WHERE record_id = :id", soci::use(id);
        holder.commit();
        // Not key_reused (the read found nothing): the start ran again and began a new operation.
        REQUIRE(rerun.wait_for(5min) == std::future_status::ready);
        auto e = rerun.get();
        CHECK(e.status() == execution_status::executed);
        CHECK(ran(db, "gone", "hold") == 2);
        CHECK(ran(db, "gone", "settle") == 2);
    }
}

TEST_CASE("steps (PostgreSQL): a database that is down is store_error, for a run and for the completer") {
    idem::test::postgres_server server;
    idem::database db = open_payments(connection_place(server.conninfo()), {.attempts = 1});
    const auto payment = bank::payment(db);
    idem::completer completer(db, {payment}, {.idle_wait = 5ms});
    server.stop();
    CHECK_THROWS_AS((void)bank::pay_with(payment, db, "down", 25), idem::store_error);
    CHECK_THROWS_AS((void)completer.run_once(), idem::store_error);
    CHECK_THROWS_AS((void)idem::inspect_operation(db, bank::key_of("down")), idem::store_error);
    server.start();
    // Nothing was begun: the key runs anew, each step once.
    auto e = bank::pay_with(payment, db, "down", 25);
    CHECK(e.status() == execution_status::executed);
    CHECK(ran(db, "down", "hold") == 1);
    CHECK(ran(db, "down", "settle") == 1);
    CHECK(balance(db, "bob") == 25);
}

#endif
