// The record-store contract (SPEC section 2), written once and run against every
// store: the built-in ones in tests/contract, anyone's through idem::contract::run.
// Scenarios that need a capability sit in a doctest test suite named after the
// store_traits flag; run() excludes the suites the store's traits rule out.
#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "contract_context.hpp"
#include "idem/keys.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"

namespace idem::contract {
namespace {

using namespace std::chrono_literals;
using status = reservation_status;

// Every scenario gets namespaces of its own, so stores may share one database.
std::string fresh_namespace() {
    static std::atomic<int> counter{0};
    return "contract." + detail::new_token().substr(0, 12) + "." + std::to_string(counter++);
}

struct fixture {
    store_context& ctx = current();
    std::shared_ptr<record_store> store = ctx.make_store();
    std::string ns = fresh_namespace();
    duration span = ctx.short_span();

    [[nodiscard]] record_key key(std::string_view k = "k-1") const { return record_key(ns, scope::tenant("t"), k); }
    [[nodiscard]] duration long_span() const { return span * 100; }
};

const std::string binary_payload("\x00\x01\xff\xfe\"\\\n\r binary \x00 tail\x00", 23);  // 23: with the last NUL

}  // namespace

TEST_CASE("contract: the first reserve wins a token, the next sees it in flight") {
    fixture f;
    INFO("store: " << f.ctx.name());
    auto first = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(first.status == status::reserved);
    CHECK_FALSE(first.token.empty());
    auto second = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(second.status == status::in_flight);
    CHECK(second.token.empty());
}

TEST_CASE("contract: another fingerprint is a mismatch while in flight and after completion") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp-a", f.long_span());
    REQUIRE(r.status == status::reserved);
    CHECK(f.store->try_reserve(f.key(), "fp-b", f.long_span()).status == status::fingerprint_mismatch);
    REQUIRE(f.store->complete(f.key(), r.token, "fp-a", "done", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp-b", f.long_span()).status == status::fingerprint_mismatch);
    CHECK(f.store->try_reserve(f.key(), "fp-a", f.long_span()).status == status::completed);
}

TEST_CASE("contract: a completed entry replays its exact bytes") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(r.status == status::reserved);
    REQUIRE(f.store->complete(f.key(), r.token, "fp", binary_payload, f.long_span()));
    auto replay = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(replay.status == status::completed);
    CHECK(replay.payload == binary_payload);
    CHECK(replay.payload.size() == binary_payload.size());
}

TEST_CASE("contract: an empty payload is a completed entry, not an in-flight one") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(f.store->complete(f.key(), r.token, "fp", "", f.long_span()));
    auto replay = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(replay.status == status::completed);
    CHECK(replay.payload.empty());
}

TEST_CASE("contract: every reservation gets a distinct token") {
    fixture f;
    auto first = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(f.store->release(f.key(), first.token));
    auto second = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(second.status == status::reserved);
    auto other = f.store->try_reserve(f.key("k-2"), "fp", f.long_span());
    CHECK(first.token != second.token);
    CHECK(other.token != second.token);
    CHECK(other.token != first.token);
}

TEST_CASE("contract: a wrong token can neither release nor complete") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(r.status == status::reserved);
    CHECK_FALSE(f.store->release(f.key(), "not-the-token"));
    CHECK_FALSE(f.store->complete(f.key(), "not-the-token", "fp", "x", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    CHECK(f.store->complete(f.key(), r.token, "fp", "mine", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "mine");
}

TEST_CASE("contract: release frees the key; a completed entry cannot be released") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(f.store->release(f.key(), r.token));
    CHECK_FALSE(f.store->release(f.key(), r.token));
    auto again = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(again.status == status::reserved);
    REQUIRE(f.store->complete(f.key(), again.token, "fp", "kept", f.long_span()));
    CHECK_FALSE(f.store->release(f.key(), again.token));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "kept");
}

