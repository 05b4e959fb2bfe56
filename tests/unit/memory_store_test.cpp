// Memory-store specifics beyond the shared contract (tests/contract).
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;

TEST_CASE("memory store: expired entries are swept as the store is used, without purge") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    for (int i = 0; i < 1000; ++i) (void)store.try_reserve(record_key("ns", "k" + std::to_string(i)), "fp", 1s);
    CHECK(store.size() == 1000);
    clock->advance(2s);
    for (int i = 0; i < 1000; ++i) (void)store.try_reserve(record_key("other", "k" + std::to_string(i)), "fp", 1h);
    // Each call sweeps a few expired entries of its shard: the backlog shrinks with traffic.
    const std::size_t before = store.size();
    CHECK(before < 2000);
    CHECK(before >= 1000);
    CHECK(store.purge_expired(100000) == before - 1000);
    CHECK(store.size() == 1000);
}

TEST_CASE("memory store: expiry saturates at the end of time instead of wrapping into the past") {
    auto clock = std::make_shared<manual_clock>(time_point::max() - 1h);
    memory_store store(clock);
    const record_key key("ns", "k");
    auto r = store.try_reserve(key, "fp", max_duration);
    REQUIRE(r.status == reservation_status::reserved);
    CHECK(store.try_reserve(key, "fp", 1s).status == reservation_status::in_flight);
    REQUIRE(store.complete(key, r.token, "fp", "done", max_duration));
    CHECK(store.purge_expired(10) == 0);
    CHECK(store.try_reserve(key, "fp", 1s).payload == "done");
}

TEST_CASE("memory store: many threads on many keys keep every entry consistent") {
    memory_store store;
    constexpr int threads = 8;
    constexpr int keys = 500;
    std::atomic<int> reserved{0};
    std::atomic<int> completed{0};
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&] {
                for (int i = 0; i < keys; ++i) {
                    const record_key key("ns", "k" + std::to_string(i));
                    auto r = store.try_reserve(key, "fp", 1min);
                    if (r.status == reservation_status::reserved) {
                        ++reserved;
                        if (store.complete(key, r.token, "fp", std::to_string(i), 1h)) ++completed;
                    }
                }
            });
        }
    }
    CHECK(reserved == keys);
    CHECK(completed == keys);
    for (int i = 0; i < keys; ++i)
        CHECK(store.try_reserve(record_key("ns", "k" + std::to_string(i)), "fp", 1min).payload == std::to_string(i));
}

TEST_CASE("memory store: an entry is swept at its own expiry, whether the completion lengthens or shortens it") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    const record_key longer("ns", "longer"), shorter("ns", "shorter");
    const auto r1 = store.try_reserve(longer, "fp", 10s);
    const auto r2 = store.try_reserve(shorter, "fp", 1h);
    REQUIRE(store.complete(longer, r1.token, "fp", "kept", 1h));
    REQUIRE(store.complete(shorter, r2.token, "fp", "brief", 10s));
    clock->advance(11s);
    // The lease's end passed: the completed record stays; the short retention ended.
    CHECK(store.purge_expired(10) == 1);
    CHECK(store.try_reserve(longer, "fp", 1s).payload == "kept");
    CHECK(store.try_reserve(shorter, "fp", 1s).status == reservation_status::reserved);
    clock->advance(1h);
    CHECK(store.purge_expired(10) == 2);
    CHECK(store.size() == 0);
}

TEST_CASE("memory store: an entry made in the place of a swept one starts empty") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    for (int i = 0; i < 200; ++i) {
        const record_key old("ns", "old" + std::to_string(i));
        const auto r = store.try_reserve(old, "old fingerprint", 1s);
        REQUIRE(store.complete(old, r.token, "old fingerprint", std::string(2000, 'x'), 1s));
    }
    clock->advance(2s);
    CHECK(store.purge_expired(1000) == 200);
    for (int i = 0; i < 200; ++i) {
        const record_key fresh("ns", "fresh" + std::to_string(i));
        const auto r = store.try_reserve(fresh, "fp", 1min);
        REQUIRE(r.status == reservation_status::reserved);
        CHECK(store.try_reserve(fresh, "fp", 1min).status == reservation_status::in_flight);
        CHECK(store.try_reserve(fresh, "old fingerprint", 1min).status == reservation_status::fingerprint_mismatch);
        CHECK_FALSE(store.complete(fresh, "another token", "fp", "no", 1h));
        REQUIRE(store.complete(fresh, r.token, "fp", "new", 1h));
        CHECK(store.try_reserve(fresh, "fp", 1min).payload == "new");
    }
}

TEST_CASE("memory store: an expired reservation is taken over in place, and its old token no longer counts") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    const record_key key("ns", "k");
    const auto first = store.try_reserve(key, "fp", 1s);
    clock->advance(2s);
    CHECK_FALSE(store.release(key, first.token));  // expired: nothing to release, and it is gone
    CHECK(store.size() == 0);
    const auto second = store.try_reserve(key, "fp", 1s);
    clock->advance(2s);
    const auto third = store.try_reserve(key, "fp", 1min);
    REQUIRE(third.status == reservation_status::reserved);
    CHECK_FALSE(store.complete(key, second.token, "fp", "late", 1h));
    CHECK_FALSE(store.release(key, second.token));
    CHECK(store.complete(key, third.token, "fp", "done", 1h));
    CHECK(store.size() == 1);
}
