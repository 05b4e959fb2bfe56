// store_admin on the SQLite store, on its manual clock: what inspect reports,
// where "expired at least older_than ago" starts, and that purge_batch keeps
// its limit and never takes a live row.
#include <doctest/doctest.h>

#include <span>
#include <stdexcept>

#include "idem/sqlite_store.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

struct admin_file {
    idem::test::temp_dir dir{"sqlite-admin"};
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    idem::sqlite_store store{{.path = (dir.path() / "admin.db").string(),
                              .connection = {.synchronous = idem::sqlite_synchronous::off},
                              .time = clock}};

    // A completed record expiring `retention` from now.
    void completed(const std::string& key, std::string_view payload, idem::duration retention) {
        const idem::record_key k{"admin", key};
        const auto r = store.try_reserve(k, "fp", 1min);
        REQUIRE(r.status == idem::reservation_status::reserved);
        REQUIRE(store.complete(k, r.token, "fp", payload, retention));
    }
    void in_flight(const std::string& key, idem::duration lease) {
        REQUIRE(store.try_reserve(idem::record_key{"admin", key}, "fp", lease).status ==
                idem::reservation_status::reserved);
    }
};

}  // namespace

TEST_CASE("migrate through store_admin: the store's own migrations, nothing left after open") {
    admin_file f;
    idem::store_admin& admin = f.store;
    CHECK(admin.migrate().empty());
}

TEST_CASE("inspect reports state, times on the store's clock, payload size, and the payload only when asked") {
    admin_file f;
    const auto written = f.clock->now();
    f.completed("done", std::string("a\0b", 3), 1h);
    f.clock->advance(10s);
    f.in_flight("running", 30s);

    const idem::record_key done{"admin", "done"};
    auto r = f.store.inspect(done.digest(), false);
    REQUIRE(r);
    CHECK(r->completed);
    CHECK(r->created_at == written);
    CHECK(r->expires_at == written + 1h);
    CHECK(r->now == f.clock->now());
    CHECK(r->name_space == "admin");
    CHECK(r->payload_bytes == 3);
    CHECK(!r->payload);
    CHECK(!r->expired());
    // By the digest's first 16 bytes alone, the table's key; no other length.
    const std::span<const std::byte> whole(done.digest());
    CHECK(f.store.inspect(whole.first(16), false)->payload_bytes == 3);
    CHECK_THROWS_AS((void)f.store.inspect(whole.first(15), false), std::invalid_argument);
    CHECK_THROWS_AS((void)f.store.inspect(std::span<const std::byte>(), false), std::invalid_argument);
    r = f.store.inspect(done.digest(), true);
    REQUIRE(r->payload);
    CHECK(*r->payload == std::string("a\0b", 3));

    r = f.store.inspect(idem::record_key{"admin", "running"}.digest(), true);
    REQUIRE(r);
    CHECK(!r->completed);
    CHECK(r->expires_at == f.clock->now() + 30s);
    CHECK(r->payload_bytes == 0);
    CHECK(!r->payload);

    f.clock->advance(30s);
    r = f.store.inspect(idem::record_key{"admin", "running"}.digest(), false);
    CHECK(r->expired());  // still there until purged, and reported as expired

    CHECK(!f.store.inspect(idem::record_key{"admin", "absent"}.digest(), true));
}