TEST_CASE("contract: a late request cannot release or complete over the retry that took over") {
    fixture f;
    auto late = f.store->try_reserve(f.key(), "fp", f.span);
    REQUIRE(late.status == status::reserved);
    f.ctx.advance(f.span * 2);
    auto retry = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(retry.status == status::reserved);
    CHECK(retry.token != late.token);
    CHECK_FALSE(f.store->release(f.key(), late.token));
    CHECK_FALSE(f.store->complete(f.key(), late.token, "fp", "late", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    CHECK(f.store->complete(f.key(), retry.token, "fp", "retry", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "retry");
}

TEST_CASE("contract: an expired reservation nobody took over still completes") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.span);
    REQUIRE(r.status == status::reserved);
    f.ctx.advance(f.span * 2);
    CHECK(f.store->complete(f.key(), r.token, "fp", "slow but alone", f.long_span()));
    auto replay = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(replay.status == status::completed);
    CHECK(replay.payload == "slow but alone");
}

TEST_CASE("contract: a second complete keeps the first payload") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(f.store->complete(f.key(), r.token, "fp", "first", f.long_span()));
    CHECK_FALSE(f.store->complete(f.key(), r.token, "fp", "second", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "first");
}

TEST_CASE("contract: the lease bounds the reservation, the retention the completed entry") {
    fixture f;
    // An abandoned reservation frees the key when its lease ends.
    auto abandoned = f.store->try_reserve(f.key("lease"), "fp", f.span);
    REQUIRE(abandoned.status == status::reserved);
    f.ctx.advance(f.span * 2);
    CHECK(f.store->try_reserve(f.key("lease"), "fp", f.long_span()).status == status::reserved);

    // A completion outlives the lease it was reserved with, until its retention ends.
    auto r = f.store->try_reserve(f.key("retention"), "fp", f.span);
    REQUIRE(f.store->complete(f.key("retention"), r.token, "fp", "kept", f.span * 4));
    f.ctx.advance(f.span * 2);
    CHECK(f.store->try_reserve(f.key("retention"), "fp", f.long_span()).status == status::completed);
    f.ctx.advance(f.span * 3);
    auto after = f.store->try_reserve(f.key("retention"), "other-fp", f.long_span());
    CHECK(after.status == status::reserved);
}

TEST_CASE("contract: keys, namespaces and scopes are independent") {
    fixture f;
    auto a = f.store->try_reserve(f.key("a"), "fp", f.long_span());
    auto b = f.store->try_reserve(f.key("b"), "fp", f.long_span());
    auto other_ns = f.store->try_reserve(record_key(f.ns + ".other", scope::tenant("t"), "a"), "fp", f.long_span());
    auto other_scope = f.store->try_reserve(record_key(f.ns, scope::user("t"), "a"), "fp", f.long_span());
    auto global = f.store->try_reserve(record_key(f.ns, "a"), "fp", f.long_span());
    for (const auto* r : {&a, &b, &other_ns, &other_scope, &global}) CHECK(r->status == status::reserved);
    REQUIRE(f.store->complete(f.key("a"), a.token, "fp", "a", f.long_span()));
    CHECK(f.store->try_reserve(f.key("b"), "fp", f.long_span()).status == status::in_flight);
}

TEST_CASE("contract: case and trailing spaces make distinct scopes and keys") {
    fixture f;
    const std::vector<record_key> keys{
        record_key(f.ns, scope::tenant("abc"), "key"),  record_key(f.ns, scope::tenant("ABC"), "key"),
        record_key(f.ns, scope::tenant("abc "), "key"), record_key(f.ns, scope::tenant("abc"), "KEY"),
        record_key(f.ns, scope::tenant("abc"), "key "), record_key(f.ns + " ", scope::tenant("abc"), "key"),
    };
    for (std::size_t i = 0; i < keys.size(); ++i) {
        auto r = f.store->try_reserve(keys[i], "fp", f.long_span());
        CHECK_MESSAGE(r.status == status::reserved, "variant " << i);
        REQUIRE(f.store->complete(keys[i], r.token, "fp", "payload " + std::to_string(i), f.long_span()));
    }
    for (std::size_t i = 0; i < keys.size(); ++i)
        CHECK(f.store->try_reserve(keys[i], "fp", f.long_span()).payload == "payload " + std::to_string(i));
}

TEST_CASE("contract: concurrent reserves of one key give exactly one reserved" *
          doctest::test_suite("atomic_reserve")) {
    fixture f;
    const int threads = f.ctx.race_threads();
    const int rounds = f.ctx.race_rounds();
    std::barrier start(threads);
    std::vector<std::atomic<int>> winners(static_cast<std::size_t>(rounds));
    std::vector<std::atomic<int>> in_flight(static_cast<std::size_t>(rounds));
    std::atomic<int> failures{0};
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            for (int round = 0; round < rounds; ++round) {
                const record_key key(f.ns, scope::global(), "race-" + std::to_string(round));
                start.arrive_and_wait();
                try {
                    auto r = f.store->try_reserve(key, "fp", f.long_span());
                    if (r.status == status::reserved) ++winners[static_cast<std::size_t>(round)];
                    if (r.status == status::in_flight) ++in_flight[static_cast<std::size_t>(round)];
                } catch (const std::exception&) {
                    ++failures;
                }
            }
        });
    }
    pool.clear();
    CHECK(failures == 0);
    int exact = 0;
    for (int round = 0; round < rounds; ++round) {
        const auto i = static_cast<std::size_t>(round);
        CHECK_MESSAGE(winners[i] == 1, "round " << round);
        CHECK_MESSAGE(in_flight[i] == threads - 1, "round " << round);
        exact += winners[i] == 1 ? 1 : 0;
    }
    MESSAGE(f.ctx.name() << ": " << threads << " threads x " << rounds << " rounds, exactly one winner in " << exact
                         << " rounds");
}

