#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "../support/recording_sink.hpp"
#include "../support/switchable_store.hpp"
#include "idem/executor.hpp"
#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;
using status = execution_status;

namespace {

struct fixture {
    std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();
    std::shared_ptr<memory_store> store = std::make_shared<memory_store>(clock);
    std::shared_ptr<test::recording_sink> sink = std::make_shared<test::recording_sink>();
    string_codec codec;
    record_key key{"payments.capture", scope::tenant("acme"), "order-17"};

    executor make(executor_options o = {}) { return executor(store, std::move(o), sink); }
};

}  // namespace

TEST_CASE("executor: runs once, then replays the stored result") {
    fixture f;
    auto exec = f.make();
    int runs = 0;
    auto op = [&] { return "receipt-" + std::to_string(++runs); };
    auto first = exec.execute(f.key, "fp", {}, op, f.codec);
    CHECK(first.status() == status::executed);
    CHECK(first.value() == "receipt-1");
    auto retry = exec.execute(f.key, "fp", {}, op, f.codec);
    CHECK(retry.status() == status::replayed);
    CHECK(retry.value() == "receipt-1");
    CHECK(retry.mode() == mode::enforce);
    CHECK(runs == 1);
    CHECK(f.sink->count(outcome::executed, mode::enforce) == 1);
    CHECK(f.sink->count(outcome::replay, mode::enforce) == 1);
}

TEST_CASE("executor: the same key with another fingerprint is key_reused and does not run") {
    fixture f;
    auto exec = f.make();
    int runs = 0;
    auto op = [&] { return std::to_string(++runs); };
    (void)exec.execute(f.key, "fp-a", {}, op, f.codec);
    auto reused = exec.execute(f.key, "fp-b", {}, op, f.codec);
    CHECK(reused.status() == status::key_reused);
    CHECK_FALSE(reused.has_value());
    CHECK_THROWS_AS((void)reused.value(), std::logic_error);
    CHECK(runs == 1);
    CHECK(f.sink->count(outcome::key_reused, mode::enforce) == 1);
}

TEST_CASE("executor: a call while the first runs is in_flight") {
    fixture f;
    auto exec = f.make();
    auto outer = exec.execute(
        f.key, "fp", {},
        [&] {
            auto inner = exec.execute(
                f.key, "fp", {}, [] { return std::string("never"); }, f.codec);
            CHECK(inner.status() == status::in_flight);
            return std::string("outer");
        },
        f.codec);
    CHECK(outer.status() == status::executed);
    CHECK(f.sink->count(outcome::in_flight, mode::enforce) == 1);
}

TEST_CASE("executor: the codec classifies: store, store_as_failure, release, keep_in_flight") {
    fixture f;
    auto exec = f.make({.retention = 24h, .failure_retention = 10min});
    auto codec = make_codec<std::string>([](const std::string& s) { return s; },
                                         [](std::string_view p) { return std::string(p); },
                                         [](const std::string& s) {
                                             if (s == "declined") return classification::store_as_failure;
                                             if (s == "rolled back") return classification::release;
                                             if (s == "timed out") return classification::keep_in_flight;
                                             return classification::store;
                                         });
    const record_key ok("ns", "ok"), declined("ns", "declined"), undone("ns", "undone"), unknown("ns", "unknown");
    (void)exec.execute(
        ok, "fp", {}, [] { return std::string("ok"); }, codec);
    (void)exec.execute(
        declined, "fp", {}, [] { return std::string("declined"); }, codec);
    auto released = exec.execute(
        undone, "fp", {}, [] { return std::string("rolled back"); }, codec);
    CHECK(released.status() == status::executed);
    CHECK(f.sink->count(outcome::released, mode::enforce) == 1);
    (void)exec.execute(
        unknown, "fp", {}, [] { return std::string("timed out"); }, codec);

    // release freed the key at once; keep_in_flight holds it until the lease ends.
    CHECK(exec.execute(
                  undone, "fp", {}, [] { return std::string("again"); }, codec)
              .status() == status::executed);
    CHECK(exec.execute(
                  unknown, "fp", {}, [] { return std::string("x"); }, codec)
              .status() == status::in_flight);

    f.clock->advance(11min);  // past failure_retention and the lease
    CHECK(exec.execute(
                  ok, "fp", {}, [] { return std::string("x"); }, codec)
              .status() == status::replayed);
    CHECK(exec.execute(
                  declined, "fp", {}, [] { return std::string("x"); }, codec)
              .status() == status::executed);
    CHECK(exec.execute(
                  unknown, "fp", {}, [] { return std::string("x"); }, codec)
              .status() == status::executed);
    f.clock->advance(24h);
    CHECK(exec.execute(
                  ok, "fp", {}, [] { return std::string("x"); }, codec)
              .status() == status::executed);
}

