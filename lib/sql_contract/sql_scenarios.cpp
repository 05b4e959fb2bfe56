// The scenarios every SQL store passes in the caller's transaction, written
// once and run against every SQL store: the built-in ones in tests/contract,
// anyone's through idem::contract::run_sql. What only one dialect has (PostgreSQL's
// one-statement path, SQLite's file locking, rows its own SQL plants) stays in
// that store's tests. Scenarios on store_admin sit in the doctest suite
// "store_admin", which run_sql excludes for a store that is none.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bank.hpp"
#include "idem/store_admin.hpp"
#include "sql_context.hpp"

namespace idem::contract {
namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;

// One scenario's store and the application's side of the bank: a business
// session the store joins, its runner, and the bank at its opening balances
// with no records.
struct fixture {
    sql_store_context& ctx = current_sql();
    std::shared_ptr<transactional_record_store> owned = ctx.make_store();
    transactional_record_store& store = *owned;
    soci::session session;
    bool opened = open();
    transaction_runner runner{session};

    bool open() {
        ctx.connect(session);
        bank::create_portable_schema(session);
        ctx.clear_records(session);
        return true;
    }
    // run_sql excludes the store_admin suite for a store that is none.
    [[nodiscard]] store_admin& admin() { return dynamic_cast<store_admin&>(store); }
    [[nodiscard]] long long records() { return bank::count(session, "SELECT count(*) FROM idem_records"); }
    [[nodiscard]] long long ledger() { return bank::count(session, "SELECT count(*) FROM ledger"); }
};

// A first transfer reserves `key`, moves the money and holds its transaction
// open for 300 ms, then commits (or rolls back); a duplicate on another
// connection arrives meanwhile. Returns the duplicate's outcome and how long it waited.
// What a duplicate arriving while the first transaction of `key` holds its
// reservation did, and whether it waited: it ended after the first had
// slept its 300 ms, so it cannot have gone past the held record (a duration
// would depend on when this thread woke up on a loaded machine).
std::pair<bank::outcome, bool> duplicate_during(fixture& f, const std::string& key, bool commits) {
    soci::session other;
    f.ctx.connect(other);
    transaction_runner other_runner{other};
    std::promise<void> written;
    std::atomic<std::chrono::steady_clock::rep> slept_until{0};
    std::jthread first([&] {
        try {
            f.runner.run([&](unit_of_work& tx) {
                auto r = f.store.try_reserve(tx, bank::transfer_key(key), bank::fingerprint, 1min);
                REQUIRE(r.status == reservation_status::reserved);
                bank::move_money(tx.sql(), key, 10);
                written.set_value();
                std::this_thread::sleep_for(300ms);  // the duplicate arrives now
                slept_until = std::chrono::steady_clock::now().time_since_epoch().count();
                if (!commits) throw bank::business_failure();
                REQUIRE(f.store.complete(tx, bank::transfer_key(key), r.token, bank::fingerprint, "moved 10", 24h));
            });
        } catch (const bank::business_failure&) {
        }
    });
    written.get_future().wait();
    const auto outcome = bank::transfer(f.store, other_runner, key, 10);
    const auto ended = std::chrono::steady_clock::now().time_since_epoch().count();
    first.join();
    return {outcome, slept_until != 0 && ended >= slept_until};
}

}  // namespace

// A commit lands the business rows and the completed record together; a retry replays.
TEST_CASE("sql contract: a commit lands the business rows and the completed record together; a retry replays") {
    fixture f;
    CHECK(bank::transfer(f.store, f.runner, "t-1", 25) == bank::outcome::executed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 25);
    auto replay = f.store.try_reserve(bank::transfer_key("t-1"), bank::fingerprint, 1min);
    CHECK(replay.status == reservation_status::completed);
    CHECK(replay.payload == "moved 25");
    CHECK(bank::transfer(f.store, f.runner, "t-1", 25) == bank::outcome::replayed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 25);
    CHECK(f.ledger() == 1);
}

