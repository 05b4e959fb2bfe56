// SQLite's C API for the benchmarks' hand-written statements: the connection
// behind a SOCI session, a script run at once, and a statement prepared once.
#pragma once

#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace idem::bench {

using sqlite_api::sqlite3;
using sqlite_api::sqlite3_stmt;

inline sqlite3* native(soci::session& s) {
    return static_cast<soci::sqlite3_session_backend*>(s.get_backend())->conn_;
}

inline void exec(sqlite3* db, const std::string& sql) {
    char* message = nullptr;
    if (sqlite_api::sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
        const std::string why = message != nullptr ? message : "?";
        sqlite_api::sqlite3_free(message);
        throw std::runtime_error("bench: " + why + " in " + sql);
    }
}

// A statement prepared once; each use binds, steps to the end and resets.
class statement {
public:
    statement(sqlite3* db, const char* sql) : db_(db) {
        if (sqlite_api::sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK)
            throw std::runtime_error(std::string("bench: ") + sqlite_api::sqlite3_errmsg(db) + " in " + sql);
    }
    ~statement() { sqlite_api::sqlite3_finalize(stmt_); }
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    statement& bind(int i, std::int64_t v) { return check(sqlite_api::sqlite3_bind_int64(stmt_, i, v)); }
    statement& bind(int i, const void* data, std::size_t size) {
        return check(sqlite_api::sqlite3_bind_blob(stmt_, i, data, static_cast<int>(size), SQLITE_STATIC));
    }
    statement& bind(int i, const std::string& text) {
        return check(
            sqlite_api::sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_STATIC));
    }
    // Runs to the end; how many rows it returned. A constraint failure throws.
    int run() {
        int rows = 0;
        while (step()) ++rows;
        return rows;
    }
    // One row at a time: true while there is one (read it with blob()); resets after the last.
    bool step() {
        const int rc = sqlite_api::sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        sqlite_api::sqlite3_reset(stmt_);
        if (rc != SQLITE_DONE) throw std::runtime_error(std::string("bench: ") + sqlite_api::sqlite3_errmsg(db_));
        return false;
    }
    [[nodiscard]] std::string blob(int column) const {
        const auto* data = static_cast<const char*>(sqlite_api::sqlite3_column_blob(stmt_, column));
        return data == nullptr
                   ? std::string()
                   : std::string(data, static_cast<std::size_t>(sqlite_api::sqlite3_column_bytes(stmt_, column)));
    }
    // Ends a use that stopped before the last row.
    void reset() { sqlite_api::sqlite3_reset(stmt_); }

private:
    statement& check(int rc) {
        if (rc != SQLITE_OK) throw std::runtime_error(std::string("bench: bind: ") + sqlite_api::sqlite3_errmsg(db_));
        return *this;
    }
    sqlite3* db_;
    sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace idem::bench