TEST_CASE("contract: purge removes expired entries only, in bounded batches") {
    fixture f;
    std::vector<record_key> expired;
    for (int i = 0; i < 5; ++i) {
        expired.emplace_back(f.ns, scope::global(), "expired-" + std::to_string(i));
        auto r = f.store->try_reserve(expired.back(), "fp", f.span);
        if (i % 2 == 0) REQUIRE(f.store->complete(expired.back(), r.token, "fp", "x", f.span));
    }
    auto live = f.store->try_reserve(f.key("live"), "fp", f.long_span());
    auto done = f.store->try_reserve(f.key("done"), "fp", f.long_span());
    REQUIRE(f.store->complete(f.key("done"), done.token, "fp", "kept", f.long_span()));
    f.ctx.advance(f.span * 2);

    std::size_t purged = f.store->purge_expired(2);
    CHECK(purged <= 2);
    while (std::size_t more = f.store->purge_expired(1000)) purged += more;
    if (f.store->traits().self_expiring)
        CHECK(purged == 0);
    else
        CHECK(purged >= expired.size());  // shared databases may hold other scenarios' expired rows too
    CHECK(f.store->try_reserve(f.key("live"), "fp", f.long_span()).status == status::in_flight);
    CHECK(f.store->try_reserve(f.key("done"), "fp", f.long_span()).payload == "kept");
    CHECK(f.store->complete(f.key("live"), live.token, "fp", "still mine", f.long_span()));
    for (const auto& k : expired) CHECK(f.store->try_reserve(k, "fp", f.long_span()).status == status::reserved);
}

TEST_CASE("contract: bad arguments are rejected and change nothing") {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK_THROWS_AS((void)f.store->try_reserve(f.key("x"), "", f.long_span()), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->try_reserve(f.key("x"), "fp", duration::zero()), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->try_reserve(f.key("x"), "fp", -1s), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), "", "fp", "p", f.long_span()), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "", "p", f.long_span()), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "fp", "p", 0s), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->release(f.key(), ""), std::invalid_argument);
    CHECK_THROWS_AS(f.store->purge_expired(0), std::invalid_argument);
    CHECK(f.store->try_reserve(f.key("x"), "fp", f.long_span()).status == status::reserved);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    CHECK(f.store->complete(f.key(), r.token, "fp", "p", f.long_span()));
}