// A rollback after complete takes the record with the business rows, so a retry runs again.
TEST_CASE("sql contract: a rollback after complete leaves no record, so a retry runs again") {
    fixture f;
    CHECK_THROWS_AS(f.runner.run([&](unit_of_work& tx) {
        auto r = f.store.try_reserve(tx, bank::transfer_key("t-2"), bank::fingerprint, 1min);
        REQUIRE(r.status == reservation_status::reserved);
        bank::move_money(tx.sql(), "t-2", 10);
        REQUIRE(f.store.complete(tx, bank::transfer_key("t-2"), r.token, bank::fingerprint, "moved", 24h));
        throw bank::business_failure();  // after complete: the record goes with the data
    }),
                    bank::business_failure);
    CHECK(f.runner.last_state() == transaction_state::rolled_back);
    CHECK(f.records() == 0);
    CHECK(f.ledger() == 0);
    CHECK(bank::detached_status(f.store, "t-2") == reservation_status::reserved);
    CHECK(bank::transfer(f.store, f.runner, "t-2", 10) == bank::outcome::executed);
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
}

// A result the runner's predicate declines rolls back the same way: no record, no money moved.
TEST_CASE("sql contract: a result the runner's predicate declines rolls back: no record, no money moved") {
    fixture f;
    const long long balance_before = bank::balance(f.session, "alice");
    const long long ledger_before = f.ledger();
    const bool ok = f.runner.run(
        [&](unit_of_work& tx) {
            auto r = f.store.try_reserve(tx, bank::transfer_key("t-3"), bank::fingerprint, 1min);
            REQUIRE(r.status == reservation_status::reserved);
            bank::move_money(tx.sql(), "t-3", 10);
            return false;  // e.g. the provider declined: roll back
        },
        [](bool result) { return result; });
    CHECK_FALSE(ok);
    CHECK(bank::detached_status(f.store, "t-3") == reservation_status::reserved);
    CHECK(bank::balance(f.session, "alice") == balance_before);
    CHECK(f.ledger() == ledger_before);
}

// Inside the transaction a second reserve sees the key in flight; release frees
// it there, and the reservation taken again commits.
TEST_CASE("sql contract: release inside the transaction frees the key; a second reserve there sees it in flight") {
    fixture f;
    f.runner.run([&](unit_of_work& tx) {
        auto r = f.store.try_reserve(tx, bank::transfer_key("t-4"), bank::fingerprint, 1min);
        REQUIRE(r.status == reservation_status::reserved);
        CHECK(f.store.try_reserve(tx, bank::transfer_key("t-4"), bank::fingerprint, 1min).status ==
              reservation_status::in_flight);
        CHECK(f.store.try_reserve(tx, bank::transfer_key("t-4"), "other", 1min).status ==
              reservation_status::fingerprint_mismatch);
        CHECK_FALSE(f.store.release(tx, bank::transfer_key("t-4"), "other-token"));
        CHECK(f.store.release(tx, bank::transfer_key("t-4"), r.token));
        CHECK(f.store.try_reserve(tx, bank::transfer_key("t-4"), bank::fingerprint, 1min).status ==
              reservation_status::reserved);
    });
    CHECK(bank::detached_status(f.store, "t-4") == reservation_status::in_flight);
}

// A duplicate on another connection waits for the first transfer's commit, then replays it.
TEST_CASE("sql contract: a duplicate on another connection waits for the first commit, then replays it") {
    fixture f;
    const auto [outcome, waited] = duplicate_during(f, "t-5", true);
    CHECK(outcome == bank::outcome::replayed);
    CHECK(waited);  // for the first commit
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(f.ledger() == 1);
}

// The transactional calls refuse a lease or retention above 100 years before
// writing anything; the longest accepted ones commit.
TEST_CASE("sql contract: a lease or retention above 100 years is refused inside the transaction") {
    fixture f;
    const auto key = bank::transfer_key("t-forever");
    f.runner.run([&](unit_of_work& tx) {
        CHECK_THROWS_AS((void)f.store.try_reserve(tx, key, bank::fingerprint, duration::max()), std::invalid_argument);
        CHECK_THROWS_AS((void)f.store.try_reserve(tx, key, bank::fingerprint, max_duration + 1ns),
                        std::invalid_argument);
        auto r = f.store.try_reserve(tx, key, bank::fingerprint, max_duration);
        REQUIRE(r.status == reservation_status::reserved);
        CHECK_THROWS_AS((void)f.store.complete(tx, key, r.token, bank::fingerprint, "p", duration::max()),
                        std::invalid_argument);
        CHECK(f.store.try_reserve(tx, key, bank::fingerprint, 1s).status == reservation_status::in_flight);
        CHECK(f.store.complete(tx, key, r.token, bank::fingerprint, "kept", max_duration));
    });
    CHECK(f.records() == 1);
    CHECK(f.store.try_reserve(key, bank::fingerprint, 1s).payload == "kept");
}

