// One scenario SQL stores share whose rows only each dialect's own SQL can
// plant: times a time_point cannot hold. Called from each store's tests
// (tests/sqlite/sqlite_store_test.cpp, tests/postgresql/postgresql_store_test.cpp);
// the scenarios that need no dialect SQL run in the SQL-store contract suite
// (lib/sql_contract).
#pragma once

#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "bank.hpp"
#include "idem/store_admin.hpp"

namespace idem::test {

// Rows whose times a time_point cannot hold, written by the dialect's own SQL
// (`plant(key, which)`: "future" past 2262, "infinity", "-infinity"), are read,
// inspected and purged without overflow: the far ones stay live, the one before
// all time is expired.
inline void times_beyond_time_point_are_clamped(
    transactional_record_store& store, soci::session& session, store_admin& admin,
    const std::function<void(const std::string&, const std::string&)>& plant) {
    using namespace std::chrono_literals;
    const std::map<std::string, std::string> rows = {
        {"far-future", "future"}, {"far-infinity", "infinity"}, {"far-past", "-infinity"}};
    for (const auto& [key, which] : rows) {
        REQUIRE(store.try_reserve(record_key("far", key), "fp", 1min).status == reservation_status::reserved);
        plant(key, which);
    }
    for (const std::string key : {"far-future", "far-infinity"}) {
        CAPTURE(key);
        const record_key k("far", key);
        CHECK(store.try_reserve(k, "fp", 1s).status == reservation_status::in_flight);
        CHECK(store.try_reserve(k, "other", 1s).status == reservation_status::fingerprint_mismatch);
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
    CHECK(bank::count(session, "SELECT count(*) FROM idem_records") == 2);
    CHECK(store.try_reserve(record_key("far", "far-past"), "fp", 1s).status == reservation_status::reserved);
}

}  // namespace idem::test