TEST_CASE("contract: a lease or retention above 100 years is refused and stores nothing") {
    fixture f;
    CHECK_THROWS_AS((void)f.store->try_reserve(f.key(), "fp", duration::max()), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->try_reserve(f.key(), "fp", max_duration + 1ns), std::invalid_argument);
    // Nothing was stored: the key is still free.
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(r.status == status::reserved);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "fp", "p", duration::max()), std::invalid_argument);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    CHECK(f.store->complete(f.key(), r.token, "fp", "p", max_duration));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "p");
}

TEST_CASE("contract: the longest lease holds the key: a second reserve never also wins it") {
    fixture f;
    REQUIRE(f.store->try_reserve(f.key(), "fp", max_duration).status == status::reserved);
    CHECK(f.store->try_reserve(f.key(), "fp", 1s).status == status::in_flight);
    f.ctx.advance(f.span);
    CHECK(f.store->try_reserve(f.key(), "fp", 1s).status == status::in_flight);
    // A purge may remove other tests' entries that expired meanwhile, never this one.
    (void)f.store->purge_expired(1000);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
}

// Off a server clock the context moves time itself, so expiry can be checked to
// the millisecond: expired means expires_at <= now, in every store.
TEST_CASE("contract: an entry is live until the instant its lease or retention ends" *
          doctest::test_suite("local_clock")) {
    fixture f;
    const duration lease = f.span;
    auto r = f.store->try_reserve(f.key(), "fp", lease);
    REQUIRE(r.status == status::reserved);
    f.ctx.advance(lease - 1ms);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    f.ctx.advance(1ms);
    auto retry = f.store->try_reserve(f.key(), "fp", lease);
    REQUIRE(retry.status == status::reserved);
    REQUIRE(f.store->complete(f.key(), retry.token, "fp", "done", lease * 2));
    f.ctx.advance(lease * 2 - 1ms);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::completed);
    f.ctx.advance(1ms);
    CHECK(f.store->try_reserve(f.key(), "other-fp", f.long_span()).status == status::reserved);
}

// ---------------------------------------------------------------------------
// Stores that are a record_inspector (every built-in one): a look at one record
// by its key that reports what the store holds and changes nothing.

namespace {

struct inspect_fixture : fixture {
    record_inspector& inspector = as_inspector(*store);

    static record_inspector& as_inspector(record_store& s) {
        auto* inspector = dynamic_cast<record_inspector*>(&s);
        if (inspector == nullptr)
            throw std::logic_error("the inspect suite ran for a store that is no record_inspector");
        return *inspector;
    }
    // A store that keeps no write time reports zero; one that keeps it, a time
    // at most `within` before the read, on the store's clock.
    static void check_written(const record_state& r, duration within) {
        if (r.created_at == time_point{}) return;
        CHECK(r.created_at <= r.now);
        CHECK(r.created_at >= r.now - within);
    }
};

}  // namespace