TEST_CASE("executor: a codec without classify stores every result, and replays through deserialize") {
    fixture f;
    auto exec = f.make();
    auto codec = make_codec<int>([](int v) { return std::to_string(v); },
                                 [](std::string_view p) { return std::stoi(std::string(p)); });
    CHECK(exec.execute(
                  f.key, "fp", {}, [] { return 42; }, codec)
              .value() == 42);
    auto replay = exec.execute(
        f.key, "fp", {}, [] { return 0; }, codec);
    CHECK(replay.status() == status::replayed);
    CHECK(replay.value() == 42);
}

TEST_CASE("executor: a redacting_codec stores the redacted result; the first caller gets it whole, replays redacted") {
    fixture f;
    auto exec = f.make();
    int runs = 0;
    const redacting_codec codec(f.codec, [](std::string r) {
        r.replace(r.find("secret-"), 7, "*******");
        return r;
    });
    auto op = [&] { return "token secret-" + std::to_string(++runs); };
    auto first = exec.execute(f.key, "fp", {}, op, codec);
    CHECK(first.status() == status::executed);
    CHECK(first.value() == "token secret-1");
    auto retry = exec.execute(f.key, "fp", {}, op, codec);
    CHECK(retry.status() == status::replayed);
    CHECK(retry.value() == "token *******1");
    CHECK(runs == 1);
    CHECK(f.store->inspect(f.key, true)->payload == "token *******1");
}

TEST_CASE("executor: an undecodable stored result is a typed store error") {
    fixture f;
    auto exec = f.make();
    auto r = f.store->try_reserve(f.key, "fp", 1min);
    REQUIRE(f.store->complete(f.key, r.token, "fp", "not a number", 1h));
    auto codec = make_codec<int>([](int v) { return std::to_string(v); },
                                 [](std::string_view p) { return std::stoi(std::string(p)); });
    try {
        (void)exec.execute(
            f.key, "fp", {}, [] { return 1; }, codec);
        FAIL("expected a store_error");
    } catch (const store_error& e) {
        CHECK(e.failure() == store_failure::corrupt_record);
        CHECK(std::string(e.what()).find(f.key.key_hash()) != std::string::npos);
    }
}

TEST_CASE("executor: a stop requested before the operation starts releases the key") {
    fixture f;
    auto exec = f.make();
    std::stop_source stop;
    stop.request_stop();
    bool ran = false;
    CHECK_THROWS_AS((void)exec.execute(
                        f.key, "fp", {},
                        [&] {
                            ran = true;
                            return std::string();
                        },
                        f.codec, stop.get_token()),
                    operation_cancelled);
    CHECK_FALSE(ran);
    CHECK(f.sink->count(outcome::released, mode::enforce) == 1);
    CHECK(exec.execute(
                  f.key, "fp", {}, [] { return std::string("ran"); }, f.codec)
              .status() == status::executed);
}

TEST_CASE("executor: the operation sees the stop token") {
    fixture f;
    auto exec = f.make();
    std::stop_source stop;
    auto e = exec.execute(
        f.key, "fp", {},
        [&](std::stop_token t) {
            stop.request_stop();
            return std::string(t.stop_requested() ? "saw stop" : "no stop");
        },
        f.codec, stop.get_token());
    CHECK(e.value() == "saw stop");
}

