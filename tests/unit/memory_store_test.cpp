// Memory-store specifics beyond the shared contract (tests/contract).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
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

TEST_CASE("memory store: short leases among long retentions never make the store grow without bound") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    constexpr int kept = 2000;
    for (int i = 0; i < kept; ++i) {
        const record_key key("kept", std::to_string(i));
        const auto r = store.try_reserve(key, "fp", 1min);
        REQUIRE(store.complete(key, r.token, "fp", "result", 24h));
    }
    // Waves of short leases on fresh keys, each wave expired before the next:
    // without purge, only the sweeps of the calls themselves bound the store.
    constexpr int wave = 1000;
    std::size_t largest = 0;
    for (int w = 0; w < 100; ++w) {
        for (int i = 0; i < wave; ++i)
            (void)store.try_reserve(record_key("brief", std::to_string(w) + "-" + std::to_string(i)), "fp", 1s);
        largest = std::max(largest, store.size());
        clock->advance(2s);
    }
    // 102,000 entries were made; at most 3,000 are live at once, and the
    // expired ones left stay within a third of those.
    CHECK(largest <= (kept + wave) * 4 / 3);
    CHECK(store.purge_expired(1000000) <= largest - kept);
    CHECK(store.size() == kept);
    for (int i = 0; i < kept; i += 97)
        CHECK(store.try_reserve(record_key("kept", std::to_string(i)), "fp", 1s).payload == "result");
}

TEST_CASE("memory store: purge in small batches removes every expired entry and only those") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    std::vector<std::string> tokens;
    for (int i = 0; i < 3000; ++i)
        tokens.push_back(store.try_reserve(record_key("ns", std::to_string(i)), "fp", i % 2 == 0 ? 1s : 1h).token);
    clock->advance(2s);
    // Releases and calls on other keys move entries and the sweeps part way round.
    for (int i = 1; i < 3000; i += 6) REQUIRE(store.release(record_key("ns", std::to_string(i)), tokens[i]));
    for (int i = 0; i < 300; ++i) (void)store.try_reserve(record_key("other", std::to_string(i)), "fp", 1h);
    const std::size_t expired = store.size() - (1500 - 500) - 300;
    std::size_t purged = 0;
    std::size_t batch = 0;
    do {
        batch = store.purge_expired(7);
        purged += batch;
    } while (batch == 7);
    CHECK(store.purge_expired(7) == 0);  // a batch short of its limit left none
    CHECK(purged == expired);
    CHECK(store.size() == 1000 + 300);
    for (int i = 1; i < 3000; i += 2) {
        const auto status = store.try_reserve(record_key("ns", std::to_string(i)), "fp", 1h).status;
        CHECK(status == (i % 6 == 1 ? reservation_status::reserved : reservation_status::in_flight));
    }
}

TEST_CASE("memory store: forget deletes a completed or expired entry; one in flight only when forced") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store(clock);
    const record_key done("forget", "done"), running("forget", "running"), stale("forget", "stale");
    auto r = store.try_reserve(done, "fp", 1min);
    REQUIRE(store.complete(done, r.token, "fp", std::string("re\0sult", 7), 1h));
    REQUIRE(store.try_reserve(running, "fp", 1min).status == reservation_status::reserved);
    REQUIRE(store.try_reserve(stale, "fp", 1s).status == reservation_status::reserved);
    clock->advance(2s);

    CHECK(store.forget(record_key("forget", "never"), true).outcome == forget_outcome::not_found);
    const forget_result completed = store.forget(done, false);
    CHECK(completed.outcome == forget_outcome::deleted);
    CHECK(completed.record.completed);
    CHECK(completed.record.payload_bytes == 7);
    CHECK(completed.record.name_space == "forget");
    CHECK(completed.record.expires_at == completed.record.now + 1h - 2s);
    CHECK(store.forget(done, false).outcome == forget_outcome::not_found);
    // Its key runs anew.
    CHECK(store.try_reserve(done, "other fingerprint", 1min).status == reservation_status::reserved);

    CHECK(store.forget(stale, false).outcome == forget_outcome::deleted);

    const forget_result kept = store.forget(running, false);
    CHECK(kept.outcome == forget_outcome::refused_in_flight);
    CHECK_FALSE(kept.record.completed);
    CHECK(kept.record.expires_at - kept.record.now == 58s);
    CHECK(store.try_reserve(running, "fp", 1min).status == reservation_status::in_flight);
    CHECK(store.forget(running, true).outcome == forget_outcome::deleted);
    CHECK(store.try_reserve(running, "fp", 1min).status == reservation_status::reserved);
    CHECK(store.size() == 2);
}

TEST_CASE("memory store: a remembered key's tombstone outlives its result; forget and the purge delete it") {
    auto clock = std::make_shared<manual_clock>();
    memory_store store{clock};
    const record_key paid("remember", "paid"), other("remember", "other");
    for (const auto& k : {paid, other}) {
        auto r = store.try_reserve(k, "fp", 1min);
        REQUIRE(store.complete(k, r.token, "fp", "receipt", 1h, 24h));
    }
    clock->advance(2h);
    CHECK(store.purge_expired(1000) == 2);  // the two results; the tombstones stay
    CHECK(store.size() == 0);
    CHECK(store.try_reserve(paid, "fp", 1min).status == reservation_status::expired);
    CHECK(store.try_reserve(paid, "another", 1min).status == reservation_status::fingerprint_mismatch);
    CHECK(store.size() == 0);  // answering took no slot

    const forget_result forgotten = store.forget(paid, false);
    CHECK(forgotten.outcome == forget_outcome::tombstone_deleted);
    CHECK(forgotten.tombstone);
    CHECK(forgotten.record.expires_at == forgotten.record.now + 22h);
    CHECK(store.forget(paid, false).outcome == forget_outcome::not_found);
    auto again = store.try_reserve(paid, "fp", 1min);
    CHECK(again.status == reservation_status::reserved);
    // Completed again with a window, then forgotten with its record: both go.
    REQUIRE(store.complete(paid, again.token, "fp", "second", 1h, 24h));
    const forget_result forgotten_both = store.forget(paid, false);
    CHECK(forgotten_both.outcome == forget_outcome::deleted);
    CHECK(forgotten_both.tombstone);
    CHECK(store.try_reserve(paid, "fp", 1min).status == reservation_status::reserved);

    clock->advance(23h);  // other's window ended: the purge deletes its tombstone, and the key runs again
    CHECK(store.purge_expired(1000) >= 1);
    CHECK(store.try_reserve(other, "fp", 1min).status == reservation_status::reserved);
}