TEST_CASE("contract: inspect reports a record's state, expiry, namespace and payload, and changes nothing" *
          doctest::test_suite("inspect")) {
    inspect_fixture f;
    INFO("store: " << f.ctx.name());
    CHECK_FALSE(f.inspector.inspect(f.key("never"), true));

    auto r = f.store->try_reserve(f.key("running"), "fp", f.long_span());
    REQUIRE(r.status == status::reserved);
    const auto running = f.inspector.inspect(f.key("running"), true);
    REQUIRE(running);
    CHECK_FALSE(running->completed);
    CHECK_FALSE(running->expired());
    CHECK(running->expires_at - running->now <= f.long_span());
    CHECK(running->expires_at - running->now > f.long_span() / 2);
    CHECK(running->name_space == f.ns);
    CHECK(running->payload_bytes == 0);
    CHECK_FALSE(running->payload);  // in flight: no payload, even when asked for
    f.check_written(*running, f.long_span());
    // Reading changed nothing: the key is still in flight, and its token still completes it.
    CHECK(f.store->try_reserve(f.key("running"), "fp", f.long_span()).status == status::in_flight);

    REQUIRE(f.store->complete(f.key("running"), r.token, "fp", binary_payload, f.long_span() * 2));
    const auto done = f.inspector.inspect(f.key("running"), true);
    REQUIRE(done);
    CHECK(done->completed);
    CHECK_FALSE(done->expired());
    CHECK(done->expires_at - done->now > f.long_span());
    CHECK(done->payload_bytes == binary_payload.size());
    REQUIRE(done->payload);
    CHECK(*done->payload == binary_payload);
    const auto without = f.inspector.inspect(f.key("running"), false);
    REQUIRE(without);
    CHECK(without->payload_bytes == binary_payload.size());
    CHECK_FALSE(without->payload);
    CHECK(f.store->try_reserve(f.key("running"), "fp", f.long_span()).payload == binary_payload);

    // An empty payload is a completed record of 0 bytes.
    auto e = f.store->try_reserve(f.key("empty"), "fp", f.long_span());
    REQUIRE(f.store->complete(f.key("empty"), e.token, "fp", "", f.long_span()));
    const auto empty = f.inspector.inspect(f.key("empty"), true);
    REQUIRE(empty);
    CHECK(empty->completed);
    CHECK(empty->payload_bytes == 0);
    CHECK(empty->payload.value_or("not read") == "");

    // Another scope, key or namespace is another record, byte for byte.
    CHECK_FALSE(f.inspector.inspect(record_key(f.ns, scope::tenant("T"), "running"), false));
    CHECK_FALSE(f.inspector.inspect(record_key(f.ns, scope::tenant("t"), "running "), false));
    CHECK_FALSE(f.inspector.inspect(record_key(f.ns + ".other", scope::tenant("t"), "running"), false));

    // Released: gone.
    auto released = f.store->try_reserve(f.key("released"), "fp", f.long_span());
    REQUIRE(f.store->release(f.key("released"), released.token));
    CHECK_FALSE(f.inspector.inspect(f.key("released"), false));
}

TEST_CASE("contract: inspect reports an expired record as expired, or not at all" * doctest::test_suite("inspect")) {
    inspect_fixture f;
    INFO("store: " << f.ctx.name());
    REQUIRE(f.store->try_reserve(f.key("lease"), "fp", f.span).status == status::reserved);
    auto r = f.store->try_reserve(f.key("retention"), "fp", f.long_span());
    REQUIRE(f.store->complete(f.key("retention"), r.token, "fp", "kept", f.span));
    f.ctx.advance(f.span * 2);
    // Kept until a purge (SQL), a sweep (memory) or at once dropped (Redis): either
    // way never reported live.
    const auto lease = f.inspector.inspect(f.key("lease"), false);
    if (lease) {
        CHECK(lease->expired());
        CHECK_FALSE(lease->completed);
    }
    const auto retention = f.inspector.inspect(f.key("retention"), true);
    if (retention) {
        CHECK(retention->expired());
        CHECK(retention->completed);
        CHECK(retention->payload_bytes == 4);
    }
    // A retry takes the key over; inspect then reports the new reservation.
    REQUIRE(f.store->try_reserve(f.key("retention"), "other-fp", f.long_span()).status == status::reserved);
    const auto taken = f.inspector.inspect(f.key("retention"), true);
    REQUIRE(taken);
    CHECK_FALSE(taken->completed);
    CHECK_FALSE(taken->expired());
}

// Stores that remember a key past its result (store_traits::remembers).

namespace {

// Deletes every expired entry and ended tombstone the store holds.
void purge_all(record_store& store) {
    while (store.purge_expired(1000) > 0) {
    }
}

}  // namespace