// A duplicate waiting on a reservation whose transaction rolls back runs itself.
TEST_CASE("sql contract: a duplicate waiting on a reservation that rolls back runs itself") {
    fixture f;
    const auto [outcome, waited] = duplicate_during(f, "t-6", false);
    CHECK(outcome == bank::outcome::executed);
    CHECK(waited);  // for the first rollback
    CHECK(bank::balance(f.session, "alice") == bank::opening_balance - 10);
    CHECK(f.ledger() == 1);
    CHECK(bank::detached_status(f.store, "t-6") == reservation_status::completed);
}

TEST_SUITE("store_admin") {
    // store_admin::forget: a completed or expired record goes, by its digest or its
    // 16 bytes, and its key then runs anew; one in flight stays unless forced; an
    // absent one and a digest of another length change nothing. `f.ctx.advance(d)` lets d
    // of the store's time go by (a manual clock, or a real wait).
    TEST_CASE("sql contract: store_admin::forget deletes one record; one in flight only when forced") {
        fixture f;
        store_admin& admin = f.admin();
        const record_key done("forget", "done"), stale("forget", "stale"), running("forget", "running"),
            other("forget", "other");
        const auto first16 = [](const record_key& k) { return std::span<const std::byte>(k.digest()).first(16); };
        const auto d = f.store.try_reserve(done, "fp", 1min);
        REQUIRE(f.store.complete(done, d.token, "fp", "receipt", 1h));
        REQUIRE(f.store.try_reserve(stale, "fp", 100ms).status == reservation_status::reserved);
        f.ctx.advance(200ms);
        const auto r = f.store.try_reserve(running, "fp", 1h);
        REQUIRE(r.status == reservation_status::reserved);
        REQUIRE(f.store.try_reserve(other, "fp", 1h).status == reservation_status::reserved);
        REQUIRE(f.records() == 4);

        // Not there, or named by a digest of another length: nothing changes.
        CHECK(admin.forget(record_key("forget", "never").digest(), true).outcome == forget_outcome::not_found);
        CHECK_THROWS_AS((void)admin.forget(std::span<const std::byte>(done.digest()).first(15), true),
                        std::invalid_argument);
        CHECK_THROWS_AS((void)admin.forget(std::span<const std::byte>(), true), std::invalid_argument);
        CHECK(f.records() == 4);

        const forget_result completed = admin.forget(done.digest(), false);
        CHECK(completed.outcome == forget_outcome::deleted);
        CHECK(completed.record.completed);
        CHECK(completed.record.name_space == "forget");
        CHECK(completed.record.payload_bytes == 7);
        CHECK_FALSE(admin.inspect(done.digest(), false));
        CHECK(f.store.try_reserve(done, "fp", 1min).status == reservation_status::reserved);  // runs anew
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
        CHECK(f.store.try_reserve(running, "fp", 1h).status == reservation_status::in_flight);  // untouched
        const forget_result forced = admin.forget(running.digest(), true);
        CHECK(forced.outcome == forget_outcome::deleted);
        CHECK_FALSE(forced.record.completed);
        CHECK_FALSE(admin.inspect(running.digest(), false));
        CHECK(f.store.try_reserve(running, "fp", 1h).status == reservation_status::reserved);

        CHECK(admin.inspect(other.digest(), false));  // only the named records went
        CHECK(f.records() == 2);
    }

    // A remembered key (profile_options::remember): the purge keeps its
    // tombstone, counted and deleted once its window ends; forget deletes it
    // with the record, or alone, and the key runs anew.
    TEST_CASE("sql contract: store_admin purges ended tombstones and forget deletes a remembered key's") {
        fixture f;
        store_admin& admin = f.admin();
        const auto tombstones = [&] { return bank::count(f.session, "SELECT count(*) FROM idem_tombstones"); };
        const record_key gone("remember", "gone"), kept("remember", "kept"), live("remember", "live");
        const auto g = f.store.try_reserve(gone, "fp", 100ms);
        REQUIRE(f.store.complete(gone, g.token, "fp", "receipt", 200ms, 1h));
        const auto k = f.store.try_reserve(kept, "fp", 100ms);
        REQUIRE(f.store.complete(kept, k.token, "fp", "receipt", 200ms, 2s));
        const auto l = f.store.try_reserve(live, "fp", 100ms);
        REQUIRE(f.store.complete(live, l.token, "fp", "receipt", 1h, 2h));
        REQUIRE(tombstones() == 3);  // written with the results
        f.ctx.advance(400ms);
        CHECK(admin.count_expired(0s) == 2);  // two results; no tombstone's window ended
        while (admin.purge_batch(1000, 0s) > 0) {
        }
        CHECK(f.records() == 1);
        CHECK(tombstones() == 3);
        CHECK(f.store.try_reserve(gone, "fp", 1min).status == reservation_status::expired);

        // A tombstone alone: forget deletes it, and the key runs again.
        const forget_result alone = admin.forget(gone.digest(), false);
        CHECK(alone.outcome == forget_outcome::tombstone_deleted);
        CHECK(alone.tombstone);
        CHECK(alone.record.expires_at > alone.record.now + 50min);
        CHECK(admin.forget(gone.digest(), false).outcome == forget_outcome::not_found);
        CHECK(f.store.try_reserve(gone, "fp", 1min).status == reservation_status::reserved);
        // With its record: both go.
        const forget_result both = admin.forget(std::span<const std::byte>(live.digest()).first(16), false);
        CHECK(both.outcome == forget_outcome::deleted);
        CHECK(both.tombstone);
        CHECK(f.store.try_reserve(live, "fp", 1min).status == reservation_status::reserved);
        CHECK(tombstones() == 1);  // kept's

        // Its window over: counted, then purged within the batch's bound.
        CHECK(f.store.try_reserve(kept, "fp", 1min).status == reservation_status::expired);
        f.ctx.advance(2s);
        CHECK(admin.count_expired(0s) >= 1);
        CHECK(admin.purge_batch(1000, 0s) >= 1);
        CHECK(tombstones() == 0);
        CHECK(f.store.try_reserve(kept, "fp", 1min).status == reservation_status::reserved);
    }

    // store_admin::recent: the namespace's records written last, newest first,
    // expired ones too, at most `limit`; the namespace compared byte for byte;
    // bad arguments are std::invalid_argument.
    TEST_CASE("sql contract: store_admin::recent lists a namespace's records written last, newest first") {
        fixture f;
        store_admin& admin = f.admin();
        std::vector<record_key> keys;
        for (int i = 0; i < 5; ++i) {
            keys.emplace_back("recent", "k-" + std::to_string(i));
            const auto r = f.store.try_reserve(keys.back(), "fp", i == 0 ? 50ms : 1h);
            REQUIRE(r.status == reservation_status::reserved);
            if (i % 2 == 1) REQUIRE(f.store.complete(keys.back(), r.token, "fp", std::string(i, 'p'), 1h));
            f.ctx.advance(20ms);
        }
        for (const std::string ns : {"recent.other", "Recent", "recen"})
            REQUIRE(f.store.try_reserve(record_key(ns, "k-9"), "fp", 1h).status == reservation_status::reserved);
        f.ctx.advance(100ms);  // k-0's lease is over

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
        CHECK(f.records() == 8);
    }

    // store_admin::completed_since: the namespace's records completed at or after
    // a time, newest first, expired ones too, never one in flight, at most
    // `limit`; bad arguments are std::invalid_argument; nothing changes.
    TEST_CASE("sql contract: store_admin::completed_since lists what a namespace completed since a time") {
        fixture f;
        store_admin& admin = f.admin();
        std::vector<record_key> keys;
        for (int i = 0; i < 6; ++i) {
            keys.emplace_back("since", "k-" + std::to_string(i));
            const auto r = f.store.try_reserve(keys.back(), "fp", 1h);
            REQUIRE(r.status == reservation_status::reserved);
            // k-3 stays in flight; k-1 is kept only 50 ms.
            if (i != 3) REQUIRE(f.store.complete(keys.back(), r.token, "fp", std::string(i, 'p'), i == 1 ? 50ms : 1h));
            f.ctx.advance(20ms);
        }
        for (const std::string ns : {"since.other", "Since"}) {
            const auto r = f.store.try_reserve(record_key(ns, "k-9"), "fp", 1h);
            REQUIRE(f.store.complete(record_key(ns, "k-9"), r.token, "fp", "other", 1h));
        }
        f.ctx.advance(100ms);  // k-1's retention is over
        const auto first = admin.inspect(keys[1], false);
        REQUIRE(first);
        const time_point since = first->created_at;  // k-1's completion, on the store's clock
        const auto id_of = [](const record_key& k) {
            std::array<std::byte, 16> id{};
            std::copy_n(k.digest().begin(), 16, id.begin());
            return id;
        };

        const auto all = admin.completed_since("since", since, max_recent_records);
        REQUIRE(all.size() == 4);  // k-5, k-4, k-2, k-1: not k-3 (in flight) nor k-0 (before)
        const int expected[] = {5, 4, 2, 1};
        for (std::size_t i = 0; i < all.size(); ++i) {
            CAPTURE(i);
            CHECK(all[i].key_hash == id_of(keys[static_cast<std::size_t>(expected[i])]));
            CHECK(all[i].state.completed);
            CHECK(all[i].state.name_space == "since");
            CHECK(all[i].state.payload_bytes == static_cast<std::size_t>(expected[i]));
            CHECK(all[i].state.created_at >= since);
            if (i > 0) CHECK(all[i - 1].state.created_at > all[i].state.created_at);
        }
        CHECK(all.back().state.expired());  // k-1: listed though expired
        CHECK_FALSE(all.front().state.expired());

        const auto two = admin.completed_since("since", since, 2);
        REQUIRE(two.size() == 2);
        CHECK(two[0].key_hash == id_of(keys[5]));
        CHECK(two[1].key_hash == id_of(keys[4]));
        // From the epoch (or before it): every completed record of the namespace.
        CHECK(admin.completed_since("since", time_point{}, 100).size() == 5);
        CHECK(admin.completed_since("since", time_point::min(), 100).size() == 5);
        CHECK(admin.completed_since("since", all.front().state.created_at + 1ms, 100).empty());
        CHECK(admin.completed_since("since.other", time_point{}, 100).size() == 1);
        CHECK(admin.completed_since("absent", time_point{}, 100).empty());

        for (const std::size_t limit : {std::size_t{0}, max_recent_records + 1}) {
            CAPTURE(limit);
            CHECK_THROWS_AS((void)admin.completed_since("since", since, limit), std::invalid_argument);
        }
        CHECK_THROWS_AS((void)admin.completed_since("", since, 10), std::invalid_argument);
        CHECK_THROWS_AS((void)admin.completed_since("caf\xC3", since, 10), std::invalid_argument);
        CHECK(f.records() == 8);
    }

    // store_admin::completed_since with a scope: only that scope's records; the
    // same key text under two scopes is two records, each listed under its own.
    TEST_CASE("sql contract: store_admin::completed_since lists one scope's records when given one") {
        fixture f;
        store_admin& admin = f.admin();
        const auto complete = [&](const record_key& key) {
            const auto r = f.store.try_reserve(key, "fp", 1h);
            REQUIRE(r.status == reservation_status::reserved);
            REQUIRE(f.store.complete(key, r.token, "fp", "done", 1h));
        };
        const record_key a1("scoped", scope::tenant("a"), "k-1"), a2("scoped", scope::tenant("a"), "k-2"),
            b1("scoped", scope::tenant("b"), "k-1"), g1("scoped", scope::global(), "k-1"),
            a_reserved("scoped", scope::tenant("a"), "k-3");
        for (const record_key& k : {a1, a2, b1, g1}) complete(k);
        REQUIRE(f.store.try_reserve(a_reserved, "fp", 1h).status == reservation_status::reserved);
        const auto hashes = [](const std::vector<listed_record>& rows) {
            std::set<std::array<std::byte, 16>> out;
            for (const listed_record& l : rows) out.insert(l.key_hash);
            return out;
        };
        const auto id_of = [](const record_key& k) {
            std::array<std::byte, 16> id{};
            std::copy_n(k.digest().begin(), 16, id.begin());
            return id;
        };
        CHECK(hashes(admin.completed_since("scoped", scope::tenant("a"), time_point{}, 100)) ==
              std::set{id_of(a1), id_of(a2)});
        CHECK(hashes(admin.completed_since("scoped", scope::tenant("b"), time_point{}, 100)) == std::set{id_of(b1)});
        CHECK(hashes(admin.completed_since("scoped", scope::global(), time_point{}, 100)) == std::set{id_of(g1)});
        CHECK(admin.completed_since("scoped", scope::tenant("c"), time_point{}, 100).empty());
        CHECK(admin.completed_since("scoped", time_point{}, 100).size() == 4);
        CHECK(admin.completed_since("scoped", std::nullopt, time_point{}, 100).size() == 4);
        CHECK(admin.completed_since("other", scope::tenant("a"), time_point{}, 100).empty());
        CHECK(f.records() == 5);
    }

    // store_admin::rewrite_payloads: every completed record once, in key-hash
    // order, batch by batch; in flight ones never; a replacement lands (a replay
    // returns it), nullopt keeps the payload; a throw leaves its batch as it was.
    TEST_CASE("sql contract: store_admin::rewrite_payloads walks every completed record once, in key-hash order") {
        fixture f;
        store_admin& admin = f.admin();
        std::vector<record_key> keys;
        for (int i = 0; i < 7; ++i) {
            keys.emplace_back("rewrite", "k-" + std::to_string(i));
            const auto r = f.store.try_reserve(keys.back(), "fp", 1h);
            REQUIRE(r.status == reservation_status::reserved);
            if (i != 3) REQUIRE(f.store.complete(keys.back(), r.token, "fp", "payload " + std::to_string(i), 1h));
        }
        // A rewrite that throws at its batch's fourth record: nothing of the batch changes.
        int calls = 0;
        CHECK_THROWS_AS((void)admin.rewrite_payloads(std::nullopt, 4,
                                                     [&](const stored_payload&) -> std::optional<std::string> {
                                                         if (++calls == 4) throw std::runtime_error("no");
                                                         return "changed";
                                                     }),
                        std::runtime_error);
        CHECK(calls == 4);
        std::vector<std::array<std::byte, 16>> seen;
        std::optional<std::array<std::byte, 16>> after;
        std::size_t batches = 0, rewritten = 0;
        do {
            const rewrite_progress batch =
                admin.rewrite_payloads(after, 4, [&](const stored_payload& p) -> std::optional<std::string> {
                    seen.push_back(p.key_hash);
                    if (p.payload == "payload 2") return std::nullopt;  // kept as it is
                    return "rewritten " + std::string(p.payload);
                });
            ++batches;
            rewritten += batch.rewritten;
            CHECK(batch.read <= 4);
            after = batch.next;
        } while (after);
        CHECK(batches == 2);
        CHECK(seen.size() == 6);  // k-3 is in flight
        CHECK(std::is_sorted(seen.begin(), seen.end()));
        CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
        CHECK(rewritten == 5);
        for (int i = 0; i < 7; ++i) {
            CAPTURE(i);
            const auto r = f.store.try_reserve(keys[static_cast<std::size_t>(i)], "fp", 1h);
            if (i == 3) {
                CHECK(r.status == reservation_status::in_flight);
            } else {
                REQUIRE(r.status == reservation_status::completed);
                CHECK(r.payload == (i == 2 ? "payload 2" : "rewritten payload " + std::to_string(i)));
            }
        }
        CHECK_THROWS_AS(
            (void)admin.rewrite_payloads(std::nullopt, 0, [](const stored_payload&) { return std::nullopt; }),
            std::invalid_argument);
        CHECK(f.records() == 7);
    }

}  // TEST_SUITE("store_admin")

}  // namespace idem::contract
