#include <doctest/doctest.h>

#include "../support/recording_sink.hpp"
#include "idem/inbox.hpp"
#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;
using status = execution_status;

namespace {

struct fixture {
    std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();
    std::shared_ptr<memory_store> store = std::make_shared<memory_store>(clock);
    std::shared_ptr<test::recording_sink> sink = std::make_shared<test::recording_sink>();
};

}  // namespace

TEST_CASE("inbox: a message is processed once per consumer; a redelivery is replayed") {
    fixture f;
    executor exec(f.store, {}, f.sink);
    inbox box(exec);
    int handled = 0;
    const auto tenant = scope::tenant("acme");
    CHECK(box.process("billing", "m-1", tenant, [&] { ++handled; }) == status::executed);
    CHECK(box.process("billing", "m-1", tenant, [&] { ++handled; }) == status::replayed);
    CHECK(box.process("shipping", "m-1", tenant, [&] { ++handled; }) == status::executed);
    CHECK(box.process("billing", "m-1", scope::tenant("other"), [&] { ++handled; }) == status::executed);
    CHECK(handled == 3);
    CHECK(f.sink->decisions().front().entry == entry_point::inbox);
    CHECK(f.sink->decisions().front().profile == "messaging");
}

TEST_CASE("inbox: records live in messaging:{consumer} under keys::from_message") {
    const auto key = inbox::key_for("billing", "m-1", scope::tenant("acme"));
    CHECK(key.name_space() == "messaging:billing");
    CHECK(key.key() == keys::from_message("m-1", "billing"));
}

TEST_CASE("inbox: a message being processed elsewhere is in_flight") {
    fixture f;
    executor exec(f.store);
    inbox box(exec);
    CHECK(box.process("billing", "m-1", scope::global(), [&] {
        CHECK(box.process("billing", "m-1", scope::global(), [] {}) == status::in_flight);
    }) == status::executed);
}

TEST_CASE("inbox: the built-in messaging profile keeps records for 7 days") {
    fixture f;
    executor exec(f.store);
    inbox box(exec);
    int handled = 0;
    (void)box.process("billing", "m-1", scope::global(), [&] { ++handled; });
    f.clock->advance(6 * 24h);
    CHECK(box.process("billing", "m-1", scope::global(), [&] { ++handled; }) == status::replayed);
    f.clock->advance(2 * 24h);
    CHECK(box.process("billing", "m-1", scope::global(), [&] { ++handled; }) == status::executed);
    CHECK(handled == 2);
}

TEST_CASE("inbox: a registered messaging profile replaces the built-in one; call options override it") {
    fixture f;
    executor_options o;
    o.profiles["messaging"] = {.retention = 1h};
    executor exec(f.store, o);
    inbox box(exec);
    int handled = 0;
    (void)box.process("billing", "m-1", scope::global(), [&] { ++handled; });
    f.clock->advance(2h);
    CHECK(box.process("billing", "m-1", scope::global(), [&] { ++handled; }) == status::executed);
    (void)box.process("billing", "m-2", scope::global(), [&] { ++handled; }, {.retention = 30 * 24h});
    f.clock->advance(20 * 24h);
    CHECK(box.process("billing", "m-2", scope::global(), [&] { ++handled; }) == status::replayed);
}

TEST_CASE("inbox: the generic overload stores and replays the handler's result") {
    fixture f;
    executor exec(f.store);
    inbox box(exec);
    auto first = box.process(
        "billing", "m-1", scope::global(), [] { return std::string("invoice 7"); }, string_codec{});
    auto again = box.process(
        "billing", "m-1", scope::global(), [] { return std::string("other"); }, string_codec{});
    CHECK(first.status() == status::executed);
    CHECK(again.status() == status::replayed);
    CHECK(again.value() == "invoice 7");
}

TEST_CASE("inbox: a handler that throws leaves the message in flight for redelivery after the lease") {
    fixture f;
    executor exec(f.store);
    inbox box(exec);
    CHECK_THROWS((void)box.process("billing", "m-1", scope::global(), [] { throw std::runtime_error("down"); }));
    CHECK(box.process("billing", "m-1", scope::global(), [] {}) == status::in_flight);
    f.clock->advance(2min);
    CHECK(box.process("billing", "m-1", scope::global(), [] {}) == status::executed);
}