TEST_CASE("contract: a remembered key answers expired after its retention, until its window ends" *
          doctest::test_suite("remembers")) {
    fixture f;
    // Retention 5 spans, window 40: the checks inside it have 32 spans to run in.
    auto r = f.store->try_reserve(f.key(), "fp", f.span);
    REQUIRE(r.status == status::reserved);
    REQUIRE(f.store->complete(f.key(), r.token, "fp", "paid", f.span * 5, f.span * 40));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "paid");  // the result, while it is kept
    auto plain = f.store->try_reserve(f.key("plain"), "fp", f.span);
    REQUIRE(f.store->complete(f.key("plain"), plain.token, "fp", "paid", f.span * 5));

    f.ctx.advance(f.span * 8);
    purge_all(*f.store);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::expired);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::expired);  // nothing was reserved
    CHECK(f.store->try_reserve(f.key(), "other-fp", f.long_span()).status == status::fingerprint_mismatch);
    // A key completed without a window is forgotten with its result.
    CHECK(f.store->try_reserve(f.key("plain"), "fp", f.long_span()).status == status::reserved);

    f.ctx.advance(f.span * 40);
    purge_all(*f.store);
    auto again = f.store->try_reserve(f.key(), "fp", f.span);
    CHECK(again.status == status::reserved);
}

TEST_CASE("contract: a remembered key's expired result is not taken over before the purge" *
          doctest::test_suite("remembers")) {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.span);
    REQUIRE(f.store->complete(f.key(), r.token, "fp", "paid", f.span * 2, f.span * 40));
    f.ctx.advance(f.span * 4);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::expired);
    CHECK(f.store->try_reserve(f.key(), "other-fp", f.long_span()).status == status::fingerprint_mismatch);
}

TEST_CASE("contract: a remembered window no longer than the retention is refused and stores nothing" *
          doctest::test_suite("remembers")) {
    fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(r.status == status::reserved);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "fp", "x", f.span * 2, f.span * 2),
                    std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "fp", "x", f.span * 2, f.span), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "fp", "x", f.span * 2, -f.span), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store->complete(f.key(), r.token, "fp", "x", f.span * 2, max_duration + 1ms),
                    std::invalid_argument);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
}

TEST_CASE("contract: a remembered key's tombstone is written with its result in the transaction" *
          doctest::test_suite("remembers")) {
    fixture f;
    if (!f.store->traits().joins_transactions) return;
    transactional_record_store& joined = dynamic_cast<transactional_record_store&>(*f.store);
    // Rolled back: neither the result nor the tombstone.
    f.ctx.run_in_transaction(
        [&](unit_of_work& tx) {
            auto r = joined.try_reserve(tx, f.key("undone"), "fp", f.span);
            REQUIRE(r.status == status::reserved);
            CHECK(joined.complete(tx, f.key("undone"), r.token, "fp", "x", f.span * 2, f.span * 40));
        },
        false);
    f.ctx.run_in_transaction(
        [&](unit_of_work& tx) {
            auto r = joined.try_reserve(tx, f.key("done"), "fp", f.span);
            REQUIRE(r.status == status::reserved);
            CHECK(joined.complete(tx, f.key("done"), r.token, "fp", "paid", f.span * 2, f.span * 40));
            // The one-statement form's record.
            joined.insert(tx, f.key("inserted"), "fp", std::string_view("paid"), f.span * 2, f.span * 40);
        },
        true);
    f.ctx.advance(f.span * 4);
    purge_all(*f.store);
    CHECK(f.store->try_reserve(f.key("undone"), "fp", f.long_span()).status == status::reserved);
    for (const char* k : {"done", "inserted"}) {
        CAPTURE(k);
        CHECK(f.store->try_reserve(f.key(k), "fp", f.long_span()).status == status::expired);
        f.ctx.run_in_transaction(
            [&](unit_of_work& tx) {
                const record_lookup found = joined.look_up(tx, f.key(k), "fp");
                CHECK(found.what == record_lookup::found::answer);
                CHECK(found.answer.status == status::expired);
                CHECK(joined.look_up(tx, f.key(k), "other").answer.status == status::fingerprint_mismatch);
                CHECK(joined.try_reserve(tx, f.key(k), "fp", f.long_span()).status == status::expired);
            },
            true);
    }
    CHECK_THROWS_AS(f.ctx.run_in_transaction(
                        [&](unit_of_work& tx) {
                            joined.insert(tx, f.key("in-flight"), "fp", std::nullopt, f.span * 2, f.span * 20);
                        },
                        true),
                    std::invalid_argument);
}

