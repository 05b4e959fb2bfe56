// Scenarios every SQL store runs in the caller's transaction, written once and
// called from each store's tests (tests/sqlite/sqlite_store_test.cpp,
// tests/postgresql/postgresql_store_test.cpp), which keep their dialect's own cases.
#pragma once

#include <doctest/doctest.h>

#include <soci/soci.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bank.hpp"
#include "idem/store_admin.hpp"

namespace idem::test {

// The store under test and the application's side of the bank: the business
// connection the store joins, its runner, and how to open another connection
// to the same database, as another instance of the service would.
struct store_under_test {
    transactional_record_store& store;
    soci::session& session;
    transaction_runner& runner;
    std::function<void(soci::session&)> connect;

    [[nodiscard]] long long records() const { return bank::count(session, "SELECT count(*) FROM idem_records"); }
    [[nodiscard]] long long ledger() const { return bank::count(session, "SELECT count(*) FROM ledger"); }
};

// A commit lands the business rows and the completed record together; a retry replays.
inline void commit_lands_rows_and_record(const store_under_test& s) {
    using namespace std::chrono_literals;
    CHECK(bank::transfer(s.store, s.runner, "t-1", 25) == bank::outcome::executed);
    CHECK(bank::balance(s.session, "alice") == bank::opening_balance - 25);
    auto replay = s.store.try_reserve(bank::transfer_key("t-1"), bank::fingerprint, 1min);
    CHECK(replay.status == reservation_status::completed);
    CHECK(replay.payload == "moved 25");
    CHECK(bank::transfer(s.store, s.runner, "t-1", 25) == bank::outcome::replayed);
    CHECK(bank::balance(s.session, "alice") == bank::opening_balance - 25);
    CHECK(s.ledger() == 1);
}

// A rollback after complete takes the record with the business rows, so a retry runs again.
inline void rollback_leaves_no_record(const store_under_test& s) {
    using namespace std::chrono_literals;
    CHECK_THROWS_AS(s.runner.run([&](unit_of_work& tx) {
        auto r = s.store.try_reserve(tx, bank::transfer_key("t-2"), bank::fingerprint, 1min);
        REQUIRE(r.status == reservation_status::reserved);
        bank::move_money(tx.sql(), "t-2", 10);
        REQUIRE(s.store.complete(tx, bank::transfer_key("t-2"), r.token, bank::fingerprint, "moved", 24h));
        throw bank::business_failure();  // after complete: the record goes with the data
    }),
                    bank::business_failure);
    CHECK(s.runner.last_state() == transaction_state::rolled_back);
    CHECK(s.records() == 0);
    CHECK(s.ledger() == 0);
    CHECK(bank::detached_status(s.store, "t-2") == reservation_status::reserved);
    CHECK(bank::transfer(s.store, s.runner, "t-2", 10) == bank::outcome::executed);
    CHECK(bank::balance(s.session, "alice") == bank::opening_balance - 10);
}

// A result the runner's predicate declines rolls back the same way: no record, no money moved.
inline void declined_result_leaves_no_record(const store_under_test& s) {
    using namespace std::chrono_literals;
    const long long balance_before = bank::balance(s.session, "alice");
    const long long ledger_before = s.ledger();
    const bool ok = s.runner.run(
        [&](unit_of_work& tx) {
            auto r = s.store.try_reserve(tx, bank::transfer_key("t-3"), bank::fingerprint, 1min);
            REQUIRE(r.status == reservation_status::reserved);
            bank::move_money(tx.sql(), "t-3", 10);
            return false;  // e.g. the provider declined: roll back
        },
        [](bool result) { return result; });
    CHECK_FALSE(ok);
    CHECK(bank::detached_status(s.store, "t-3") == reservation_status::reserved);
    CHECK(bank::balance(s.session, "alice") == balance_before);
    CHECK(s.ledger() == ledger_before);
}

// Inside the transaction a second reserve sees the key in flight; release frees
// it there, and the reservation taken again commits.
inline void release_inside_the_transaction(const store_under_test& s) {
    using namespace std::chrono_literals;
    s.runner.run([&](unit_of_work& tx) {
        auto r = s.store.try_reserve(tx, bank::transfer_key("t-4"), bank::fingerprint, 1min);
        REQUIRE(r.status == reservation_status::reserved);
        CHECK(s.store.try_reserve(tx, bank::transfer_key("t-4"), bank::fingerprint, 1min).status ==
              reservation_status::in_flight);
        CHECK(s.store.try_reserve(tx, bank::transfer_key("t-4"), "other", 1min).status ==
              reservation_status::fingerprint_mismatch);
        CHECK_FALSE(s.store.release(tx, bank::transfer_key("t-4"), "other-token"));
        CHECK(s.store.release(tx, bank::transfer_key("t-4"), r.token));
        CHECK(s.store.try_reserve(tx, bank::transfer_key("t-4"), bank::fingerprint, 1min).status ==
              reservation_status::reserved);
    });
    CHECK(bank::detached_status(s.store, "t-4") == reservation_status::in_flight);
}

// A first transfer reserves `key`, moves the money and holds its transaction
// open for 300 ms, then commits (or rolls back); a duplicate on another
// connection arrives meanwhile. Returns the duplicate's outcome and how long it waited.
inline std::pair<bank::outcome, std::chrono::milliseconds> duplicate_during(const store_under_test& s,
                                                                            const std::string& key, bool commits) {
    using namespace std::chrono_literals;
    std::promise<void> written;
    std::jthread first([&] {
        try {
            s.runner.run([&](unit_of_work& tx) {
                auto r = s.store.try_reserve(tx, bank::transfer_key(key), bank::fingerprint, 1min);
                REQUIRE(r.status == reservation_status::reserved);
                bank::move_money(tx.sql(), key, 10);
                written.set_value();
                std::this_thread::sleep_for(300ms);  // the duplicate arrives now
                if (!commits) throw bank::business_failure();
                REQUIRE(s.store.complete(tx, bank::transfer_key(key), r.token, bank::fingerprint, "moved 10", 24h));
            });
        } catch (const bank::business_failure&) {
        }
    });
    written.get_future().wait();
    soci::session other;
    s.connect(other);
    transaction_runner other_runner{other};
    const auto started = std::chrono::steady_clock::now();
    const auto outcome = bank::transfer(s.store, other_runner, key, 10);
    const auto waited = std::chrono::steady_clock::now() - started;
    first.join();
    return {outcome, std::chrono::duration_cast<std::chrono::milliseconds>(waited)};
}

// A duplicate on another connection waits for the first transfer's commit, then replays it.
inline void duplicate_waits_for_the_commit(const store_under_test& s) {
    using namespace std::chrono_literals;
    const auto [outcome, waited] = duplicate_during(s, "t-5", true);
    CHECK(outcome == bank::outcome::replayed);
    CHECK(waited >= 200ms);
    MESSAGE("the duplicate waited " << waited.count() << " ms for the first commit");
    CHECK(bank::balance(s.session, "alice") == bank::opening_balance - 10);
    CHECK(s.ledger() == 1);
}

// The transactional calls refuse a lease or retention above 100 years before
// writing anything; the longest accepted ones commit.
inline void over_long_durations_are_refused_in_the_transaction(const store_under_test& s) {
    using namespace std::chrono_literals;
    const auto key = bank::transfer_key("t-forever");
    s.runner.run([&](unit_of_work& tx) {
        CHECK_THROWS_AS((void)s.store.try_reserve(tx, key, bank::fingerprint, duration::max()), std::invalid_argument);
        CHECK_THROWS_AS((void)s.store.try_reserve(tx, key, bank::fingerprint, max_duration + 1ns),
                        std::invalid_argument);
        auto r = s.store.try_reserve(tx, key, bank::fingerprint, max_duration);
        REQUIRE(r.status == reservation_status::reserved);
        CHECK_THROWS_AS((void)s.store.complete(tx, key, r.token, bank::fingerprint, "p", duration::max()),
                        std::invalid_argument);
        CHECK(s.store.try_reserve(tx, key, bank::fingerprint, 1s).status == reservation_status::in_flight);
        CHECK(s.store.complete(tx, key, r.token, bank::fingerprint, "kept", max_duration));
    });
    CHECK(s.records() == 1);
    CHECK(s.store.try_reserve(key, bank::fingerprint, 1s).payload == "kept");
}

// Rows whose times a time_point cannot hold, written by the dialect's own SQL
// (`plant(key, which)`: "future" past 2262, "infinity", "-infinity"), are read,
// inspected and purged without overflow: the far ones stay live, the one before
// all time is expired.
inline void times_beyond_time_point_are_clamped(
    const store_under_test& s, store_admin& admin,
    const std::function<void(const std::string&, const std::string&)>& plant) {
    using namespace std::chrono_literals;
    const std::map<std::string, std::string> rows = {
        {"far-future", "future"}, {"far-infinity", "infinity"}, {"far-past", "-infinity"}};
    for (const auto& [key, which] : rows) {
        REQUIRE(s.store.try_reserve(record_key("far", key), "fp", 1min).status == reservation_status::reserved);
        plant(key, which);
    }
    for (const std::string key : {"far-future", "far-infinity"}) {
        CAPTURE(key);
        const record_key k("far", key);
        CHECK(s.store.try_reserve(k, "fp", 1s).status == reservation_status::in_flight);
        CHECK(s.store.try_reserve(k, "other", 1s).status == reservation_status::fingerprint_mismatch);
        const auto state = admin.inspect(k.digest(), true);
        REQUIRE(state);
        CHECK(state->expires_at == time_point::max());
        CHECK_FALSE(state->expired());
    }
    const auto past = admin.inspect(record_key("far", "far-past").digest(), false);
    REQUIRE(past);
    CHECK(past->expires_at == time_point::min());
    CHECK(past->created_at == time_point::min());
    CHECK(past->expired());
    CHECK(admin.count_expired(0s) == 1);
    CHECK(admin.count_expired(std::chrono::years(290)) == 1);
    CHECK(admin.purge_batch(100, 0s) == 1);
    CHECK(admin.purge_batch(100, 0s) == 0);
    CHECK(s.records() == 2);
    CHECK(s.store.try_reserve(record_key("far", "far-past"), "fp", 1s).status == reservation_status::reserved);
}

// store_admin::forget: a completed or expired record goes, by its digest or its
// 16 bytes, and its key then runs anew; one in flight stays unless forced; an
// absent one and a digest of another length change nothing. `pass(d)` lets d
// of the store's time go by (a manual clock, or a real wait).
inline void forget_deletes_one_record(const store_under_test& s, store_admin& admin,
                                      const std::function<void(duration)>& pass) {
    using namespace std::chrono_literals;
    const record_key done("forget", "done"), stale("forget", "stale"), running("forget", "running"),
        other("forget", "other");
    const auto first16 = [](const record_key& k) { return std::span<const std::byte>(k.digest()).first(16); };
    const auto d = s.store.try_reserve(done, "fp", 1min);
    REQUIRE(s.store.complete(done, d.token, "fp", "receipt", 1h));
    REQUIRE(s.store.try_reserve(stale, "fp", 100ms).status == reservation_status::reserved);
    pass(200ms);
    const auto r = s.store.try_reserve(running, "fp", 1h);
    REQUIRE(r.status == reservation_status::reserved);
    REQUIRE(s.store.try_reserve(other, "fp", 1h).status == reservation_status::reserved);
    REQUIRE(s.records() == 4);

    // Not there, or named by a digest of another length: nothing changes.
    CHECK(admin.forget(record_key("forget", "never").digest(), true).outcome == forget_outcome::not_found);
    CHECK_THROWS_AS((void)admin.forget(std::span<const std::byte>(done.digest()).first(15), true),
                    std::invalid_argument);
    CHECK_THROWS_AS((void)admin.forget(std::span<const std::byte>(), true), std::invalid_argument);
    CHECK(s.records() == 4);

    const forget_result completed = admin.forget(done.digest(), false);
    CHECK(completed.outcome == forget_outcome::deleted);
    CHECK(completed.record.completed);
    CHECK(completed.record.name_space == "forget");
    CHECK(completed.record.payload_bytes == 7);
    CHECK_FALSE(admin.inspect(done.digest(), false));
    CHECK(s.store.try_reserve(done, "fp", 1min).status == reservation_status::reserved);  // runs anew
    CHECK(admin.forget(done.digest(), true).outcome == forget_outcome::deleted);
    CHECK(admin.forget(done.digest(), true).outcome == forget_outcome::not_found);

    const forget_result expired = admin.forget(first16(stale), false);
    CHECK(expired.outcome == forget_outcome::deleted);
    CHECK_FALSE(expired.record.completed);
    CHECK(expired.record.expired());

    const forget_result kept = admin.forget(first16(running), false);
    CHECK(kept.outcome == forget_outcome::refused_in_flight);
    CHECK_FALSE(kept.record.completed);
    CHECK_FALSE(kept.record.expired());
    CHECK(kept.record.expires_at > kept.record.now + 50min);
    CHECK(s.store.try_reserve(running, "fp", 1h).status == reservation_status::in_flight);  // untouched
    const forget_result forced = admin.forget(running.digest(), true);
    CHECK(forced.outcome == forget_outcome::deleted);
    CHECK_FALSE(forced.record.completed);
    CHECK_FALSE(admin.inspect(running.digest(), false));
    CHECK(s.store.try_reserve(running, "fp", 1h).status == reservation_status::reserved);

    CHECK(admin.inspect(other.digest(), false));  // only the named records went
    CHECK(s.records() == 2);
}

// store_admin::recent: the namespace's records written last, newest first,
// expired ones too, at most `limit`; the namespace compared byte for byte;
// bad arguments are std::invalid_argument.
inline void recent_lists_a_namespace_newest_first(const store_under_test& s, store_admin& admin,
                                                  const std::function<void(duration)>& pass) {
    using namespace std::chrono_literals;
    std::vector<record_key> keys;
    for (int i = 0; i < 5; ++i) {
        keys.emplace_back("recent", "k-" + std::to_string(i));
        const auto r = s.store.try_reserve(keys.back(), "fp", i == 0 ? 50ms : 1h);
        REQUIRE(r.status == reservation_status::reserved);
        if (i % 2 == 1) REQUIRE(s.store.complete(keys.back(), r.token, "fp", std::string(i, 'p'), 1h));
        pass(20ms);
    }
    for (const std::string ns : {"recent.other", "Recent", "recen"})
        REQUIRE(s.store.try_reserve(record_key(ns, "k-9"), "fp", 1h).status == reservation_status::reserved);
    pass(100ms);  // k-0's lease is over

    const auto id_of = [](const record_key& k) {
        std::array<std::byte, 16> id{};
        std::copy_n(k.digest().begin(), 16, id.begin());
        return id;
    };
    const auto three = admin.recent("recent", 3);
    REQUIRE(three.size() == 3);
    for (int i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(three[i].key_hash == id_of(keys[4 - i]));
        CHECK(three[i].state.name_space == "recent");
        CHECK(three[i].state.completed == ((4 - i) % 2 == 1));
        CHECK_FALSE(three[i].state.expired());
    }
    CHECK(three[1].state.payload_bytes == 3);
    CHECK(three[0].state.created_at > three[1].state.created_at);
    const auto all = admin.recent("recent", max_recent_records);
    REQUIRE(all.size() == 5);
    CHECK(all.back().key_hash == id_of(keys[0]));
    CHECK(all.back().state.expired());
    CHECK(admin.recent("recent.other", 10).size() == 1);
    CHECK(admin.recent("absent", 10).empty());

    for (const std::size_t limit : {std::size_t{0}, max_recent_records + 1}) {
        CAPTURE(limit);
        CHECK_THROWS_AS((void)admin.recent("recent", limit), std::invalid_argument);
    }
    CHECK_THROWS_AS((void)admin.recent("", 10), std::invalid_argument);
    CHECK_THROWS_AS((void)admin.recent("caf\xC3", 10), std::invalid_argument);
    CHECK(s.records() == 8);
}

}  // namespace idem::test
