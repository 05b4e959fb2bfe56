// The outbox's Redis stream sink against a real redis-server: entries appended
// with XADD keep the id, topic, ordering key, payload and headers byte for
// byte; an error reply that retrying cannot cure dead-letters the message, a
// server that is down backs off.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "bank_places.hpp"
#include "idem/outbox_relay.hpp"
#include "idem/redis_stream_sink.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;

void drain(idem::outbox_relay& relay) {
    while (relay.run_once() > 0) {
    }
}

// The value of `field` in a stream entry's field list.
std::string field_of(const redisReply& fields, std::string_view field) {
    for (std::size_t i = 0; i + 1 < fields.elements; i += 2)
        if (std::string_view(fields.element[i]->str, fields.element[i]->len) == field)
            return std::string(fields.element[i + 1]->str, fields.element[i + 1]->len);
    return "(absent)";
}

}  // namespace

TEST_CASE("redis stream sink: XADD keeps every byte; WRONGTYPE dead-letters; a server that is down is retried") {
    idem::test::redis_server server;
    idem::test::redis_client client(server.endpoint());
    idem::test::sqlite_place where;
    idem::database db = idem::test::open_bank(where);
    const std::string payload("\0\xff\xfe payload", 11);
    std::string id;
    db.transact([&](idem::unit_of_work& uow) {
        id = uow.publish({.topic = "transfer.completed",
                          .payload = payload,
                          .ordering_key = "alice",
                          .headers = {{"trace", std::string("\0t", 2)}}});
        (void)uow.publish({.topic = "deposit.applied", .payload = "second"});
    });
    idem::redis_options at;
    at.port = server.port();
    auto sink = std::make_shared<idem::redis_stream_sink>(idem::redis_stream_options{.redis = at, .stream = "events"});
    idem::outbox_relay relay(db, sink, {.first_backoff = 0ms, .max_backoff = 0ms});
    drain(relay);
    CHECK(relay.metrics().delivered == 2);
    const auto entries = client.command({"XRANGE", "events", "-", "+"});
    REQUIRE(entries->type == REDIS_REPLY_ARRAY);
    REQUIRE(entries->elements == 2);
    const redisReply& first = *entries->element[0]->element[1];
    CHECK(field_of(first, "id") == id);
    CHECK(field_of(first, "topic") == "transfer.completed");
    CHECK(field_of(first, "ordering_key") == "alice");
    CHECK(field_of(first, "payload") == payload);
    CHECK(field_of(first, "h:trace") == std::string("\0t", 2));
    CHECK(field_of(*entries->element[1]->element[1], "ordering_key") == "(absent)");

    // The key holds a string: WRONGTYPE, which no retry cures.
    CHECK(client.text({"SET", "taken", "x"}) == "OK");
    auto wrong = std::make_shared<idem::redis_stream_sink>(idem::redis_stream_options{.redis = at, .stream = "taken"});
    db.transact([&](idem::unit_of_work& uow) { (void)uow.publish("t", "p"); });
    idem::outbox_relay refused(db, wrong, {.first_backoff = 0ms, .max_backoff = 0ms});
    CHECK(refused.run_once() == 1);
    const auto dead = idem::dead_letters(db);
    REQUIRE(dead.size() == 1);
    CHECK(dead[0].last_answer.starts_with("WRONGTYPE"));

    // Down: each attempt fails and waits for its backoff.
    CHECK(idem::requeue_dead_letters(db) == 1);
    server.stop();
    idem::outbox_relay down(db, sink, {.first_backoff = 1h, .max_backoff = 1h});
    CHECK(down.run_once() == 1);
    CHECK(down.run_once() == 0);  // backing off, not tried again at once
    CHECK(down.metrics().failed == 1);
    CHECK(down.metrics().pending == 1);
}