// ---------------------------------------------------------------------------
// Stores that join the caller's transaction (transactional_record_store).

namespace {

struct transaction_fixture : fixture {
    transactional_record_store& joined = as_transactional(*store);

    static transactional_record_store& as_transactional(record_store& s) {
        auto* joined = dynamic_cast<transactional_record_store*>(&s);
        if (joined == nullptr)
            throw std::logic_error("traits() say joins_transactions, but the store is no transactional_record_store");
        return *joined;
    }
    void in_transaction(const std::function<void(unit_of_work&)>& work, bool commit = true) {
        ctx.run_in_transaction(work, commit);
    }
};

}  // namespace

TEST_CASE("contract: a reservation whose transaction rolls back leaves nothing" *
          doctest::test_suite("joins_transactions")) {
    transaction_fixture f;
    f.in_transaction(
        [&](unit_of_work& tx) {
            auto r = f.joined.try_reserve(tx, f.key(), "fp", f.long_span());
            CHECK(r.status == status::reserved);
            CHECK_FALSE(r.token.empty());
        },
        false);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::reserved);
}

TEST_CASE("contract: a record completed in a committed transaction replays through the detached view" *
          doctest::test_suite("joins_transactions")) {
    transaction_fixture f;
    f.in_transaction([&](unit_of_work& tx) {
        auto r = f.joined.try_reserve(tx, f.key(), "fp", f.long_span());
        REQUIRE(r.status == status::reserved);
        CHECK(f.joined.complete(tx, f.key(), r.token, "fp", binary_payload, f.long_span()));
    });
    auto replay = f.store->try_reserve(f.key(), "fp", f.long_span());
    CHECK(replay.status == status::completed);
    CHECK(replay.payload == binary_payload);
    CHECK(f.store->try_reserve(f.key(), "other", f.long_span()).status == status::fingerprint_mismatch);
}

TEST_CASE("contract: a transaction sees what the detached view recorded, and settles it" *
          doctest::test_suite("joins_transactions")) {
    transaction_fixture f;
    auto done = f.store->try_reserve(f.key("done"), "fp", f.long_span());
    REQUIRE(f.store->complete(f.key("done"), done.token, "fp", "kept", f.long_span()));
    auto held = f.store->try_reserve(f.key("held"), "fp", f.long_span());
    REQUIRE(held.status == status::reserved);
    f.in_transaction([&](unit_of_work& tx) {
        auto replay = f.joined.try_reserve(tx, f.key("done"), "fp", f.long_span());
        CHECK(replay.status == status::completed);
        CHECK(replay.payload == "kept");
        CHECK(f.joined.try_reserve(tx, f.key("done"), "other", f.long_span()).status == status::fingerprint_mismatch);
        CHECK(f.joined.try_reserve(tx, f.key("held"), "fp", f.long_span()).status == status::in_flight);
        CHECK_FALSE(f.joined.release(tx, f.key("held"), "not-the-token"));
        CHECK(f.joined.release(tx, f.key("held"), held.token));
    });
    CHECK(f.store->try_reserve(f.key("held"), "fp", f.long_span()).status == status::reserved);
}

TEST_CASE("contract: a release or completion in a transaction that rolls back is undone" *
          doctest::test_suite("joins_transactions")) {
    transaction_fixture f;
    auto r = f.store->try_reserve(f.key(), "fp", f.long_span());
    REQUIRE(r.status == status::reserved);
    f.in_transaction([&](unit_of_work& tx) { CHECK(f.joined.release(tx, f.key(), r.token)); }, false);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    f.in_transaction(
        [&](unit_of_work& tx) { CHECK(f.joined.complete(tx, f.key(), r.token, "fp", "x", f.long_span())); }, false);
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).status == status::in_flight);
    CHECK(f.store->complete(f.key(), r.token, "fp", "after", f.long_span()));
    CHECK(f.store->try_reserve(f.key(), "fp", f.long_span()).payload == "after");
}

}  // namespace idem::contract
