// The native sqlite3 handle behind a SOCI session: statements we prepare once
// per connection and bind as blobs, and SQLite result codes as idem::store_error.
// soci-sqlite3.h wraps sqlite3.h in namespace sqlite_api; include this header
// only from .cpp files.
#pragma once

#include <soci/sqlite3/soci-sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "idem/error.hpp"

namespace soci {
class session;
}

namespace idem::detail {
class sql_dialect;
}

namespace idem::detail::sqlite {

using database = sqlite_api::sqlite3;

// SQLite as the runner speaks it (through the native handle), registered by
// the SQLite store's library as it loads.
[[nodiscard]] const sql_dialect& dialect() noexcept;
void install_dialect() noexcept;
// Registers the URLs the store answers and its factory with the store registry (sqlite_factory.cpp).
void register_store();

// The handle of a connected sqlite3 session; std::invalid_argument for any other session.
[[nodiscard]] database* native_handle(soci::session& session);

[[nodiscard]] store_failure classify(int result_code) noexcept;
// A store_error for `result_code`, its message the code's generic text (never a bound value).
[[nodiscard]] store_error error(int result_code, std::string_view what);
// The last error on `db`, with its extended result code.
[[noreturn]] void throw_last_error(database* db, std::string_view what);

// Runs SQL without results (several statements allowed).
void execute(database* db, const char* sql, std::string_view what);

// A prepared statement kept for the life of its connection.
class statement {
public:
    // A statement that fails to prepare (SQLITE_ERROR: a missing table or column)
    // is a schema failure.
    statement(database* db, std::string_view sql, std::string_view what);
    ~statement();
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    // Binds by 1-based index. Blob and text bindings must outlive the step.
    void bind(int index, std::span<const std::byte> blob);
    void bind_blob(int index, std::string_view bytes);
    void bind_text(int index, std::string_view text);
    void bind(int index, std::int64_t value);

    // true: a row is ready; false: done.
    [[nodiscard]] bool step();
    // Makes the statement reusable and drops its bindings.
    void reset() noexcept;

    [[nodiscard]] int column_type(int index) const noexcept;
    // Empty when the column is NULL or not of that type.
    [[nodiscard]] std::optional<std::int64_t> column_int(int index) const noexcept;
    [[nodiscard]] std::optional<std::string_view> column_blob(int index) const noexcept;
    [[nodiscard]] std::optional<std::string_view> column_text(int index) const noexcept;

    [[nodiscard]] database* db() const noexcept { return db_; }

private:
    database* db_;
    sqlite_api::sqlite3_stmt* stmt_ = nullptr;
    std::string_view what_;
};

// Resets a statement when the scope ends, however it ends.
class statement_use {
public:
    explicit statement_use(statement& s) noexcept : statement_(s) {}
    ~statement_use() { statement_.reset(); }
    statement_use(const statement_use&) = delete;
    statement_use& operator=(const statement_use&) = delete;
    statement* operator->() noexcept { return &statement_; }

private:
    statement& statement_;
};

}  // namespace idem::detail::sqlite