TEST_CASE("executor: an exception is rethrown and keeps the key in flight until the lease ends") {
    fixture f;
    auto exec = f.make({.lease = 30s});
    int runs = 0;
    CHECK_THROWS_AS((void)exec.execute(
                        f.key, "fp", {},
                        [&]() -> std::string {
                            ++runs;
                            throw std::runtime_error("provider timeout");
                        },
                        f.codec),
                    std::runtime_error);
    CHECK(f.sink->logged("idem.operation.failed"));
    CHECK(exec.execute(
                  f.key, "fp", {}, [&] { return std::to_string(++runs); }, f.codec)
              .status() == status::in_flight);
    f.clock->advance(31s);
    auto retry = exec.execute(
        f.key, "fp", {}, [&] { return std::to_string(++runs); }, f.codec);
    CHECK(retry.status() == status::executed);
    CHECK(runs == 2);
}

TEST_CASE("executor: a run that outlived its lease cannot overwrite the retry that took over; it is logged") {
    fixture f;
    auto exec = f.make({.lease = 30s});
    auto slow = exec.execute(
        f.key, "fp", {},
        [&] {
            f.clock->advance(31s);
            auto retry = exec.execute(
                f.key, "fp", {}, [] { return std::string("retry"); }, f.codec);
            CHECK(retry.status() == status::executed);
            return std::string("slow");
        },
        f.codec);
    CHECK(slow.status() == status::executed);
    CHECK(f.sink->logged("idem.complete.stale"));
    CHECK(exec.execute(
                  f.key, "fp", {}, [] { return std::string("x"); }, f.codec)
              .value() == "retry");
    for (const auto& log : f.sink->logs()) {
        if (log.name == "idem.complete.stale") CHECK(log.key_hash == f.key.key_hash());
    }
}

TEST_CASE("executor: 32 threads executing one key run the operation exactly once") {
    fixture f;
    auto exec = f.make();
    std::atomic<int> runs{0};
    std::atomic<int> executed{0}, replayed{0}, in_flight{0};
    std::barrier start(32);
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < 32; ++i) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                auto e = exec.execute(
                    f.key, "fp", {},
                    [&] {
                        ++runs;
                        std::this_thread::sleep_for(5ms);
                        return std::string("once");
                    },
                    f.codec);
                if (e.status() == status::executed) ++executed;
                if (e.status() == status::replayed) {
                    ++replayed;
                    CHECK(e.value() == "once");
                }
                if (e.status() == status::in_flight) ++in_flight;
            });
        }
    }
    CHECK(runs == 1);
    CHECK(executed == 1);
    CHECK(replayed + in_flight == 31);
}

TEST_CASE("executor: off runs the operation and touches no store") {
    fixture f;
    auto exec = f.make({.mode = mode::off});
    int runs = 0;
    for (int i = 0; i < 3; ++i) {
        auto e = exec.execute(
            f.key, "fp", {}, [&] { return std::to_string(++runs); }, f.codec);
        CHECK(e.status() == status::executed);
        CHECK(e.mode() == mode::off);
    }
    CHECK(runs == 3);
    CHECK(f.store->size() == 0);
    CHECK(f.sink->decisions().empty());
}

TEST_CASE("executor: observe runs every call once, records real records and counts what enforce would do") {
    fixture f;
    auto exec = f.make({.mode = mode::observe});
    int runs = 0;
    auto op = [&] { return std::to_string(++runs); };
    auto first = exec.execute(f.key, "fp", {}, op, f.codec);
    auto duplicate = exec.execute(f.key, "fp", {}, op, f.codec);
    auto reused = exec.execute(f.key, "other", {}, op, f.codec);
    CHECK(runs == 3);
    CHECK(first.status() == status::executed);
    CHECK(duplicate.status() == status::executed);
    CHECK(duplicate.enforce_decision() == status::replayed);
    CHECK(duplicate.value() == "2");  // observe returns this run's result, not the stored one
    CHECK(reused.enforce_decision() == status::key_reused);
    CHECK(f.sink->count(outcome::executed, mode::observe) == 1);
    CHECK(f.sink->count(outcome::replay, mode::observe) == 1);
    CHECK(f.sink->count(outcome::key_reused, mode::observe) == 1);
    auto stored = f.store->try_reserve(f.key, "fp", 1min);
    CHECK(stored.status == reservation_status::completed);
    CHECK(stored.payload == "1");
}

