// Any values in a stored SQLite row (each column NULL, an integer, a real, text
// or a blob, CHECK constraints bypassed as a hand edit could): reading it to
// answer a reserve, taking it over and inspecting it either work or fail with
// store_error(corrupt_record); nothing overflows, nothing else is thrown.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"
#include "sql/migrations.hpp"
#include "sql/record_id.hpp"
#include "sqlite_admin.hpp"
#include "sqlite_records.hpp"

namespace idem::detail {
std::span<const embedded_migration> sqlite_migrations();  // generated from migrations/sqlite
}

namespace {

namespace sqlite = idem::detail::sqlite;
using namespace sqlite_api;

constexpr std::int64_t now_ms = 1'750'000'000'000;

sqlite::database* database() {
    static sqlite::database* db = [] {
        sqlite::database* d = nullptr;
        if (sqlite3_open(":memory:", &d) != SQLITE_OK) throw std::runtime_error("cannot open an in-memory database");
        for (const auto& m : idem::detail::sqlite_migrations())
            sqlite::execute(d, std::string(m.sql).c_str(), "creating the schema");
        return d;
    }();
    return db;
}

// One column's value: its first byte picks the type, the rest is the value.
void bind(sqlite3_stmt* s, int index, std::string_view value) {
    if (value.empty()) {
        sqlite3_bind_null(s, index);
        return;
    }
    const std::string_view bytes = value.substr(1);
    char number[8] = {};
    std::memcpy(number, bytes.data(), std::min<std::size_t>(bytes.size(), sizeof number));
    switch (static_cast<unsigned char>(value[0]) % 5) {
        case 0: sqlite3_bind_null(s, index); break;
        case 1: {
            std::int64_t i = 0;
            std::memcpy(&i, number, sizeof i);
            sqlite3_bind_int64(s, index, i);
            break;
        }
        case 2: {
            double d = 0;
            std::memcpy(&d, number, sizeof d);
            sqlite3_bind_double(s, index, d);
            break;
        }
        case 3: sqlite3_bind_text(s, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT); break;
        default: sqlite3_bind_blob(s, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
    }
}

// Plants the row; false when SQLite itself refuses it (NOT NULL).
bool plant(const idem::record_key& key, const std::vector<std::string_view>& columns) {
    sqlite::database* db = database();
    sqlite::execute(db, "DELETE FROM idem_records; PRAGMA ignore_check_constraints = ON", "clearing");
    sqlite3_stmt* s = nullptr;
    const char* sql =
        "INSERT INTO idem_records (key_hash, namespace, state, token, fingerprint, payload, expires_at, updated_at) "
        "VALUES (?1, 'fuzz', ?2, ?3, ?4, ?5, ?6, ?7)";
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) throw std::runtime_error("cannot prepare");
    const auto id = idem::detail::record_id(key.digest());
    sqlite3_bind_blob(s, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    for (int i = 0; i < 6; ++i) bind(s, i + 2, idem::fuzz::part(columns, static_cast<std::size_t>(i)));
    const bool planted = sqlite3_step(s) == SQLITE_DONE;
    sqlite3_finalize(s);
    sqlite::execute(db, "PRAGMA ignore_check_constraints = OFF", "checking again");
    return planted;
}

template <class Step>
void expect_only_corrupt(Step step) {
    try {
        step();
    } catch (const idem::store_error& e) {
        if (e.failure() != idem::store_failure::corrupt_record) throw;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const idem::record_key key("fuzz", "k");
    // state, token, fingerprint, payload, expires_at, updated_at
    if (!plant(key, idem::fuzz::split(idem::fuzz::as_text(data, size)))) return 0;
    sqlite::record_statements records(database());
    sqlite::admin_statements admin(database());
    expect_only_corrupt([&] {
        if (const auto r = admin.inspect(idem::detail::record_id_of(key.digest()), true, now_ms)) {
            if (r->completed && !r->payload) throw std::logic_error("a completed record without its payload");
            if (r->expired() != (r->expires_at <= r->now)) throw std::logic_error("expired() disagrees");
        }
    });
    expect_only_corrupt([&] {
        if (const auto r = records.peek(key, "fp", now_ms); r && r->status == idem::reservation_status::reserved)
            throw std::logic_error("a read answered reserved");
    });
    expect_only_corrupt([&] {
        const auto r =
            records.try_reserve(key, "fp", "token",
                                idem::detail::record_times_of(idem::time_point(std::chrono::milliseconds(now_ms)),
                                                              std::chrono::minutes(1)));
        if (r.status == idem::reservation_status::reserved && r.token != "token")
            throw std::logic_error("reserved with another token");
    });
    (void)records.purge(now_ms, 10);
    return 0;
}
