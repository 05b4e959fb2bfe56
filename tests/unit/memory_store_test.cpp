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