TEST_CASE("executor: observe counts in_flight for a concurrent duplicate and still runs it") {
    fixture f;
    auto exec = f.make({.mode = mode::observe});
    int runs = 0;
    (void)exec.execute(
        f.key, "fp", {},
        [&] {
            auto inner = exec.execute(
                f.key, "fp", {}, [&] { return std::to_string(++runs); }, f.codec);
            CHECK(inner.status() == status::executed);
            CHECK(inner.enforce_decision() == status::in_flight);
            return std::to_string(++runs);
        },
        f.codec);
    CHECK(runs == 2);
    CHECK(f.sink->count(outcome::in_flight, mode::observe) == 1);
}

TEST_CASE("executor: a switch from observe to enforce replays what observe stored") {
    fixture f;
    auto exec = f.make({.mode = mode::observe});
    int runs = 0;
    (void)exec.execute(
        f.key, "fp", {}, [&] { return "first-" + std::to_string(++runs); }, f.codec);
    exec.options().replace({.mode = mode::enforce});
    auto retry = exec.execute(
        f.key, "fp", {}, [&] { return "second-" + std::to_string(++runs); }, f.codec);
    CHECK(retry.status() == status::replayed);
    CHECK(retry.value() == "first-1");
    CHECK(runs == 1);
}

TEST_CASE("executor: a store failing while reserving is logged in observe and propagates in enforce") {
    auto clock = std::make_shared<manual_clock>();
    auto store = std::make_shared<test::switchable_store>(clock);
    auto sink = std::make_shared<test::recording_sink>();
    executor exec(store, {.mode = mode::observe}, sink);
    store->failing = true;
    int runs = 0;
    const record_key key("ns", "k");
    auto e = exec.execute(
        key, "fp", {}, [&] { return std::to_string(++runs); }, string_codec{});
    CHECK(e.status() == status::executed);
    CHECK(runs == 1);
    CHECK(sink->logged("idem.observe.reserve_failed"));
    CHECK(sink->count(outcome::reserve_failed, mode::observe) == 1);

    try {
        (void)exec.execute(
            key, "fp", {.mode = mode::enforce}, [&] { return std::to_string(++runs); }, string_codec{});
        FAIL("expected a store_error");
    } catch (const store_error& err) {
        CHECK(err.is_connection_lost());
    }
    CHECK(runs == 1);
}

TEST_CASE("executor: a store failing while completing keeps the result and logs it") {
    auto clock = std::make_shared<manual_clock>();
    auto store = std::make_shared<test::switchable_store>(clock);
    auto sink = std::make_shared<test::recording_sink>();
    executor exec(store, {}, sink);
    const record_key key("ns", "k");
    auto e = exec.execute(
        key, "fp", {},
        [&] {
            store->failing = true;
            return std::string("moved");
        },
        string_codec{});
    CHECK(e.status() == status::executed);
    CHECK(e.value() == "moved");
    CHECK(sink->logged("idem.complete.failed"));
}

TEST_CASE("executor: a profile picks its store, mode and retention; a call overrides its profile") {
    auto clock = std::make_shared<manual_clock>();
    auto default_store = std::make_shared<memory_store>(clock);
    auto payments_store = std::make_shared<memory_store>(clock);
    executor_options o;
    o.mode = mode::observe;
    o.profiles["payments"] = {.mode = mode::enforce, .retention = 48h, .store = "payments"};
    executor exec({{"", default_store}, {"payments", payments_store}}, std::make_shared<options_source>(o));
    const record_key key("ns", "k");
    CHECK(exec.resolve_mode() == mode::observe);
    CHECK(exec.resolve_mode({.profile = "payments"}) == mode::enforce);
    CHECK(exec.resolve_mode({.profile = "payments", .mode = mode::off}) == mode::off);

    (void)exec.execute(
        key, "fp", {.profile = "payments"}, [] { return std::string("p"); }, string_codec{});
    CHECK(payments_store->size() == 1);
    CHECK(default_store->size() == 0);
    clock->advance(47h);
    CHECK(exec.execute(
                  key, "fp", {.profile = "payments"}, [] { return std::string("x"); }, string_codec{})
              .status() == status::replayed);
    clock->advance(2h);
    CHECK(exec.execute(
                  key, "fp", {.profile = "payments"}, [] { return std::string("x"); }, string_codec{})
              .status() == status::executed);
}