TEST_CASE("count_expired and purge_batch: expired at least older_than ago, to the millisecond") {
    admin_file f;
    f.completed("a", "x", 1min);
    f.in_flight("b", 1min);
    f.completed("live", "x", 1h);
    CHECK(f.store.count_expired(0s) == 0);

    f.clock->advance(1min);  // a and b expire exactly now
    CHECK(f.store.count_expired(0s) == 2);
    CHECK(f.store.count_expired(1us) == 0);  // rounded up to a whole millisecond: never too young
    CHECK(f.store.count_expired(1ms) == 0);
    CHECK(f.store.purge_batch(10, 1ms) == 0);
    f.clock->advance(1ms);
    CHECK(f.store.count_expired(1ms) == 2);
    CHECK(f.store.count_expired(1us) == 2);
    CHECK(f.store.count_expired(2ms) == 0);

    CHECK(f.store.purge_batch(1, 0s) == 1);  // the limit holds
    CHECK(f.store.count_expired(0s) == 1);
    CHECK(f.store.purge_batch(10, 0s) == 1);
    CHECK(f.store.purge_batch(10, 0s) == 0);
    CHECK(f.store.inspect(idem::record_key{"admin", "live"}.digest(), false));
}

TEST_CASE("purge_batch never deletes a live row, whatever the limit") {
    admin_file f;
    for (int i = 0; i < 50; ++i) f.in_flight("lease-" + std::to_string(i), 1min);
    for (int i = 0; i < 50; ++i) f.completed("kept-" + std::to_string(i), "x", 2min);
    f.clock->advance(1min - 1ms);
    CHECK(f.store.purge_batch(1000, 0s) == 0);
    CHECK(f.store.purge_expired(1000) == 0);
    f.clock->advance(1ms);
    CHECK(f.store.count_expired(0s) == 50);
    CHECK(f.store.purge_batch(1000, 0s) == 50);
    for (int i = 0; i < 50; ++i)
        CHECK(f.store.inspect(idem::record_key{"admin", "kept-" + std::to_string(i)}.digest(), false));
}

TEST_CASE("purge_expired still purges in batches of its own") {
    admin_file f;
    for (int i = 0; i < 700; ++i) f.in_flight("r-" + std::to_string(i), 1s);
    f.clock->advance(1s);
    CHECK(f.store.purge_expired(600) == 600);
    CHECK(f.store.purge_expired(1000) == 100);
    CHECK(f.store.count_expired(0s) == 0);
}

TEST_CASE("store_admin rejects a negative older_than and a zero limit, and changes nothing") {
    admin_file f;
    f.in_flight("r", 1s);
    f.clock->advance(1s);
    CHECK_THROWS_AS((void)f.store.count_expired(-1ms), std::invalid_argument);
    CHECK_THROWS_AS(f.store.purge_batch(10, -1ms), std::invalid_argument);
    CHECK_THROWS_AS(f.store.purge_batch(0, 0s), std::invalid_argument);
    CHECK(f.store.count_expired(0s) == 1);
}

TEST_CASE("forget: a lease that ends now is over; a millisecond before, the record is still in flight") {
    admin_file f;
    f.in_flight("edge", 1min);
    const idem::record_key k{"admin", "edge"};
    f.clock->advance(1min - 1ms);
    auto r = f.store.forget(k.digest(), false);
    CHECK(r.outcome == idem::forget_outcome::refused_in_flight);
    CHECK(r.record.expires_at == r.record.now + 1ms);
    f.clock->advance(1ms);
    r = f.store.forget(k.digest(), false);
    CHECK(r.outcome == idem::forget_outcome::deleted);
    CHECK(r.record.expired());
    CHECK(!f.store.inspect(k.digest(), false));
}

TEST_CASE("recent: times on the store's clock; records written in the same millisecond in key_hash order") {
    admin_file f;
    const auto at = f.clock->now();
    f.completed("a", "xy", 1h);
    f.in_flight("b", 30s);
    const auto listed = f.store.recent("admin", 10);
    REQUIRE(listed.size() == 2);
    CHECK(listed[0].key_hash < listed[1].key_hash);
    for (const auto& l : listed) {
        CHECK(l.state.created_at == at);
        CHECK(l.state.now == at);
        CHECK(l.state.expires_at == at + (l.state.completed ? idem::duration(1h) : idem::duration(30s)));
        CHECK(l.state.payload_bytes == (l.state.completed ? 2u : 0u));
        CHECK(!l.state.payload);
    }
}