namespace {

// A store that keeps no tombstones (its traits leave `remembers` false).
class forgetful_store final : public record_store {
public:
    explicit forgetful_store(std::shared_ptr<const idem::clock> c) : inner_(std::move(c)) {}

protected:
    reservation do_try_reserve(const record_key& k, std::string_view fp, duration lease) override {
        return inner_.try_reserve(k, fp, lease);
    }
    bool do_complete(const record_key& k, std::string_view t, std::string_view fp, std::string_view p, duration r,
                     duration) override {
        return inner_.complete(k, t, fp, p, r);
    }
    bool do_release(const record_key& k, std::string_view t) override { return inner_.release(k, t); }
    std::size_t do_purge_expired(std::size_t limit) override { return inner_.purge_expired(limit); }

private:
    memory_store inner_;
};

}  // namespace

TEST_CASE("executor: a retry after the retention, inside the profile's remembered window, is expired and not run") {
    fixture f;
    executor_options o;
    o.profiles["payments"] = {.retention = 24h, .remember = 24h * 30};
    auto exec = f.make(o);
    int runs = 0;
    auto pay = [&] { return "receipt-" + std::to_string(++runs); };
    const execution_options payments{.profile = "payments"};
    REQUIRE(exec.execute(f.key, "fp", payments, pay, f.codec).status() == status::executed);
    // A failure's short retention is not remembered: its retry may run again.
    const record_key declined{"payments.capture", scope::tenant("acme"), "order-18"};
    const auto failing = make_codec<std::string>([](const std::string& s) { return s; },
                                                 [](std::string_view p) { return std::string(p); },
                                                 [](const std::string&) { return classification::store_as_failure; });
    REQUIRE(exec.execute(declined, "fp", payments, pay, failing).status() == status::executed);

    f.clock->advance(25h);  // a client's queue drained after a day
    while (f.store->purge_expired(1000) > 0) {
    }
    const auto late = exec.execute(f.key, "fp", payments, pay, f.codec);
    CHECK(late.status() == status::expired);
    CHECK(late.enforce_decision() == status::expired);
    CHECK_FALSE(late.has_value());
    CHECK_THROWS_AS((void)late.value(), std::logic_error);
    CHECK(exec.execute(f.key, "other", payments, pay, f.codec).status() == status::key_reused);
    CHECK(f.sink->count(outcome::expired, mode::enforce) == 1);
    CHECK(exec.execute(declined, "fp", payments, pay, failing).status() == status::executed);
    CHECK(runs == 3);

    // Observe runs it regardless, and counts what Enforce would have answered.
    const auto observed = exec.execute(f.key, "fp", {.profile = "payments", .mode = mode::observe}, pay, f.codec);
    CHECK(observed.status() == status::executed);
    CHECK(observed.enforce_decision() == status::expired);
    CHECK(runs == 4);

    f.clock->advance(24h * 30);  // the window ended
    CHECK(exec.execute(f.key, "fp", payments, pay, f.codec).status() == status::executed);
    CHECK(runs == 5);
}

TEST_CASE("executor: a remembered window on a store that keeps no tombstones is an options_error, before any run") {
    fixture f;
    executor_options o;
    o.profiles["payments"] = {.retention = 1h, .remember = 48h};
    executor exec(std::make_shared<forgetful_store>(f.clock), o, f.sink);
    int runs = 0;
    CHECK_THROWS_AS((void)exec.execute(f.key, "fp", {.profile = "payments"}, [&] { return ++runs; }), options_error);
    CHECK(runs == 0);
    CHECK(exec.execute(f.key, "fp", {}, [&] { return ++runs; }).status() == status::executed);
}
